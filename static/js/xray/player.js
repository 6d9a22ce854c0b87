/* The player and its motion: render a frame, step, play and pause, keep the active block in view,
   and fly the chosen character from its bar to the output. */

import { S, saveFrame } from "./state.js";
import { $, cfg, t } from "./dom.js";
import { activeBlocks, current, rowState } from "./frames.js";
import { drawChosen, drawOverlay, drawTokens } from "./overlay.js";
import { narrate, narrationText, readingMs } from "./narration.js";
import { chapterRow } from "./chapters.js";
import { drawSampling } from "./whatif.js";
import { refreshOpenPanels } from "./blocks.js";
import { follow } from "./zoom.js";
import { layoutAll, loadStrips } from "./rows.js";

// How long a frame stays at 1× speed: long enough to read its narration once (narration.js
// readingMs: by its words and Chinese characters, at least MIN_READ_MS); the first frame and each
// step's choice hold at least HOLD_MS (the chosen character flies to the output). The speed
// divides it: 2× and 4× for a second look, 0.5× for more time.
const HOLD_MS = 2500;
function frameMs(frame) {
  const read = readingMs(narrationText(frame));
  return frame.part === "logits" || (frame.t === 0 && frame.sub === 0) ? Math.max(HOLD_MS, read) : read;
}
/** Milliseconds frame ``index`` stays on screen while playing at the chosen speed. */
export const dwellMs = (index) => Math.round(frameMs(S.frames[index] || current()) / S.speed);
const REDUCED_MOTION = window.matchMedia("(prefers-reduced-motion: reduce)");

/** Draw the frame S.frame: lit blocks, overlays, tokens, narration, player, sampling, panels. */
export function render() {
  if (!S.trace) return;
  const frame = current();
  const active = activeBlocks(frame);
  for (const row of S.rows) {
    row.node.classList.toggle("xr-active", active.has(row.key));
    if (row.overlay) drawOverlay(row, frame);
  }
  moveBeacon(frame);
  drawTokens(frame);
  drawChosen(frame);
  drawPlayer(frame);
  narrate(frame);
  const stepIndex = frame.t === 0 ? 0 : frame.t - 1;
  if (S.drawn !== stepIndex) {
    S.drawn = stepIndex;
    drawSampling();
  }
  refreshOpenPanels();
}

/** The highlight travels: one outline glides from the block that ran to the block computing now
    (a transform, so the move costs no layout). */
function moveBeacon(frame) {
  const beacon = $("xr-beacon");
  const row = S.rows.find((r) => r.node.classList.contains("xr-active") && r.side === frame.side);
  if (!row || !row.node.offsetParent) { beacon.hidden = true; return; }
  const stage = $("xr-stage").getBoundingClientRect();
  const box = row.node.getBoundingClientRect();
  beacon.hidden = false;
  beacon.style.width = `${box.width + 6}px`;
  beacon.style.height = `${box.height + 6}px`;
  beacon.style.transform = `translate(${box.left - stage.left - 3}px, ${box.top - stage.top - 3}px)`;
}

function drawPlayer(frame) {
  const scrub = $("xr-scrub");
  scrub.max = String(Math.max(S.frames.length - 1, 0));
  scrub.value = String(S.frame);
  const phase = frame.t === 0 ? t("xray.phase_encoder")
    : t("xray.phase_step", { t: frame.t, total: S.trace.steps.length });
  const position = { phase, n: frame.sub + 1, total: frame.subs };
  const where = frame.layer === undefined ? t("xray.position", position)
    : t("xray.position_layer", { ...position, layer: t(frame.t === 0 ? "xray.encoder_layer" : "xray.decoder_layer",
      { n: frame.layer + 1, total: frame.t === 0 ? cfg.n_encoder_layers : cfg.n_decoder_layers }) });
  $("xr-where").textContent = where;
  $("xr-narration").dataset.dwellMs = String(dwellMs(S.frame));
  scrub.setAttribute("aria-valuetext", where);
  $("xr-prev").disabled = S.frame <= 0;
  $("xr-first").disabled = S.frame <= 0;
  $("xr-next").disabled = S.frame >= S.frames.length - 1;
  $("xr-last").disabled = S.frame >= S.frames.length - 1;
  const play = $("xr-play");
  play.querySelector(".xr-i-play").style.display = S.playing ? "none" : "";
  play.querySelector(".xr-i-pause").style.display = S.playing ? "" : "none";
  const label = S.playing ? play.dataset.pause : play.dataset.play;
  play.setAttribute("aria-label", label);
  play.title = label;
  play.setAttribute("aria-pressed", S.playing ? "true" : "false");
  $("xr-stage").classList.toggle("xr-playing", S.playing);
}

/** The decoder's strips, once the player leaves the landing frame: asked for in the background
    (the encoder's sub-steps come first), drawn when they come. */
function withStrips() {
  if (!S.xr || S.xr.decoder.values || S.stripsAsked) return;
  loadStrips().then(() => { layoutAll(); render(); }).catch((error) => ITT.showError(error.message));
}

/** Show frame number `frame` (clamped); the player's own ticks pass fromPlay. */
export function go(frame, fromPlay) {
  withStrips();
  const last = S.frames.length - 1;
  const next = Math.max(0, Math.min(last, frame));
  const before = current();
  S.frame = next;
  const moved = follow(current(), scrollActiveIntoView);
  render();
  const now = current();
  if (now.part === "logits" && (before.t !== now.t || before.sub !== now.sub) && next > 0) {
    requestAnimationFrame(() => fly(now));
  }
  if (!fromPlay) saveFrame();
  if (!moved) scrollActiveIntoView();
}

/** Scroll so the block computing now is below the player and on screen (playing or stepping).
    When the whole model fits below the player (the overview), keep all of it there instead, so
    the picture stands still while the highlight moves. */
function scrollActiveIntoView() {
  const row = S.rows.find((r) => r.node.classList.contains("xr-active") && r.side === (current().t === 0 ? "encoder" : "decoder"));
  if (!row) return;
  const player = $("xr-player").getBoundingClientRect();
  const stage = $("xr-stage").getBoundingClientRect();
  // where the player's bottom is once it sticks below the site header
  const top = parseFloat(getComputedStyle(document.documentElement).getPropertyValue("--xr-top")) || 0;
  const stuck = top + player.height + 10;
  if (S.overview && stage.height <= window.innerHeight - stuck) {
    if (stage.top < stuck - 1 || stage.bottom > window.innerHeight) {
      window.scrollBy({ top: stage.top - stuck, behavior: "auto" });
    }
    return;
  }
  const rect = row.node.getBoundingClientRect();
  if (rect.top < player.bottom || rect.bottom > window.innerHeight) {
    // scrolling down moves a player that has not stuck yet up with the page, until it sticks
    // below the header: aim below where it will be, not where it is
    const below = rect.top >= player.bottom ? Math.min(player.bottom, top + player.height) : player.bottom;
    window.scrollBy({ top: rect.top - below - 20, behavior: "auto" });
  }
}

/* What Play plays (the player's "Play" choice, #xr-scope): the whole translation, or one unit of
   it — this time step (the encoder's pass, or one decoding step), this layer, or this sublayer (a
   block and the Add & Norm after it). A frame outside every layer (the tokens, an embedding, the
   output) is a unit of its own. Playing stops at the unit's last frame; pressed there, Play plays
   the next unit, so a learner can go one unit at a time. */
let playUntil = -1; // the frame where playing stops

/** The last frame of the unit of ``scope`` that frame ``index`` belongs to. */
export function unitEnd(index, scope) {
  const last = S.frames.length - 1;
  const start = S.frames[index];
  if (!start || scope === "all") return last;
  let end = index;
  const same = (f) => f.t === start.t && (scope === "step" || (start.layer !== undefined && f.layer === start.layer));
  while (end < last && same(S.frames[end + 1])) {
    if (scope === "stage" && S.frames[end].part === "add_norm") break;
    end += 1;
  }
  return end;
}

export function play() {
  withStrips();
  const scope = $("xr-scope").value;
  const last = S.frames.length - 1;
  if (S.frame >= last) {
    if (scope !== "all") return; // nothing is left to play
    S.frame = 0;
  }
  playUntil = unitEnd(S.frame, scope);
  if (playUntil === S.frame) { // its unit is read: play the next one, from its start
    go(S.frame + 1, true);
    playUntil = unitEnd(S.frame, scope);
  }
  S.playing = true;
  tick();
  drawPlayer(current());
}

export function pause() {
  S.playing = false;
  clearTimeout(S.timer);
  saveFrame();
  drawPlayer(current());
}

/** Whether an open chapter's part computes at the frame on screen (playing stops there). */
function atChapter() {
  const row = chapterRow();
  return Boolean(row) && rowState(row, current()).active;
}

/** Schedule the next frame (again after a speed change). */
export function tick() {
  clearTimeout(S.timer);
  if (S.playing && S.frame >= Math.min(playUntil, S.frames.length - 1)) { pause(); return; }
  S.timer = setTimeout(() => {
    if (!S.playing) return;
    go(S.frame + 1, true);
    if (atChapter()) { pause(); return; }
    tick();
  }, dwellMs(S.frame));
}

/** Seconds the whole timeline takes to play at speed 1×. */
export function playSeconds() {
  return S.frames.reduce((sum, frame) => sum + frameMs(frame), 0) / 1000;
}

/** Jump a whole decoding time step forward (delta 1) or back (−1). */
export function stepTime(delta) {
  const frame = current();
  const target = frame.t + delta;
  const index = S.frames.findIndex((f) => f.t === target);
  if (index >= 0) go(index);
  else go(delta < 0 ? 0 : S.frames.length - 1);
}

/** The chosen character flies from its bar to the output row, then to the next decoder input. */
function fly(frame) {
  const flyer = $("xr-flyer");
  const step = S.trace.steps[frame.t - 1];
  const outRow = S.rows.find((r) => r.key === "dec-output");
  const bar = outRow && [...outRow.overlay.querySelectorAll("g")].find((g) => g.dataset.token === step.token);
  const chosenRow = S.rows.find((r) => r.type === "chosen");
  const slot = chosenRow.out.lastElementChild;
  if (!bar || !slot || !flyer.animate || REDUCED_MOTION.matches) return;
  const a = bar.getBoundingClientRect();
  const b = slot.getBoundingClientRect();
  const tokensRow = S.rows.find((r) => r.key === "dec-tokens");
  const nextButton = tokensRow.buttons[frame.t];
  const c = nextButton ? nextButton.getBoundingClientRect() : null;
  flyer.textContent = step.token;
  flyer.style.display = "block";
  const frames = [{ transform: `translate(${a.left}px, ${a.top - 6}px) scale(1.4)` },
    { transform: `translate(${b.left}px, ${b.top}px) scale(1)`, offset: c ? 0.55 : 1 }];
  if (c && c.bottom > 0 && c.top < window.innerHeight) {
    frames.push({ transform: `translate(${c.left + 4}px, ${c.top}px) scale(0.9)` });
  }
  if (S.flying) S.flying.cancel();
  S.flying = flyer.animate(frames, { duration: Math.min(1200, (HOLD_MS / S.speed) * 0.9), easing: "ease-in-out" });
  S.flying.onfinish = () => { flyer.style.display = "none"; };
  S.flying.oncancel = () => { flyer.style.display = "none"; };
}

/** Put a token in focus (side null: none) and redraw. */
export function setFocus(side, pos) {
  S.focus = side ? { side, pos } : null;
  render();
}
