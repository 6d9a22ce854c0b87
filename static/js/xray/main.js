/* The x-ray: the whole encoder–decoder translating one sentence, drawn from the trace.
   Rows are stages; each token is a lane; each lane shows the token's vector as a strip of colours.
   Attention rows draw their weights as lines from key lanes (above) to query lanes (below).
   A player walks the computation in its order: the encoder layer by layer, then at every decoding
   time step the decoder layer by layer and the output (frames.js).
   User text only ever reaches the page through textContent or SVG text nodes.

   This module loads the sentence the URL describes and wires the controls. The parts:
   state.js (the one state object), data.js (decoding /api/xray/view), frames.js (the timeline),
   rows.js (rows, layout, strips), overlay.js (lines, bars, tokens), narration.js, player.js
   (render, play, step, scroll, motion), whatif.js (sampling knobs, forcing, comparison),
   sampling.js and beam.js (the formulas copied from Python, pure), beamtree.js, blocks.js,
   result.js (the translation above the player: the chosen decoding's, the other on request),
   saved.js (saving the x-ray to a file and opening it again), zoom.js (the one-screen overview
   and zooming into a layer), chapters.js (the guided chapters on the live picture). */

import { S, saveFrame } from "./state.js";
import { $, cfg, SIZES } from "./dom.js";
import { decodeStrips, decodeView } from "./data.js";
import { buildFrames, current, frameAtOrAfter } from "./frames.js";
import { buildRows, buildTokens, heatLinks, layoutAll, loadStrips } from "./rows.js";
import { dwellMs, go, pause, play, playSeconds, render, setFocus, stepTime, tick, unitEnd } from "./player.js";
import { decodeAll, draw, drawCompare, drawDecodingSwitch, drawSampling, switchDecoding } from "./whatif.js";
import { renderBlock, toggleBlock } from "./blocks.js";
import { loadHeads } from "./overlay.js";
import { drawBeam } from "./beamtree.js";
import { drawResult } from "./result.js";
import { filterDistribution } from "./sampling.js";
import { fromModel, showRequest, wireFiles } from "./saved.js";
import { checkWidth, openFrom, startZoom, toggleZoom, wireZoom, zoomFromURL } from "./zoom.js";
import { chapterFromURL, chapterShown, showChapter, wireChapters } from "./chapters.js";

/** Fetch what the x-ray draws for the URL's request (one answer), then build and draw everything. */
async function reload() {
  document.body.dataset.xray = "loading";
  ITT.clearError();
  const req = ITT.requestFromURL();
  // one download per sentence: what the picture draws (all logits come when a knob turns)
  const view = await ITT.api("/api/xray/view", req);
  fromModel();
  await show(view, req);
}

/** Draw a packed view of ``req``: just downloaded, or read from a saved file (saved.js), with
    every head's attention and the decoder's strips when the file holds them (``heads``,
    ``strips``). */
async function show(view, req, heads = null, strips = null) {
  document.body.dataset.xray = "loading";
  S.playing = false;
  clearTimeout(S.timer);
  const { trace, xr, original, alternative } = decodeView(view, SIZES.layout); // older files: this model's
  S.view = view;
  S.req = req;
  S.trace = trace;
  S.xr = xr;
  S.logits = null;
  S.heads = heads;
  S.headsAsked = null;
  S.strips = strips;
  S.stripsAsked = null;
  if (strips) decodeStrips(strips, xr);
  document.body.dataset.xrayStrips = xr.decoder.values ? "ready" : "none";
  S.original = original;
  S.alternative = alternative;
  S.focus = null;
  for (const state of S.open.values()) { state.position = null; state.row.panel.hidden = true; }
  S.open.clear();
  const query = ITT.params();
  S.detail = query.get("detail") === "steps" ? "steps" : "blocks";
  $("xr-detail").value = S.detail;
  buildFrames();
  startZoom(zoomFromURL(query.get("zoom")));
  buildRows((row) => openFrom(row, toggleBlock), toggleZoom);
  checkWidth();
  buildTokens(setFocus);
  const head = query.get("head");
  S.head = head === "all" || (head !== null && /^\d+$/.test(head) && Number(head) < cfg.n_heads) ? head : "avg";
  $("xr-head").value = S.head;
  if (S.head !== "avg") await loadHeads(); // the URL picks a head: its lines need every head's weights
  const frame = Number.parseInt(query.get("frame") || "", 10);
  S.frame = Number.isInteger(frame) ? Math.max(0, Math.min(S.frames.length - 1, frame)) : 0;
  if (current().t > 0) await loadStrips(); // a link into the decoding: draw it whole at once
  S.drawn = null;
  layoutAll();
  render();
  for (const key of (query.get("open") || "").split(",").slice(0, 12)) {
    const row = S.rows.find((r) => r.key === key && r.panel);
    if (row && row.panel.hidden) toggleBlock(row);
  }
  heatLinks();
  showRequest(req);
  drawDecodingSwitch();
  drawCompare();
  drawBeam();
  drawResult();
  chapterFromURL();
  document.body.dataset.xray = "ready";
  requestAnimationFrame(() => { document.body.dataset.xrayDrawnMs = String(Math.round(performance.now())); });
}

function stickyOffset() {
  const header = document.querySelector("header.site");
  const sticky = header && getComputedStyle(header).position === "sticky";
  document.documentElement.style.setProperty("--xr-top", sticky ? `${header.offsetHeight}px` : "0px");
}

function wire() {
  $("xr-first").addEventListener("click", () => go(0));
  $("xr-last").addEventListener("click", () => go(S.frames.length - 1));
  $("xr-prev").addEventListener("click", () => go(S.frame - 1));
  $("xr-next").addEventListener("click", () => go(S.frame + 1));
  $("xr-play").addEventListener("click", () => (S.playing ? pause() : play()));
  $("xr-scrub").addEventListener("input", (event) => go(Number(event.target.value)));
  $("xr-detail").addEventListener("change", (event) => {
    const { t, sub } = current(); // stay where we are: the same sub-step, or the next one kept
    S.detail = event.target.value === "steps" ? "steps" : "blocks";
    if (!S.trace) return;
    buildFrames();
    S.frame = frameAtOrAfter(t, sub);
    saveFrame();
    render();
  });
  $("xr-speed").addEventListener("change", (event) => { S.speed = Number(event.target.value) || 1; if (S.playing) tick(); });
  $("xr-head").addEventListener("change", async (event) => {
    S.head = event.target.value;
    saveFrame();
    heatLinks();
    if (S.head !== "avg" && S.trace) {
      try {
        await loadHeads();
      } catch (error) {
        ITT.showError(error.message);
      }
    }
    render();
    if (S.head === "avg" || S.head === "all") return;
    for (const state of S.open.values()) {  // opened attention blocks show the same head
      if (state.data && state.data.heads) { state.head = Number(S.head); renderBlock(state); }
    }
  });
  for (const id of ["xr-temperature", "xr-topk", "xr-topp"]) {
    $(id).addEventListener("input", () => { if (S.trace) drawSampling(); });
  }
  $("xr-draw-button").addEventListener("click", draw);
  const decodingSwitch = document.getElementById("xr-beam-link"); // only with held-out figures
  if (decodingSwitch) decodingSwitch.addEventListener("click", switchDecoding);
  $("xr-decode-all").addEventListener("click", decodeAll);
  document.addEventListener("keydown", (event) => {
    if (!S.trace || event.altKey || event.ctrlKey || event.metaKey) return;
    const target = event.target;
    const tag = target && target.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
    if (event.key === " " || event.key === "Spacebar") {
      if (tag === "BUTTON" || tag === "A") return; // the focused control gets its own click
      event.preventDefault();
      if (S.playing) pause(); else play();
    } else if (event.key === "ArrowRight") {
      event.preventDefault();
      if (event.shiftKey) stepTime(1); else go(S.frame + 1);
    } else if (event.key === "ArrowLeft") {
      event.preventDefault();
      if (event.shiftKey) stepTime(-1); else go(S.frame - 1);
    } else if (event.key === "Home") {
      event.preventDefault();
      go(0);
    } else if (event.key === "End") {
      event.preventDefault();
      go(S.frames.length - 1);
    }
  });
  let pending = false;
  let lastWidth = 0;
  const observer = new ResizeObserver(() => {
    const width = $("xr-stage").clientWidth;
    if (pending || width === lastWidth) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      lastWidth = $("xr-stage").clientWidth;
      stickyOffset();
      if (S.trace) { checkWidth(); layoutAll(); render(); }
    });
  });
  observer.observe($("xr-stage"));
  stickyOffset();
  wireZoom(render);
  wireChapters(go);
}

wire();
wireFiles(show);
ITT.start(reload);
window.ITTXray = { state: S, filterDistribution, go, play, pause, playSeconds, dwellMs, unitEnd, showChapter, chapterShown };
