/* What each frame draws over the strips: attention lines, the newest lane, the veil over what is
   not computed yet, the output bars, the token rows and the translation so far. */

import { S } from "./state.js";
import { decodeHeads } from "./data.js";
import { el, fixed, svg, t } from "./dom.js";
import { memoryReady, rowState } from "./frames.js";
import { figHeight, lanes, laneCount, MEMORY_H, rowTitle, STRIP_H, TOP_BARS } from "./rows.js";

const COLOURS = { encoder: "#0072b2", decoder_self: "#d55e00", cross: "#009e73" };
const HEAD_COLOURS = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#7f7f00", "#000000"];

/** A layer's attention called ``name`` (its name in the layout) → [query][key] for the
    chosen head, or the average of all (sent with the view; every head's come when one is
    picked: main.js needHeads). */
export function headWeights(layer, name) {
  if (S.head !== "avg" && S.head !== "all" && layer[name]) return layer[name][Number(S.head)];
  return layer[`${name}_mean`];
}

function layerOf(row) {
  return row.side === "encoder" ? S.trace.encoder[row.layer] : S.trace.decoder[row.layer];
}


/** Every head's attention on S.trace (one /api/xray/heads request per trace, or the saved
    file's own); resolves once they are there. The view carries only their average. */
export function loadHeads() {
  if (S.trace.heads) return Promise.resolve();
  if (!S.headsAsked) {
    const trace = S.trace;
    const asked = S.heads ? Promise.resolve(S.heads) : ITT.api("/api/xray/heads", S.req);
    S.headsAsked = asked.then((buffer) => {
      if (S.trace !== trace) return;
      decodeHeads(buffer, trace);
      S.heads = buffer;
    }).finally(() => { if (S.trace === trace) S.headsAsked = null; });
  }
  return S.headsAsked;
}

/** Whether what is on screen needs every head: one picked, all of them, an attention block open. */
export function needsHeads() {
  return S.head !== "avg" || [...S.open.values()].some((state) => state.row.type === "attention");
}

/** The trace's [head][query][key] weights for an attention row (null until every head's came). */
export function attentionMatrix(row) {
  return layerOf(row)[row.block];
}

/** The [query][key] weights an attention row's lines draw: the chosen head's or the average. */
function rowWeights(row) {
  return headWeights(layerOf(row), row.block);
}

/** Redraw a row's overlay for this frame (nothing when what it shows has not changed): lines and
    strips only where the row has computed, a veil over the rest. */
export function drawOverlay(row, frame) {
  const state = rowState(row, frame);
  const memory = row.attends === "cross" && memoryReady(frame);
  const focus = S.focus && S.focus.side === row.side ? S.focus.pos : null;
  // an English token in focus also picks out the cross-attention lines that reach it
  const keyFocus = row.attends === "cross" && S.focus && S.focus.side === "encoder" ? S.focus.pos : null;
  const output = row.type === "logits" ? `${frame.t}|${frame.name}` : "";
  const signature = `${state.lanes}|${state.fresh}|${state.active}|${memory}|${output}|${S.head}|${S.trace.heads}|${focus}|${keyFocus}|${row.width}`;
  if (row.signature === signature) return;
  row.signature = signature;
  const group = [];
  const height = figHeight(row);
  if (row.type === "logits") {
    const reached = frame.part === "logits";
    group.push(...outputBars(row, frame, reached));
    const top = reached ? stepTop(frame.t - 1, TOP_BARS).map((c) => `${c.token} ${fixed(c.prob, 3)}`).join(", ") : "";
    row.fig.setAttribute("role", "img");
    row.fig.setAttribute("aria-label", `${rowTitle(row)[0]}: ${top || t("xray.not_yet")}`);
    row.overlay.replaceChildren(...group);
    return;
  }
  const n = laneCount(row.side);
  const { w, x } = lanes(row.width, n);
  if (focus !== null) {
    group.push(svg("rect", { x: x(focus) - w / 2 + 1, y: 0, width: w - 2, height, fill: "#0072b2", opacity: 0.1 }));
  }
  const newest = row.side === "decoder" && state.fresh && state.lanes > 0 ? state.lanes - 1 : null;
  if (newest !== null && newest < n) {
    group.push(svg("rect", { x: x(newest) - w / 2 + 1, y: row.stripY - 2, width: w - 2, height: STRIP_H + 4,
      fill: "none", stroke: "#e69f00", "stroke-width": 2, rx: 3 }));
  }
  if (row.type === "attention") {
    group.push(...attentionLines(row, state, newest, focus, keyFocus));
    describeAttention(row, state, newest, focus);
  }
  if (row.attends === "cross") {
    if (memory) group.push(...memoryLabels(row));
    else group.push(veil(row, 0, 0, MEMORY_H + 14, "memory"));
  }
  const from = Math.min(state.lanes, n);
  if (from < n) {
    const top = row.type === "attention" ? row.stripY - 2 : 0;
    group.push(veil(row, x(from) - w / 2, top, height - top, from));
    if (row.part === "embed" && row.width - x(from) > 80) {
      group.push(svg("text", { x: x(from) - w / 2 + 4, y: height - 5, "font-size": 10, fill: "#777" }, t("xray.not_yet")));
    }
  }
  row.overlay.replaceChildren(...group);
}

/** A white veil over what is not computed yet, from x to the row's right edge; from names the
    first veiled lane ("memory" for the memory strip of a cross-attention row). */
function veil(row, x, y, height, from) {
  const group = svg("g");
  group.append(svg("rect", { x, y, width: row.width - x, height, fill: "#fff", class: "xr-veil", "data-from": from }));
  if (from !== "memory") { // each lane still to come: an empty dashed slot where its strip will be
    const n = laneCount(row.side);
    const { w, x: at } = lanes(row.width, n);
    const sw = Math.max(3, Math.min(w - 4, 90));
    for (let i = from; i < n; i++) {
      group.append(svg("rect", { x: at(i) - sw / 2 + 0.5, y: row.stripY + 0.5, width: sw - 1, height: STRIP_H - 1,
        fill: "none", stroke: "#c3c8d1", "stroke-dasharray": "2 2", rx: 2, class: "xr-slot" }));
    }
  }
  return group;
}

/** Lines from keys to the computed queries: the newest query (decoder) or, while the encoder
    layer runs, every query, drawn strongest. */
function attentionLines(row, state, newest, focus, keyFocus = null) {
  const out = [];
  if (state.lanes === 0) return out;
  const matrix = attentionMatrix(row);
  const layers = S.head === "all" && matrix
    ? matrix.map((weights, h) => ({ weights, colour: HEAD_COLOURS[h % HEAD_COLOURS.length], h, scale: 0.8 }))
    // until every head's weights are here (one request), the average, and labelled so
    : [{ weights: rowWeights(row), colour: COLOURS[row.kind], h: matrix ? S.head : "avg", scale: 1 }];
  const queries = laneCount(row.side);
  const keys = row.attends === "cross" ? S.trace.source_tokens.length : queries;
  const q = lanes(row.width, queries);
  const k = lanes(row.width, keys);
  const top = row.attends === "cross" ? MEMORY_H + 14 : 0;
  const bottom = row.stripY - 1;
  const mid = (top + bottom) / 2;
  const limit = Math.min(state.lanes, queries);
  for (let i = 0; i < limit; i++) {
    let strength;
    if (focus !== null) strength = i === focus ? 1 : 0;
    else if (keyFocus !== null) strength = 1;
    else if (row.side === "decoder") strength = i === newest ? 1 : 0.22;
    else strength = state.active ? 0.55 : 0.25;
    if (strength === 0) continue;
    for (const { weights, colour, h, scale } of layers) {
      const rowWeights = weights[i];
      for (let j = 0; j < keys; j++) {
        if (keyFocus !== null && j !== keyFocus) continue;
        const wgt = rowWeights[j];
        if (!(wgt >= 0.03)) continue;
        const kx = k.x(j);
        const qx = q.x(i);
        out.push(svg("path", {
          d: `M${kx.toFixed(1)},${top} C${kx.toFixed(1)},${mid} ${qx.toFixed(1)},${mid} ${qx.toFixed(1)},${bottom}`,
          fill: "none", stroke: colour, "stroke-width": (0.6 + 3.6 * wgt * scale).toFixed(2),
          "stroke-opacity": (strength * scale * (0.15 + 0.85 * wgt)).toFixed(3), "data-q": i, "data-k": j,
          "data-w": wgt.toFixed(4), "data-h": h, class: strength === 1 || (state.active && wgt >= 0.2) ? "xr-now" : "",
          // the block computing fades its links in, the strongest first
          style: state.active ? `animation-delay:${Math.round((1 - wgt) * 260)}ms` : null,
        }));
      }
    }
  }
  return out;
}

/** What the lines show, in words, for screen readers: the query's three strongest keys. */
function describeAttention(row, state, newest, focus) {
  const query = focus !== null ? focus : newest;
  const [name] = rowTitle(row);
  let text = `${name}, ${t("word.layer", { n: row.layer + 1 })}`;
  if (query !== null && query >= 0 && query < state.lanes) {
    const weights = rowWeights(row)[query];
    const keys = row.attends === "cross" ? S.trace.source_tokens : (row.side === "encoder" ? S.trace.source_tokens : S.trace.decoder_input);
    const queryToken = row.side === "encoder" ? S.trace.source_tokens[query] : S.trace.decoder_input[query];
    const best = weights.map((w, k) => [w, k]).sort((a, b) => b[0] - a[0]).slice(0, 3);
    text += `: ${queryToken} → ${best.map(([w, k]) => `${keys[k]} ${fixed(w, 2)}`).join(", ")}`;
  }
  row.fig.setAttribute("role", "img");
  row.fig.setAttribute("aria-label", text);
}

function memoryLabels(row) {
  const tokens = S.trace.source_tokens;
  const { w, x } = lanes(row.width, tokens.length);
  if (w < 26) return [];
  return tokens.map((token, i) => {
    const label = svg("text", { x: x(i), y: MEMORY_H + 11, "text-anchor": "middle", "font-size": 9.5,
      fill: "#2f6f5a" }, token.length > w / 6 ? `${token.slice(0, Math.max(1, Math.floor(w / 6) - 1))}…` : token);
    return label;
  });
}

function stepTop(stepIndex, count) {
  const step = S.trace.steps[stepIndex];
  return step ? step.top.slice(0, count) : [];
}

/** The step's most likely characters, once the output layer has run in this step. */
function outputBars(row, frame, reached) {
  const out = [];
  if (!reached) {
    out.push(svg("text", { x: 4, y: 14, "font-size": 11, fill: "#888" }, t("xray.not_yet")));
    return out;
  }
  const step = S.trace.steps[frame.t - 1];
  const labelW = 46;
  const barMax = Math.max(row.width - labelW - 60, 40);
  stepTop(frame.t - 1, TOP_BARS).forEach((c, i) => {
    const y = 3 + i * 13;
    const chosen = c.token === step.token;
    const group = svg("g", { "data-token": c.token, class: chosen ? "xr-bar-chosen" : "" });
    group.append(svg("text", { x: 2, y: y + 10, "font-size": 12, fill: "#1d2330" }, c.token));
    group.append(svg("rect", { x: labelW, y, width: Math.max(1, barMax * c.prob), height: 11, rx: 2,
      fill: ITT.palette.css(chosen && reached ? "--chosen" : "--dist-model"), opacity: reached ? 1 : 0.5 }));
    group.append(svg("text", { x: labelW + Math.max(1, barMax * c.prob) + 4, y: y + 10, "font-size": 10.5,
      fill: "#333" }, fixed(c.prob, 3)));
    out.push(group);
  });
  return out;
}

/** The token buttons: focus marks, and the decoder's future inputs hidden. */
export function drawTokens(frame) {
  for (const row of S.rows.filter((r) => r.type === "tokens")) {
    const visible = rowState(row, frame).lanes;
    row.buttons.forEach((button, i) => {
      const focused = S.focus && S.focus.side === row.side && S.focus.pos === i;
      button.classList.toggle("xr-focus", Boolean(focused));
      if (row.side === "decoder") {
        button.classList.toggle("xr-hidden", i >= visible);
        button.classList.toggle("xr-current", i === visible - 1);
        button.tabIndex = i >= visible ? -1 : 0;
      }
    });
  }
}

/** The translation so far: every character chosen by this frame. */
export function drawChosen(frame) {
  const row = S.rows.find((r) => r.type === "chosen");
  const steps = S.trace.steps;
  const done = frame.t === 0 ? 0 : (frame.part === "logits" ? frame.t : frame.t - 1);
  const spans = [];
  for (let i = 0; i < done; i++) {
    const span = el("span", steps[i].token, steps[i].forced ? "xr-forced" : null);
    span.dataset.step = i;
    spans.push(span);
  }
  row.out.replaceChildren(...spans);
}
