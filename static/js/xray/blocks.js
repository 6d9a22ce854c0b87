/* Blocks that open in place: each step of a block's computation for one position, with the
   model's own numbers (asked from /api/xray/block), and a link to the page that explains it. */

import { S, saveFrame } from "./state.js";
import { barCell, cfg, colour, el, fixed, scaleOf, t } from "./dom.js";
import { current } from "./frames.js";
import { attentionMatrix, loadHeads } from "./overlay.js";

const palette = ITT.palette;

function blockPosition(row) {
  if (S.focus && S.focus.side === row.side) return S.focus.pos;
  if (row.side === "decoder") return Math.max(0, current().t - 1);
  return Math.min(1, S.trace.source_tokens.length - 1);
}

/** Open or close a block's panel (and keep the open ones in the URL). */
export function toggleBlock(row) {
  const open = row.panel.hidden;
  row.panel.hidden = !open;
  row.headButton.setAttribute("aria-expanded", open ? "true" : "false");
  if (open) {
    S.open.set(row.key, { row, position: null, head: /^\d+$/.test(S.head) ? Number(S.head) : 0 });
    refreshOpenPanels();
  } else {
    S.open.delete(row.key);
  }
  saveFrame();
}

/** Ask again for every open block whose position or trace changed. */
export function refreshOpenPanels() {
  for (const state of S.open.values()) {
    const position = blockPosition(state.row);
    if (state.position === position && state.trace === S.trace) continue;
    state.position = position;
    state.trace = S.trace;
    loadBlock(state);
  }
}

async function loadBlock(state) {
  const { row } = state;
  const body = {
    ...S.req, side: row.side, block: row.block, layer: row.layer ?? 0, position: state.position,
  };
  const asked = JSON.stringify(body);
  state.asked = asked;
  if (!row.panel.firstChild) row.panel.append(el("p", t("xray.b.loading"), "muted"));
  try {
    // an attention block draws its head's whole matrix: every head's weights come with it
    const [data] = await Promise.all([ITT.api("/api/xray/block", body),
      row.type === "attention" ? loadHeads() : null]);
    if (state.asked !== asked || row.panel.hidden) return;
    state.data = data;
    renderBlock(state);
  } catch (error) {
    row.panel.replaceChildren(el("p", error.message, "error"));
  }
}

function vectorCanvas(vector, m) {
  const canvas = document.createElement("canvas");
  canvas.width = vector.length;
  canvas.height = 1;
  canvas.className = "xr-strip";
  const ctx = canvas.getContext("2d");
  const image = ctx.createImageData(vector.length, 1);
  const scale = m || Math.max(...vector.map(Math.abs), 1e-6);
  vector.forEach((v, i) => {
    const [r, g, b] = colour(v, scale);
    image.data.set([r, g, b, 255], i * 4);
  });
  ctx.putImageData(image, 0, 0);
  canvas.setAttribute("aria-hidden", "true");
  return canvas;
}

function matrixCanvas(rows, pixel) {
  const h = rows.length;
  const w = rows[0].length;
  const canvas = document.createElement("canvas");
  canvas.width = w;
  canvas.height = h;
  canvas.className = "xr-matrix";
  canvas.style.width = `${Math.min(w * pixel, 320)}px`;
  canvas.style.height = `${Math.max(h * pixel * (Math.min(w * pixel, 320) / (w * pixel)), 4)}px`;
  const ctx = canvas.getContext("2d");
  const image = ctx.createImageData(w, h);
  const m = scaleOf(rows);
  rows.forEach((row, y) => row.forEach((v, x) => {
    const [r, g, b] = colour(v, m);
    image.data.set([r, g, b, 255], (y * w + x) * 4);
  }));
  ctx.putImageData(image, 0, 0);
  canvas.setAttribute("aria-hidden", "true");
  return canvas;
}

/** The head's whole weight matrix (from the trace): rows are queries, columns keys; masked
    cells hatched. Hovering a cell names it and gives its weight. */
function heatmapStep(row, head, position) {
  const matrix = attentionMatrix(row)[head];
  const queryTokens = row.side === "encoder" ? S.trace.source_tokens : S.trace.decoder_input;
  const keyTokens = row.attends === "cross" || row.side === "encoder" ? S.trace.source_tokens : S.trace.decoder_input;
  const rows = row.side === "decoder" ? Math.min(position + 1, matrix.length) : matrix.length;
  const cols = keyTokens.length;
  const cell = Math.max(3, Math.min(18, Math.floor(300 / Math.max(cols, rows))));
  const canvas = document.createElement("canvas");
  canvas.width = cols * cell;
  canvas.height = rows * cell;
  canvas.className = "xr-heatmap";
  const ctx = canvas.getContext("2d");
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      const masked = row.masked && j > i;
      ctx.fillStyle = masked ? palette.css("--masked") : palette.rgb(palette.sequential(matrix[i][j]));
      ctx.fillRect(j * cell, i * cell, cell - (cell > 5 ? 1 : 0), cell - (cell > 5 ? 1 : 0));
      if (masked && cell > 5) {
        ctx.strokeStyle = "#aaa";
        ctx.beginPath();
        ctx.moveTo(j * cell, (i + 1) * cell - 1);
        ctx.lineTo((j + 1) * cell - 1, i * cell);
        ctx.stroke();
      }
    }
  }
  ctx.strokeStyle = palette.css("--chosen");
  ctx.lineWidth = 2;
  ctx.strokeRect(1, Math.min(position, rows - 1) * cell + 1, cols * cell - 2, cell - 2);
  canvas.addEventListener("mousemove", (event) => {
    const box = canvas.getBoundingClientRect();
    const j = Math.floor(((event.clientX - box.left) / box.width) * cols);
    const i = Math.floor(((event.clientY - box.top) / box.height) * rows);
    if (i < 0 || j < 0 || i >= rows || j >= cols) return;
    const masked = row.masked && j > i;
    canvas.title = `${queryTokens[i]} → ${keyTokens[j]}: ${masked ? "−∞ → 0" : fixed(matrix[i][j], 4)}`;
  });
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", t("xray.b.heatmap", { h: head + 1 }));
  const box = el("div");
  box.append(canvas, el("div", t("xray.b.heatmap", { h: head + 1 }), "xr-vals"));
  return step("heatmap", t("xray.heatmap"), `${rows}×${cols}`, box);
}

function step(name, label, dims, visual, vector, count = 8) {
  const line = el("div", null, "xr-step");
  line.dataset.step = name;
  const left = el("div", null, "xr-label");
  left.append(document.createTextNode(label));
  if (dims) left.append(el("span", dims, "xr-dims"));
  const right = el("div");
  if (visual) right.append(visual);
  if (vector) {
    const text = el("div", `[${vector.slice(0, count).map((v) => fixed(v, 4)).join(", ")}${vector.length > count ? ", …" : ""}]`, "xr-vals");
    text.dataset.values = JSON.stringify(vector.slice(0, count));
    right.append(text);
  }
  line.append(left, right);
  return line;
}

function vectorStep(name, label, vector, dims) {
  return step(name, label, dims || `(${vector.length})`, vectorCanvas(vector), vector);
}

function previewStep(name, label, preview) {
  const caption = t("xray.b.preview", { r: preview.shape[0], c: preview.shape[1], pr: preview.means.length,
    pc: preview.means[0].length, br: preview.block[0], bc: preview.block[1] });
  const box = el("div");
  box.append(matrixCanvas(preview.means, 3), el("div", caption, "xr-vals"));
  return step(name, label, `${preview.shape[0]}×${preview.shape[1]}`, box);
}

function cells(name, label, dims, keys, values, kind) {
  const box = el("div", null, "xr-cells");
  values.forEach((v, i) => {
    const cell = el("span", null, v === null ? "xr-cell xr-inf" : "xr-cell");
    cell.append(el("span", keys[i], "xr-k"), el("span", v === null ? "−∞" : fixed(v, 4)));
    cell.dataset.value = v === null ? "-inf" : String(v);
    cell.dataset.key = keys[i];
    if (kind === "weights" && v !== null) {
      cell.style.background = palette.rgb(palette.sequential(v));
      if (v > 0.55) cell.classList.add("xr-strong");
    }
    if (v === null) cell.title = t("xray.b.future");
    box.append(cell);
  });
  return step(name, label, dims, box);
}

function blockLinks(row, data, head) {
  const links = el("p", null, "xr-links");
  const carried = ITT.carriedQuery();
  let path = "/embeddings";
  if (row.type === "attention") {
    carried.set("kind", row.kind);
    carried.set("layer", String(row.layer));
    carried.set("head", String(/^\d+$/.test(S.head) ? S.head : 0));
    carried.set("q", String(data.position));
    path = "/attention";
  } else if (row.side === "decoder" && row.part !== "embed") {
    carried.set("layer", String(row.layer ?? cfg.n_decoder_layers - 1));
    path = "/decode";
  } else if (row.part !== "embed") {
    path = "/attention";
  }
  const a = el("a", `${t("xray.deep_dive")} ↗`);
  a.href = `${path}?${carried}`;
  links.append(a);
  for (const [part, label] of switchOffParts(row, head)) {
    const query = ITT.carriedQuery();
    query.set("off", part);
    const off = el("a", `${label} ↗`, "xr-switch-off");
    off.href = `/ablation?${query}`;
    off.dataset.part = part;
    links.append(" · ", off);
  }
  return links;
}

const PART_KINDS = { encoder: "enc", decoder_self: "dec", cross: "cross" }; // model/explain/ablation.py

/** The parts of this block /ablation can switch off, with their link text: an attention block's
    shown head (0-based ``head``) and the whole sublayer, a feed-forward network, the positions an
    embedding adds. */
function switchOffParts(row, head) {
  if (row.type === "attention") {
    const name = `${PART_KINDS[row.kind]}.${row.layer + 1}`;
    return [[`${name}.${head + 1}`, t("xray.switch_head_off", { n: head + 1 })],
      [name, t("xray.switch_sublayer_off")]];
  }
  if (row.part === "feed_forward") return [[`${row.side === "encoder" ? "encffn" : "decffn"}.${row.layer + 1}`, t("xray.switch_sublayer_off")]];
  if (row.part === "embed") return [[row.side === "encoder" ? "pos.enc" : "pos.dec", t("xray.switch_positions_off")]];
  return [];
}

export function renderBlock(state) {
  const { row, data } = state;
  const s = data.sizes;
  const parts = [];
  const title = el("p", `${data.token} · ${row.side === "encoder" ? t("xray.encoder") : t("xray.decoder")}`
    + (row.layer !== undefined ? ` · ${t("word.layer", { n: row.layer + 1 })}` : ""), "xr-sub");
  parts.push(title);
  if (row.part === "embed") {
    parts.push(vectorStep("token", t("xray.b.token_vec", { d: s.d_model }), data.token_vector));
    parts.push(vectorStep("position", t("xray.b.pos_vec", { p: data.position }), data.position_vector));
    parts.push(vectorStep("sum", t("xray.b.emb_sum"), data.sum));
  } else if (row.part === "attention") {
    parts.push(vectorStep("x", t("xray.b.x", { p: data.position }), data.x, `1×${s.d_model} (${s.length}×${s.d_model})`));
    parts.push(previewStep("w_q", t("xray.b.wq"), data.weights.w_q));
    parts.push(vectorStep("q_full", t("xray.b.q_full"), data.q_full, `1×${s.d_model}`));
    const split = el("div", null, "xr-split");
    for (let h = 0; h < s.n_heads; h++) {
      const part = el("div");
      part.append(el("span", t("xray.b.head", { n: h + 1 }), "xr-vals"), vectorCanvas(data.q_full.slice(h * data.d_k, (h + 1) * data.d_k)));
      split.append(part);
    }
    parts.push(step("split", t("xray.b.split", { h: s.n_heads, k: data.d_k }), `${s.n_heads}×${data.d_k}`, split));
    const tabs = el("div", null, "xr-tabs");
    tabs.setAttribute("role", "group");
    data.heads.forEach((_, h) => {
      const b = el("button", t("xray.b.head", { n: h + 1 }));
      b.type = "button";
      b.setAttribute("aria-pressed", String(h === state.head));
      b.addEventListener("click", () => { state.head = h; renderBlock(state); });
      tabs.append(b);
    });
    parts.push(tabs);
    const head = data.heads[state.head];
    const keys = data.key_tokens;
    const n = keys.length;
    parts.push(vectorStep("q", t("xray.b.q", { n: state.head + 1 }), head.q, `1×${data.d_k}`));
    const cross = row.attends === "cross";
    parts.push(previewStep("w_k", t(cross ? "xray.b.wk_memory" : "xray.b.wk"), data.weights.w_k));
    parts.push(step("k", t("xray.b.k"), `${n}×${data.d_k}`, matrixCanvas(head.k, 4)));
    parts.push(cells("raw", t("xray.b.raw"), `1×${n}`, keys, head.raw));
    parts.push(cells("scaled", t("xray.b.scaled", { s: fixed(Math.sqrt(data.d_k), 0) }), `1×${n}`, keys, head.scaled));
    parts.push(cells("masked", t("xray.b.masked"), `1×${n}`, keys, head.masked));
    parts.push(cells("weights", t("xray.b.weights"), `1×${n}`, keys, head.weights, "weights"));
    parts.push(heatmapStep(row, state.head, data.position));
    parts.push(previewStep("w_v", t(cross ? "xray.b.wv_memory" : "xray.b.wv"), data.weights.w_v));
    parts.push(step("v", t("xray.b.v"), `${n}×${data.d_k}`, matrixCanvas(head.v, 4)));
    parts.push(vectorStep("out", t("xray.b.out"), head.out, `1×${data.d_k}`));
    parts.push(vectorStep("concat", t("xray.b.concat", { h: s.n_heads }), data.concat, `1×${s.d_model}`));
    parts.push(previewStep("w_o", t("xray.b.wo"), data.weights.w_o));
    parts.push(vectorStep("result", t("xray.b.output"), data.output, `1×${s.d_model}`));
  } else if (row.part === "add_norm") {
    parts.push(vectorStep("residual", t("xray.b.residual"), data.residual));
    parts.push(vectorStep("sublayer", t("xray.b.sublayer"), data.sublayer));
    parts.push(vectorStep("sum", t("xray.b.sum"), data.sum));
    const stats = step("stats", t("xray.b.stats", { m: fixed(data.mean, 4), s: fixed(data.std, 4) }), null, null);
    stats.dataset.mean = data.mean;
    stats.dataset.std = data.std;
    parts.push(stats);
    parts.push(vectorStep("normalized", t("xray.b.normalized"), data.normalized));
    parts.push(vectorStep("gamma", t("xray.b.gamma"), data.gamma));
    parts.push(vectorStep("beta", t("xray.b.beta"), data.beta));
    parts.push(vectorStep("result", t("xray.b.ln_out"), data.output));
  } else if (row.part === "feed_forward") {
    parts.push(vectorStep("x", t("xray.b.x", { p: data.position }), data.x));
    parts.push(previewStep("w_1", t("xray.b.w1"), data.weights.w_1));
    parts.push(vectorStep("pre", t("xray.b.pre", { act: cfg.activation }), data.pre));
    const hidden = vectorStep("hidden", t("xray.b.hidden", { n: data.active, ff: s.d_ff, act: cfg.activation }), data.hidden);
    hidden.dataset.active = data.active;
    parts.push(hidden);
    parts.push(previewStep("w_2", t("xray.b.w2"), data.weights.w_2));
    parts.push(vectorStep("result", t("xray.b.ffn_out"), data.output));
  } else if (row.part === "logits") {
    parts.push(vectorStep("x", t("xray.b.final"), data.x));
    parts.push(previewStep("w_out", t(cfg.tie_output === false ? "xray.b.wout_untied" : "xray.b.wout"), data.weights.w_out));
    const table = el("table", null, "xr-dist");
    const tbody = el("tbody");
    for (const c of data.top) {
      const tr = el("tr");
      tr.dataset.token = c.token;
      tr.dataset.prob = c.prob;
      const tok = el("td", c.token, "xr-tok");
      tok.setAttribute("lang", "zh-CN");
      tr.append(tok, el("td", `${t("xray.b.logit")} ${fixed(c.logit, 3)}`), barCell(c.prob, true, null));
      tbody.append(tr);
    }
    table.append(tbody);
    parts.push(step("top", t("xray.b.logits", { n: data.top.length, v: s.vocab }), `${s.d_model}→${s.vocab}`, table));
  }
  parts.push(blockLinks(row, data, state.head));
  row.panel.replaceChildren(...parts);
}
