/* The rows of the picture: one per stage of the model, each token a lane, each lane's vector a
   strip of colours. A row is its spec from rowSpecs() plus what makeRow() and layoutRow() add:
   key, node, headButton, panel (openable rows), fig, canvas, overlay (figure rows), lanesBox and
   buttons (token rows), out (the chosen row), heatLink (attention rows), width, stripY, scale,
   signature (what its overlay last drew). */

import { S } from "./state.js";
import { $, cfg, el, fixed, scaleOf, colourInto, SIZES, svg, t } from "./dom.js";
import { current, memoryReady, rowState } from "./frames.js";
import { decodeStrips } from "./data.js";

export const STRIP_H = 14;
export const LINES_H = 40;
export const LINES_H_OVERVIEW = 24; // a layer drawn small beside the others, on the one-screen overview
export const MEMORY_H = 12;
export const TOP_BARS = 5;

/** A row's spec from its stage in the layout (the view header's, model/explain/record.py's):
    block, its name; part, its kind; index, its place in the side's layout, which is also its
    strips' stage; an attention row's kind (the name of its weights), what it attends to, whether
    it is masked, and the stage its lines come from (input). */
function rowOf(side, entry, index) {
  const row = { side, block: entry.name, part: entry.kind, index };
  if (entry.kind === "logits") return { ...row, type: "logits" };
  if (entry.kind !== "attention") return { ...row, type: "stage", stage: index };
  return { ...row, type: "attention", stage: index, input: index - 1, kind: entry.weights,
    attends: entry.attends, masked: entry.masked };
}

/** Every row, grouped as the page draws them: per side the rows above its layers (tokens,
    embedding), the layers' groups and, for the decoder, the rows below them (output, chosen). */
function rowSpecs() {
  const specs = {};
  for (const side of ["encoder", "decoder"]) {
    const prefix = side === "encoder" ? "enc" : "dec";
    const top = [{ key: `${prefix}-tokens`, side, type: "tokens" }];
    const groups = [];
    const tail = [];
    S.xr.layout[side].forEach((entry, index) => {
      const row = rowOf(side, entry, index);
      if (entry.layer === null) {
        (entry.kind === "logits" ? tail : top).push({ ...row, key: `${prefix}-${entry.name}` });
      } else {
        if (!groups[entry.layer]) groups[entry.layer] = { side, layer: entry.layer, rows: [] };
        groups[entry.layer].rows.push(row);
      }
    });
    if (side === "decoder") tail.push({ key: "dec-chosen", side, type: "chosen" });
    specs[side] = { top, groups, tail };
  }
  return specs;
}

/** [name, shape] shown in a row's head. */
export function rowTitle(row) {
  const tr = S.trace;
  const n = row.side === "encoder" ? tr.source_tokens.length : S.trace.steps.length;
  const d = cfg.d_model;
  const sizes = SIZES;
  const attention = t("xray.attention_shape", { n, d, h: cfg.n_heads, k: d / cfg.n_heads });
  switch (row.type === "tokens" || row.type === "chosen" ? row.type : row.part) {
    case "tokens":
      return row.side === "encoder"
        ? [t("xray.tokens"), t("xray.tokens_shape", { n, v: sizes.vocab_en ?? "?" })]
        : [t("xray.target_tokens"), t("xray.target_shape", { n, v: sizes.vocab_zh ?? "?" })];
    case "embed": return [t("xray.embedding", { d }), t("xray.embedding_shape", { n, d })];
    case "attention":
      if (row.attends === "cross") return [t("xray.cross_attention"), attention];
      return [t(row.masked ? "xray.masked_self_attention" : "xray.self_attention"), attention];
    case "add_norm": return [t("xray.add_norm"), t("xray.add_norm_shape", { d })];
    case "feed_forward": return [t("xray.ffn"), t("xray.ffn_shape", { d, ff: cfg.d_ff, act: cfg.activation })];
    case "logits": return [t("xray.output"), t("xray.output_shape", { d, v: sizes.vocab_zh ?? "?" })];
    default: return [t("xray.chosen"), t("xray.chosen_shape")];
  }
}

/** A side's layers, each a box of its rows, side by side on the overview (stacked below it);
    the box's title is a button that zooms into the layer (onZoom(key)). */
function layerGrid(groups, side, total, add, onZoom) {
  const grid = el("div", null, "xr-layers");
  grid.style.setProperty("--xr-layer-cols", String(total <= 4 ? total : Math.ceil(total / 2)));
  for (const group of groups) {
    const key = `${side[0]}-${group.layer}`;
    const box = el("div", null, "xr-group");
    box.dataset.zoom = key;
    box.style.viewTransitionName = `xr-layer-${key}`; // the zoom's animation moves each box
    const title = el("button", null, "xr-group-title");
    title.type = "button";
    title.dataset.zoom = key;
    title.setAttribute("aria-expanded", "false");
    title.append(el("span", t(side === "encoder" ? "xray.encoder_layer" : "xray.decoder_layer",
      { n: group.layer + 1, total }), "xr-group-name xr-long"),
    el("span", t("xray.layer_short", { n: group.layer + 1 }), "xr-group-name xr-short"),
    el("span", null, "xr-zoom-icon"));
    title.addEventListener("click", () => onZoom(key));
    box.append(title);
    group.rows.forEach((row) => add(box, { ...row, side, layer: group.layer }));
    grid.append(box);
  }
  return grid;
}

/** Build every row into the two columns; onToggle(row) runs when a block's head is clicked,
    onZoom(key) when a layer's title is. */
export function buildRows(onToggle, onZoom) {
  const specs = rowSpecs();
  S.rows = [];
  const encRoot = $("xr-enc-rows");
  const decRoot = $("xr-dec-rows");
  encRoot.replaceChildren();
  decRoot.replaceChildren();
  const add = (root, row) => {
    row.key = row.key || `${row.side[0]}-${row.layer}-${row.block}`;
    root.append(makeRow(row, onToggle));
    S.rows.push(row);
  };
  const { encoder, decoder } = specs;
  encoder.top.forEach((row) => add(encRoot, row));
  encRoot.append(layerGrid(encoder.groups, "encoder", encoder.groups.length, add, onZoom));
  const note = el("p", t("xray.memory_note", { n: decoder.groups.length }), "xr-memory-note");
  encRoot.append(note);
  decoder.top.forEach((row) => add(decRoot, row));
  decRoot.append(layerGrid(decoder.groups, "decoder", decoder.groups.length, add, onZoom));
  decoder.tail.forEach((row) => add(decRoot, row));
}

function makeRow(row, onToggle) {
  const node = el("div", null, "xr-row");
  node.dataset.key = row.key || `${row.side[0]}-${row.layer}-${row.block}`;
  node.dataset.block = row.type === "tokens" ? "tokens" : (row.block || row.type);
  node.dataset.side = row.side;
  if (row.layer !== undefined) node.dataset.layer = row.layer;
  const [name, shape] = rowTitle(row);
  const openable = ["stage", "attention", "logits"].includes(row.type);
  const head = el(openable ? "button" : "div", null, openable ? "xr-head" : "xr-head xr-static");
  if (openable) head.type = "button";
  head.append(el("span", name, "xr-name"), el("span", shape, "xr-shape"));
  if (row.attends === "cross") { // the overview's layers are narrow: a short name there
    head.firstChild.classList.add("xr-long");
    head.prepend(el("span", t("xray.cross_attention_short"), "xr-name xr-short"));
  }
  if (row.type === "stage" || row.type === "attention") {
    row.range = el("span", null, "xr-range"); // the row's colour scale, ±m (layoutRow writes it)
    head.append(row.range);
  }
  if (openable) {
    const panelId = `xr-panel-${node.dataset.key}`;
    head.setAttribute("aria-expanded", "false");
    head.setAttribute("aria-controls", panelId);
    head.addEventListener("click", () => onToggle(row));
  }
  if (row.type === "attention") {
    const line = el("div", null, "xr-headline");
    const heat = el("a", `${t("xray.heatmap")} ↗`, "xr-heat");
    heat.dataset.kind = row.kind;
    line.append(head, heat);
    node.append(line);
    row.heatLink = heat;
  } else {
    node.append(head);
  }
  if (row.type === "tokens") {
    row.lanesBox = el("div", null, "xr-lanes");
    if (row.side === "decoder") row.lanesBox.setAttribute("lang", "zh-CN");
    node.append(row.lanesBox);
  } else if (row.type === "chosen") {
    row.out = el("div", null, "xr-outrow");
    row.out.setAttribute("lang", "zh-CN");
    row.out.setAttribute("role", "group");
    row.out.setAttribute("aria-label", t("xray.translation"));
    node.append(row.out);
  } else {
    row.fig = el("div", null, "xr-fig");
    row.canvas = document.createElement("canvas");
    row.canvas.setAttribute("aria-hidden", "true");
    row.overlay = svg("svg", { "aria-hidden": "true" });
    row.fig.append(row.canvas, row.overlay);
    node.append(row.fig);
    if (row.type !== "logits") {
      row.fig.addEventListener("pointermove", (event) => showValue(row, event));
      row.fig.addEventListener("pointerdown", (event) => showValue(row, event)); // a tap on a phone
      row.fig.addEventListener("pointerleave", hideValue);
    }
  }
  if (openable) {
    row.panel = el("div", null, "xr-panel");
    row.panel.id = `xr-panel-${node.dataset.key}`;
    row.panel.hidden = true;
    node.append(row.panel);
  }
  row.node = node;
  row.headButton = head;
  return node;
}

export function laneCount(side) {
  return side === "encoder" ? S.trace.source_tokens.length : S.trace.steps.length;
}

export function lanes(width, n) {
  const w = width / Math.max(n, 1);
  return { w, x: (i) => (i + 0.5) * w };
}

/** Whether a row is drawn small: a layer on the overview that is not the one zoomed into. */
export function isSmall(row) {
  return S.overview && row.layer !== undefined && S.zoom !== `${row.side[0]}-${row.layer}`;
}

export function figHeight(row) {
  const lines = isSmall(row) ? LINES_H_OVERVIEW : LINES_H;
  if (row.type === "attention") return (row.attends === "cross" ? MEMORY_H + 14 : 0) + lines + STRIP_H + 4;
  if (row.type === "logits") return TOP_BARS * 13 + 6;
  return STRIP_H + 4;
}

/** A stage's strips, one Float32Array per position (null: the decoder's have not come yet). */
function values(side, stage) {
  return S.xr[side].values ? S.xr[side].values[stage] : null;
}

/** The decoder's strips, asked for once per trace the first time the player leaves the landing
    frame (which draws none of them); resolves when S.xr has them (the caller lays out again). */
export function loadStrips() {
  if (S.xr.decoder.values) return Promise.resolve();
  if (!S.stripsAsked) {
    const xr = S.xr;
    const asked = S.strips ? Promise.resolve(S.strips) : ITT.api("/api/xray/strips", S.req);
    S.stripsAsked = asked.then((buffer) => {
      if (S.xr !== xr) return;
      decodeStrips(buffer, xr);
      S.strips = buffer;
      document.body.dataset.xrayStrips = "ready";
    }).finally(() => { if (S.xr === xr) S.stripsAsked = null; });
  }
  return S.stripsAsked;
}

const stripWidth = (laneWidth) => Math.max(4, Math.min(laneWidth - 4, 90));
const rowsPer = (d) => (d >= 64 ? 8 : 1);

/** Whether a lane of this width is too narrow to show its vector's values one by one (under
    ~1.5 px a cell column): then the lane shows the vector's length instead (normBars). */
export function tooNarrow(width, n, d) {
  const sw = stripWidth(width / Math.max(n, 1));
  return sw < 1.5 * Math.ceil(d / rowsPer(d));
}

/** Each vector's root-mean-square value (its length ÷ √d). */
export function rms(vector) {
  let sum = 0;
  for (const v of vector) sum += v * v;
  return Math.sqrt(sum / vector.length);
}

/** A lane too narrow for its values: one bar per vector, as tall as its root-mean-square value
    is of the row's largest (the values themselves are on zoom, on hover and in the panel). */
function normBars(ctx, vectors, n, y, height, width) {
  const sizes = vectors.map(rms);
  const top = Math.max(...sizes, 1e-9);
  const { w, x } = lanes(width, n);
  const bw = Math.max(3, Math.min(w - 6, 18));
  ctx.fillStyle = "#eef0f4";
  ctx.fillRect(0, y + height - 1, width, 1);
  ctx.fillStyle = "#5b6b86";
  sizes.forEach((size, i) => {
    const h = Math.max(1.5, (size / top) * height);
    ctx.fillRect(x(i) - bw / 2, y + height - h, bw, h);
  });
}

/** Draw each lane's vector as a grid of 8 rows of colour cells (d_model values in all): value j
    at cell row j mod 8, cell column ⌊j / 8⌋; a lane too narrow for that gets a bar of its size. */
function drawStrips(ctx, vectors, n, y, height, width, m) {
  const d = vectors[0].length;
  if (tooNarrow(width, n, d)) { normBars(ctx, vectors, n, y, height, width); return; }
  const rowsPerStrip = rowsPer(d);
  const cols = Math.ceil(d / rowsPerStrip);
  const image = new ImageData(cols * n, rowsPerStrip);
  for (let i = 0; i < n; i++) {
    const vector = vectors[i];
    for (let j = 0; j < d; j++) {
      const px = ((j % rowsPerStrip) * cols * n + i * cols + Math.floor(j / rowsPerStrip)) * 4;
      colourInto(image.data, px, vector[j], m);
    }
  }
  const off = document.createElement("canvas");
  off.width = cols * n;
  off.height = rowsPerStrip;
  off.getContext("2d").putImageData(image, 0, 0);
  ctx.imageSmoothingEnabled = false;
  const { w, x } = lanes(width, n);
  const sw = stripWidth(w);
  for (let i = 0; i < n; i++) {
    ctx.drawImage(off, i * cols, 0, cols, rowsPerStrip, x(i) - sw / 2, y, sw, height);
  }
}

/** Size a row's canvas to its measured width and paint its strips (the overlay comes later). */
function layoutRow(row, measured) {
  if (!row.fig) return;
  const width = Math.max(measured, 40);
  const height = figHeight(row);
  row.width = width;
  row.fig.style.height = `${height}px`;
  const dpr = window.devicePixelRatio || 1;
  row.canvas.width = Math.round(width * dpr);
  row.canvas.height = Math.round(height * dpr);
  row.canvas.style.width = `${width}px`;
  row.canvas.style.height = `${height}px`;
  row.overlay.setAttribute("width", width);
  row.overlay.setAttribute("height", height);
  row.overlay.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const ctx = row.canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, width, height);
  row.signature = null;
  if (row.type === "logits") return;
  const n = laneCount(row.side);
  const all = values(row.side, row.stage);
  // before the decoder's strips come, its rows show the ±m the view carries (the same number)
  const m = all ? scaleOf(all.slice(0, n)) : S.xr[row.side].ranges[row.stage];
  row.scale = m;
  const y = height - STRIP_H - 2;
  row.stripY = y;
  if (all) drawStrips(ctx, all.slice(0, n), n, y, STRIP_H, width, m);
  row.range.textContent = `±${fixed(m, 2)}`;
  row.range.title = t("xray.value_scale", { m: fixed(m, 2) });
  if (row.type === "stage") {
    const [name, shape] = rowTitle(row);
    const layer = row.layer !== undefined ? `, ${t("word.layer", { n: row.layer + 1 })}` : "";
    row.fig.setAttribute("role", "img");
    row.fig.setAttribute("aria-label", `${name}${layer}: ${shape}; ${t("xray.strip_scale", { m: fixed(m, 2) })}`);
  }
  if (row.attends === "cross") {
    const memory = values("encoder", S.xr.encoder.values.length - 1);
    row.memoryScale = scaleOf(memory);
    drawStrips(ctx, memory, memory.length, 1, MEMORY_H - 2, width, row.memoryScale);
  }
}

/** The value under a point of a row's figure: {side, lane, j, v, m, strip} or null off the strips. */
function valueAt(row, px, py) {
  const memory = row.attends === "cross" && py >= 1 && py <= MEMORY_H - 1;
  const top = memory ? 1 : row.stripY;
  const height = memory ? MEMORY_H - 2 : STRIP_H;
  if (!memory && (py < top || py > top + height)) return null;
  const side = memory ? "encoder" : row.side;
  const vectors = memory ? values("encoder", S.xr.encoder.values.length - 1) : values(row.side, row.stage);
  if (!vectors) return null;
  const n = memory ? vectors.length : laneCount(row.side);
  const { w, x } = lanes(row.width, n);
  const lane = Math.floor(px / w);
  const sw = stripWidth(w);
  const left = x(lane) - sw / 2;
  if (lane < 0 || lane >= n || px < left || px >= left + sw) return null;
  const d = vectors[lane].length;
  if (tooNarrow(row.width, n, d)) return { side, lane, j: null, d, v: rms(vectors[lane]), m: null, memory };
  const per = rowsPer(d);
  const cols = Math.ceil(d / per);
  const j = Math.floor(((px - left) / sw) * cols) * per + Math.min(per - 1, Math.floor(((py - top) / height) * per));
  if (j >= d) return null;
  return { side, lane, j, d, v: vectors[lane][j], m: memory ? row.memoryScale : row.scale, memory };
}

let tip = null;

/** Hover or tap a strip: its token, dimension and value beside the pointer (nothing is shown for
    a lane not computed yet at this frame). */
function showValue(row, event) {
  const box = row.fig.getBoundingClientRect();
  const hit = S.trace && row.width ? valueAt(row, event.clientX - box.left, event.clientY - box.top) : null;
  if (!hit) { hideValue(); return; }
  const frame = current();
  const computed = hit.memory ? memoryReady(frame) : hit.lane < Math.min(rowState(row, frame).lanes, laneCount(row.side));
  const tokens = hit.side === "encoder" ? S.trace.source_tokens : S.trace.decoder_input;
  if (!tip) {
    tip = el("div", null, "xr-tip");
    tip.setAttribute("aria-hidden", "true"); // the same numbers are in each block's panel
    document.body.append(tip);
  }
  if (hit.j === null) { // a lane drawn as the size of its vector
    tip.replaceChildren(el("span", t("xray.norm_tip", { token: tokens[hit.lane], d: hit.d,
      v: computed ? fixed(hit.v, 3) : t("xray.not_yet") })), el("span", t("xray.norm_scale"), "xr-tip-scale"));
  } else {
    tip.replaceChildren(
      el("span", t("xray.value_tip", { token: tokens[hit.lane], j: hit.j, d: hit.d, v: computed ? fixed(hit.v, 3) : t("xray.not_yet") })),
      el("span", t("xray.value_scale", { m: fixed(hit.m, 2) }), "xr-tip-scale"));
  }
  Object.assign(tip.dataset, { side: hit.side, lane: hit.lane, j: hit.j, value: hit.v, scale: hit.m, computed });
  tip.hidden = false;
  const x = Math.min(event.clientX + 12, window.innerWidth - tip.offsetWidth - 4);
  tip.style.transform = `translate(${Math.max(4, x)}px, ${event.clientY + 16}px)`;
}

function hideValue() {
  if (tip) tip.hidden = true;
}

/** One button per token in the two token rows; onFocus(side, pos) / onFocus(null) on hover. */
export function buildTokens(onFocus) {
  for (const row of S.rows.filter((r) => r.type === "tokens")) {
    const tokens = row.side === "encoder" ? S.trace.source_tokens
      : S.trace.decoder_input.slice(0, laneCount("decoder"));
    row.buttons = tokens.map((token, i) => {
      const button = el("button", token, "xr-token");
      button.type = "button";
      button.title = token; // the whole token, when its lane is too narrow to show it
      button.setAttribute("aria-label", t("xray.token_button", { token, n: i }));
      button.addEventListener("mouseenter", () => onFocus(row.side, i));
      button.addEventListener("focus", () => onFocus(row.side, i));
      button.addEventListener("mouseleave", () => onFocus(null));
      button.addEventListener("blur", () => onFocus(null));
      return button;
    });
    row.lanesBox.replaceChildren(...row.buttons);
  }
}

/** Measure and repaint every row (the caller renders the frame on top). */
export function layoutAll() {
  // a token too wide for its lane stands upright (never cut mid-word): reset all, read all, set
  const chips = S.rows.filter((r) => r.type === "tokens" && r.buttons).flatMap((r) => r.buttons);
  chips.forEach((chip) => chip.classList.remove("xr-upright"));
  chips.filter((chip) => chip.offsetParent && chip.scrollWidth > chip.clientWidth + 1)
    .forEach((chip) => chip.classList.add("xr-upright"));
  // read every width first, then draw: interleaving would force a layout per row
  const widths = S.rows.map((row) => (row.fig ? row.fig.clientWidth : 0));
  S.rows.forEach((row, i) => layoutRow(row, widths[i]));
  S.drawn = null;
}

/** Each attention row's "heatmap" link: /attention with this sentence, layer and head. */
export function heatLinks() {
  for (const row of S.rows.filter((r) => r.heatLink)) {
    const carried = ITT.carriedQuery();
    carried.set("kind", row.kind);
    carried.set("layer", String(row.layer));
    carried.set("head", String(/^\d+$/.test(S.head) ? S.head : 0));
    row.heatLink.href = `/attention?${carried}`;
  }
}
