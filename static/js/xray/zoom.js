/* Whole, then zoom. The x-ray lays the whole model out at once: each side's layers side by side,
   drawn small (the overview; at 1440×900 all of it fits below the player, on a phone about two
   screens). Zooming into a layer (its title, or any of its blocks, by click, tap or keyboard)
   grows that layer where it stands, its sibling layers shrinking to slim columns on either side
   (so the order of the layers stays the order on screen), with an animated transition where the
   browser has one; on a phone the page then scrolls the zoomed layer into view below the player.
   The breadcrumb, the layer's ✕ and Escape go back to the whole model. While zoomed,
   stepping or playing moves the zoom to the layer that computes next, so the block computing is
   always the one drawn large. */

import { S, saveFrame } from "./state.js";
import { $, cfg, t } from "./dom.js";
import { isSmall, layoutAll } from "./rows.js";

const REDUCED_MOTION = window.matchMedia("(prefers-reduced-motion: reduce)");
const KEY = /^[ed]-\d+$/;

let redraw = () => {};
let target = null; // the zoom asked for last (S.zoom catches up when an animation's snapshot is taken)
let moving = null; // the running view transition, if any

/** "e-1" → "Encoder layer 2 of 3" */
function layerName(key) {
  const side = key[0] === "e" ? "encoder" : "decoder";
  const total = side === "encoder" ? cfg.n_encoder_layers : cfg.n_decoder_layers;
  return t(side === "encoder" ? "xray.encoder_layer" : "xray.decoder_layer", { n: Number(key.slice(2)) + 1, total });
}

/** A zoom key from the URL, or null when it names no layer of this model. */
export function zoomFromURL(value) {
  if (!value || !KEY.test(value)) return null;
  const layers = value[0] === "e" ? cfg.n_encoder_layers : cfg.n_decoder_layers;
  return Number(value.slice(2)) < layers ? value : null;
}

/** Mark the zoomed layer on the page: classes, the buttons' state, the breadcrumb. */
function mark() {
  const stage = $("xr-stage");
  stage.classList.toggle("xr-overview", S.overview);
  if (S.zoom) stage.dataset.zoom = S.zoom; else delete stage.dataset.zoom;
  for (const grid of stage.querySelectorAll(".xr-layers")) { // the zoomed column wide, the rest slim
    const boxes = [...grid.children];
    const zoomed = boxes.findIndex((box) => box.dataset.zoom === S.zoom);
    grid.style.gridTemplateColumns = zoomed < 0 ? ""
      : boxes.map((_, i) => (i === zoomed ? "minmax(0, 1fr)" : "2rem")).join(" ");
  }
  for (const box of stage.querySelectorAll(".xr-group")) {
    const on = box.dataset.zoom === S.zoom;
    box.classList.toggle("xr-zoomed", on);
    const title = box.querySelector(".xr-group-title");
    title.setAttribute("aria-expanded", on ? "true" : "false");
    title.title = t(on ? "xray.zoom.out_help" : "xray.zoom.in_help");
  }
  const all = $("xr-crumb-all");
  all.disabled = !S.zoom;
  if (S.zoom) all.removeAttribute("aria-current"); else all.setAttribute("aria-current", "true");
  const here = $("xr-crumb-here");
  here.hidden = !S.zoom;
  here.textContent = S.zoom ? layerName(S.zoom) : "";
  $("xr-crumb-hint").textContent = t(S.zoom ? "xray.zoom.hint_out" : "xray.zoom.hint_in");
}

/** Zoom into layer ``key`` ("d-1"), or back to the whole model (null); ``then`` runs once the
    page shows it (after the animation's snapshot, when there is one). */
export function zoomTo(key, { animate = true, save = true, then = null } = {}) {
  const next = key && KEY.test(key) ? key : null;
  if (next === target) return;
  target = next;
  const apply = () => { // an animation's callback may run late: it shows the latest target
    S.zoom = target;
    mark();
    if (S.trace) { layoutAll(); redraw(); }
    if (save) saveFrame();
    if (then) then(); else if (S.zoom) showZoomed();
  };
  if (animate && !REDUCED_MOTION.matches && document.startViewTransition && !moving) {
    moving = document.startViewTransition(apply);
    moving.ready.catch(() => {}); // skipped (e.g. the tab was hidden): the page is updated anyway
    moving.finished.finally(() => { moving = null; });
  } else if (!moving) {
    apply();
  } else {
    moving.updateCallbackDone.finally(apply);
  }
}

/** Scroll the zoomed layer into view below the sticky player when it is not (a phone's column). */
function showZoomed() {
  const box = document.querySelector(".xr-group.xr-zoomed");
  if (!box) return;
  const rect = box.getBoundingClientRect();
  const player = $("xr-player").getBoundingClientRect();
  const top = parseFloat(getComputedStyle(document.documentElement).getPropertyValue("--xr-top")) || 0;
  const below = top + player.height + 8; // where the player's bottom is once it sticks
  if (rect.top >= below && rect.top < window.innerHeight - 80) return;
  window.scrollBy({ top: rect.top - below, behavior: "auto" });
}

/** The player moved to ``frame``: a zoomed view follows the computation to its layer (and
    ``then`` scrolls to it). Whether it moved. */
export function follow(frame, then) {
  if (!target || frame.layer === undefined) return false;
  const key = `${frame.side[0]}-${frame.layer}`;
  if (key === target) return false;
  zoomTo(key, { animate: !S.playing, save: !S.playing, then });
  return true;
}

/** A block's head was clicked: a small block first zooms into its layer and opens there. */
export function openFrom(row, toggle) {
  if (isSmall(row)) {
    zoomTo(`${row.side[0]}-${row.layer}`);
    if (row.panel.hidden) toggle(row);
    return;
  }
  toggle(row);
}

/** A new drawing starts at the zoom ``key`` (from the URL). */
export function startZoom(key) {
  S.zoom = key;
  target = key;
}

/** Mark the page before every layout (the overview is on from the first drawing). */
export function checkWidth() {
  S.overview = true;
  mark();
}

/** Wire the breadcrumb and Escape; ``render`` redraws the frame after a zoom. */
export function wireZoom(render) {
  redraw = render;
  $("xr-crumb-all").addEventListener("click", () => zoomTo(null));
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || !target || document.body.classList.contains("menu-open")) return;
    const tag = event.target && event.target.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
    event.preventDefault();
    const back = document.querySelector(`.xr-group-title[data-zoom="${target}"]`);
    zoomTo(null);
    if (back && document.activeElement && document.activeElement.closest(".xr-group")) back.focus();
  });
}

/** A layer title's click: zoom in, or out again when it is the zoomed one. */
export function toggleZoom(key) {
  zoomTo(target === key ? null : key);
}
