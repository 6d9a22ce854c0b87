/* The x-ray: the whole encoder–decoder translating one sentence, drawn from the trace.
   Rows are stages; each token is a lane; each lane shows the token's vector as a strip of colours.
   Attention rows draw their weights as lines from key lanes (above) to query lanes (below).
   A player walks the encoder phase and then every decoding time step through seven sub-steps.
   User text only ever reaches the page through textContent or SVG text nodes. */
"use strict";

(() => {
  const t = ITT.t;
  const cfg = ITT.pageData.config;
  const SIZES = JSON.parse(document.getElementById("xr-sizes").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const ENC_SUBS = ["tokens", "embedding", "self_attention", "add_norm1", "ffn", "add_norm2"];
  const DEC_SUBS = ["self_attention", "add_norm1", "cross_attention", "add_norm2", "ffn", "add_norm3",
    "output"];
  const SUB_MS = 1400; // one sub-step at 1× speed
  const STRIP_H = 14;
  const LINES_H = 46;
  const MEMORY_H = 12;
  const TOP_BARS = 5;
  const DIST_ROWS = 15;
  const UNFORCEABLE = ["<pad>", "<bos>"];
  const COLOURS = { encoder: "#0072b2", decoder_self: "#d55e00", cross: "#009e73" };
  const REDUCED_MOTION = window.matchMedia("(prefers-reduced-motion: reduce)");
  const HEAD_COLOURS = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#7f7f00", "#000000"];

  const S = {
    trace: null, xr: null, original: null, req: null, frames: [], frame: 0, playing: false,
    timer: null, speed: 1, head: "avg", focus: null, rows: [], open: new Map(), flying: null,
    drawn: null,
  };

  // -- small helpers ------------------------------------------------------------------------------

  const $ = (id) => document.getElementById(id);
  const fixed = (x, d = 2) => (x === null || x === undefined ? "−∞" : Number(x).toFixed(d));
  const el = (tag, text, cls) => ITT.element(tag, text, cls);

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  /** Diverging colour for value v on a ±m scale: blue (negative) – white – red (positive). */
  function colour(v, m) {
    const x = Math.max(-1, Math.min(1, v / (m || 1)));
    const a = Math.abs(x);
    return x >= 0
      ? [255 - a * (255 - 178), 255 - a * (255 - 24), 255 - a * (255 - 43)]
      : [255 - a * (255 - 33), 255 - a * (255 - 102), 255 - a * (255 - 172)];
  }

  /** The value below which 98% of |v| fall: a colour scale that one outlier cannot wash out. */
  function scaleOf(rows) {
    let n = 0;
    for (const row of rows) n += row.length;
    if (!n) return 1;
    const all = new Float32Array(n);
    let i = 0;
    for (const row of rows) for (const v of row) all[i++] = Math.abs(v);
    all.sort(); // typed arrays sort numerically, without a comparator call per pair
    return all[Math.min(n - 1, Math.floor(n * 0.98))] || 1;
  }

  function headWeights(matrix) {
    // matrix: [head][query][key] → [query][key] for the chosen head or the average of all
    if (S.head !== "avg" && S.head !== "all") return matrix[Number(S.head)];
    const H = matrix.length;
    return matrix[0].map((row, q) => row.map((_, k) => {
      let s = 0;
      for (let h = 0; h < H; h++) s += matrix[h][q][k];
      return s / H;
    }));
  }

  function argmax(values, skip) {
    let best = -1;
    for (let i = 0; i < values.length; i++) {
      if (i === skip) continue;
      if (best < 0 || values[i] > values[best]) best = i;
    }
    return best;
  }

  // -- frames: the encoder phase, then seven sub-steps per decoding time step -----------------------

  function buildFrames() {
    S.frames = ENC_SUBS.map((sub, i) => ({ t: 0, sub: i, name: sub }));
    S.trace.steps.forEach((_, index) => {
      DEC_SUBS.forEach((sub, i) => S.frames.push({ t: index + 1, sub: i, name: sub }));
    });
  }

  // -- rows ---------------------------------------------------------------------------------------

  function rowSpecs() {
    const enc = [{ key: "enc-tokens", side: "encoder", type: "tokens" },
      { key: "enc-embedding", side: "encoder", type: "stage", block: "embedding", stage: 0 }];
    const groups = [];
    for (let l = 0; l < cfg.n_encoder_layers; l++) {
      const base = 4 * l;
      groups.push({ side: "encoder", layer: l, rows: [
        { type: "attention", kind: "encoder", block: "self_attention", stage: base + 1, input: base },
        { type: "stage", block: "add_norm1", stage: base + 2 },
        { type: "stage", block: "ffn", stage: base + 3 },
        { type: "stage", block: "add_norm2", stage: base + 4 },
      ] });
    }
    const dec = [{ key: "dec-tokens", side: "decoder", type: "tokens" },
      { key: "dec-embedding", side: "decoder", type: "stage", block: "embedding", stage: 0 }];
    const decGroups = [];
    for (let l = 0; l < cfg.n_decoder_layers; l++) {
      const base = 6 * l;
      decGroups.push({ side: "decoder", layer: l, rows: [
        { type: "attention", kind: "decoder_self", block: "self_attention", stage: base + 1, input: base },
        { type: "stage", block: "add_norm1", stage: base + 2 },
        { type: "attention", kind: "cross", block: "cross_attention", stage: base + 3, input: base + 2 },
        { type: "stage", block: "add_norm2", stage: base + 4 },
        { type: "stage", block: "ffn", stage: base + 5 },
        { type: "stage", block: "add_norm3", stage: base + 6 },
      ] });
    }
    const tail = [{ key: "dec-output", side: "decoder", type: "output", block: "output" },
      { key: "dec-chosen", side: "decoder", type: "chosen" }];
    return { enc, groups, dec, decGroups, tail };
  }

  function rowTitle(row) {
    const tr = S.trace;
    const n = row.side === "encoder" ? tr.source_tokens.length : S.trace.steps.length;
    const d = cfg.d_model;
    const sizes = SIZES;
    switch (row.type === "tokens" ? "tokens" : row.block) {
      case "tokens":
        return row.side === "encoder"
          ? [t("xray.tokens"), t("xray.tokens_shape", { n, v: sizes.vocab_en ?? "?" })]
          : [t("xray.target_tokens"), t("xray.target_shape", { n, v: sizes.vocab_zh ?? "?" })];
      case "embedding": return [t("xray.embedding", { d }), t("xray.embedding_shape", { n, d })];
      case "self_attention":
        return [t(row.side === "encoder" ? "xray.self_attention" : "xray.masked_self_attention"),
          t("xray.attention_shape", { n, d, h: cfg.n_heads, k: d / cfg.n_heads })];
      case "cross_attention":
        return [t("xray.cross_attention"), t("xray.attention_shape", { n, d, h: cfg.n_heads, k: d / cfg.n_heads })];
      case "add_norm1": case "add_norm2": case "add_norm3":
        return [t("xray.add_norm"), t("xray.add_norm_shape", { d })];
      case "ffn": return [t("xray.ffn"), t("xray.ffn_shape", { d, ff: cfg.d_ff, act: cfg.activation })];
      case "output": return [t("xray.output"), t("xray.output_shape", { d, v: sizes.vocab_zh ?? "?" })];
      default: return [t("xray.chosen"), t("xray.chosen_shape")];
    }
  }

  function buildRows() {
    const specs = rowSpecs();
    S.rows = [];
    const encRoot = $("xr-enc-rows");
    const decRoot = $("xr-dec-rows");
    encRoot.replaceChildren();
    decRoot.replaceChildren();
    const add = (root, row) => {
      row.key = row.key || `${row.side[0]}-${row.layer}-${row.block}`;
      root.append(makeRow(row));
      S.rows.push(row);
    };
    specs.enc.forEach((row) => add(encRoot, row));
    for (const group of specs.groups) {
      const box = el("div", null, "xr-group");
      box.append(el("p", t("xray.encoder_layer", { n: group.layer + 1, total: cfg.n_encoder_layers }), "xr-group-title"));
      group.rows.forEach((row) => add(box, { ...row, side: "encoder", layer: group.layer }));
      encRoot.append(box);
    }
    const note = el("p", t("xray.memory_note", { n: cfg.n_decoder_layers }), "xr-memory-note");
    encRoot.append(note);
    specs.dec.forEach((row) => add(decRoot, row));
    for (const group of specs.decGroups) {
      const box = el("div", null, "xr-group");
      box.append(el("p", t("xray.decoder_layer", { n: group.layer + 1, total: cfg.n_decoder_layers }), "xr-group-title"));
      group.rows.forEach((row) => add(box, { ...row, side: "decoder", layer: group.layer }));
      decRoot.append(box);
    }
    specs.tail.forEach((row) => add(decRoot, row));
  }

  function makeRow(row) {
    const node = el("div", null, "xr-row");
    node.dataset.key = row.key || `${row.side[0]}-${row.layer}-${row.block}`;
    node.dataset.block = row.type === "tokens" ? "tokens" : (row.block || row.type);
    node.dataset.side = row.side;
    if (row.layer !== undefined) node.dataset.layer = row.layer;
    const [name, shape] = rowTitle(row);
    const openable = ["stage", "attention", "output"].includes(row.type);
    const head = el(openable ? "button" : "div", null, openable ? "xr-head" : "xr-head xr-static");
    if (openable) head.type = "button";
    head.append(el("span", name, "xr-name"), el("span", shape, "xr-shape"));
    if (openable) {
      const panelId = `xr-panel-${node.dataset.key}`;
      head.setAttribute("aria-expanded", "false");
      head.setAttribute("aria-controls", panelId);
      head.addEventListener("click", () => toggleBlock(row));
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
      row.out.setAttribute("aria-label", t("xray.translation"));
      node.append(row.out);
    } else {
      row.fig = el("div", null, "xr-fig");
      row.canvas = document.createElement("canvas");
      row.canvas.setAttribute("aria-hidden", "true");
      row.overlay = svg("svg", { "aria-hidden": "true" });
      row.fig.append(row.canvas, row.overlay);
      node.append(row.fig);
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

  function laneCount(side) {
    return side === "encoder" ? S.trace.source_tokens.length : S.trace.steps.length;
  }

  function lanes(width, n) {
    const w = width / Math.max(n, 1);
    return { w, x: (i) => (i + 0.5) * w };
  }

  function figHeight(row) {
    if (row.type === "attention") return (row.kind === "cross" ? MEMORY_H + 14 : 0) + LINES_H + STRIP_H + 4;
    if (row.type === "output") return TOP_BARS * 15 + 6;
    return STRIP_H + 4;
  }

  function values(side, stage) {
    return S.xr[side].values[stage];
  }

  /** Draw each lane's vector as a grid of 8 rows of colour cells (d_model values in all). */
  function drawStrips(ctx, vectors, n, y, height, width, m) {
    const d = vectors[0].length;
    const rowsPerStrip = d >= 64 ? 8 : 1;
    const cols = Math.ceil(d / rowsPerStrip);
    const image = new ImageData(cols * n, rowsPerStrip);
    for (let i = 0; i < n; i++) {
      const vector = vectors[i];
      for (let j = 0; j < d; j++) {
        const [r, g, b] = colour(vector[j], m);
        const px = ((j % rowsPerStrip) * cols * n + i * cols + Math.floor(j / rowsPerStrip)) * 4;
        image.data[px] = r; image.data[px + 1] = g; image.data[px + 2] = b; image.data[px + 3] = 255;
      }
    }
    const off = document.createElement("canvas");
    off.width = cols * n;
    off.height = rowsPerStrip;
    off.getContext("2d").putImageData(image, 0, 0);
    ctx.imageSmoothingEnabled = false;
    const { w, x } = lanes(width, n);
    const sw = Math.max(4, Math.min(w - 4, 90));
    for (let i = 0; i < n; i++) {
      ctx.drawImage(off, i * cols, 0, cols, rowsPerStrip, x(i) - sw / 2, y, sw, height);
    }
  }

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
    if (row.type === "output") return;
    const n = laneCount(row.side);
    const vectors = values(row.side, row.stage).slice(0, n);
    const m = scaleOf(vectors);
    row.scale = m;
    const y = height - STRIP_H - 2;
    row.stripY = y;
    drawStrips(ctx, vectors, n, y, STRIP_H, width, m);
    row.fig.title = t("xray.strip_scale", { m: fixed(m, 2) });
    if (row.type === "stage") {
      const [name, shape] = rowTitle(row);
      const layer = row.layer !== undefined ? `, ${t("word.layer", { n: row.layer + 1 })}` : "";
      row.fig.setAttribute("role", "img");
      row.fig.setAttribute("aria-label", `${name}${layer}: ${shape}; ${t("xray.strip_scale", { m: fixed(m, 2) })}`);
    }
    if (row.kind === "cross") {
      const memory = values("encoder", S.xr.encoder.values.length - 1);
      drawStrips(ctx, memory, memory.length, 1, MEMORY_H - 2, width, scaleOf(memory));
    }
  }

  function buildTokens() {
    for (const row of S.rows.filter((r) => r.type === "tokens")) {
      const tokens = row.side === "encoder" ? S.trace.source_tokens
        : S.trace.decoder_input.slice(0, laneCount("decoder"));
      row.buttons = tokens.map((token, i) => {
        const button = el("button", token, "xr-token");
        button.type = "button";
        button.setAttribute("aria-label", t("xray.token_button", { token, n: i }));
        button.addEventListener("mouseenter", () => setFocus(row.side, i));
        button.addEventListener("focus", () => setFocus(row.side, i));
        button.addEventListener("mouseleave", () => setFocus(null));
        button.addEventListener("blur", () => setFocus(null));
        return button;
      });
      row.lanesBox.replaceChildren(...row.buttons);
    }
  }

  function layoutAll() {
    // read every width first, then draw: interleaving would force a layout per row
    const widths = S.rows.map((row) => (row.fig ? row.fig.clientWidth : 0));
    S.rows.forEach((row, i) => layoutRow(row, widths[i]));
    S.drawn = null;
    render();
  }

  // -- per-frame overlay ---------------------------------------------------------------------------

  function current() {
    return S.frames[S.frame] || { t: 0, sub: 0, name: "tokens" };
  }

  /** How many decoder positions exist at this frame (0 in the encoder phase). */
  function visibleDecoder(frame) {
    return frame.t;
  }

  function attentionMatrix(row) {
    const layer = row.side === "encoder" ? S.trace.encoder[row.layer] : S.trace.decoder[row.layer];
    return row.kind === "cross" ? layer.cross_attention : layer.self_attention;
  }

  function drawOverlay(row, frame) {
    const visible = visibleDecoder(frame);
    const focus = S.focus && S.focus.side === row.side ? S.focus.pos : null;
    const when = row.side === "encoder" ? frame.t > 0 : frame.t;
    // an English token in focus also picks out the cross-attention lines that reach it
    const keyFocus = row.kind === "cross" && S.focus && S.focus.side === "encoder" ? S.focus.pos : null;
    const signature = `${when}|${row.type === "output" ? frame.sub : ""}|${S.head}|${focus}|${keyFocus}|${row.width}`;
    if (row.signature === signature) return;
    row.signature = signature;
    const group = [];
    const height = figHeight(row);
    if (row.type === "output") {
      group.push(...outputBars(row, frame));
      const top = frame.t ? stepTop(frame.t - 1, TOP_BARS).map((c) => `${c.token} ${fixed(c.prob, 3)}`).join(", ") : "";
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
    if (row.side === "decoder" && visible > 0 && visible <= n) {
      group.push(svg("rect", { x: x(visible - 1) - w / 2 + 1, y: row.stripY - 2, width: w - 2, height: STRIP_H + 4,
        fill: "none", stroke: "#e69f00", "stroke-width": 2, rx: 3 }));
    }
    if (row.type === "attention") {
      group.push(...attentionLines(row, frame, visible, focus, keyFocus));
      describeAttention(row, frame, visible, focus);
    }
    if (row.kind === "cross") group.push(...memoryLabels(row));
    if (row.side === "decoder") {
      const from = Math.min(visible, n);
      if (from < n) {
        const top = row.type === "attention" ? row.stripY - 2 : 0;
        const hide = svg("rect", { x: x(from) - w / 2, y: top, width: row.width - (x(from) - w / 2),
          height: height - top, fill: "#fff", opacity: 0.88 });
        group.push(hide);
        if (row.block === "embedding" && row.width - x(from) > 80) {
          group.push(svg("text", { x: x(from) - w / 2 + 4, y: height - 5, "font-size": 10, fill: "#777" }, t("xray.not_yet")));
        }
      }
    }
    row.overlay.replaceChildren(...group);
  }

  function attentionLines(row, frame, visible, focus, keyFocus = null) {
    const out = [];
    if (row.side === "decoder" && visible === 0) return out;
    const matrix = attentionMatrix(row);
    const layers = S.head === "all"
      ? matrix.map((weights, h) => ({ weights, colour: HEAD_COLOURS[h % HEAD_COLOURS.length], h, scale: 0.8 }))
      : [{ weights: headWeights(matrix), colour: COLOURS[row.kind], h: S.head, scale: 1 }];
    const queries = laneCount(row.side);
    const keys = row.kind === "cross" ? S.trace.source_tokens.length : queries;
    const q = lanes(row.width, queries);
    const k = lanes(row.width, keys);
    const top = row.kind === "cross" ? MEMORY_H + 14 : 0;
    const bottom = row.stripY - 1;
    const mid = (top + bottom) / 2;
    const limit = row.side === "decoder" ? Math.min(visible, queries) : queries;
    const currentQuery = row.side === "decoder" ? limit - 1 : null;
    for (let i = 0; i < limit; i++) {
      let strength;
      if (focus !== null) strength = i === focus ? 1 : 0;
      else if (keyFocus !== null) strength = 1;
      else if (currentQuery !== null) strength = i === currentQuery ? 1 : 0.22;
      else strength = frame.t === 0 ? 0.55 : 0.25;
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
            "data-w": wgt.toFixed(4), "data-h": h, class: strength === 1 || (frame.t === 0 && wgt >= 0.2) ? "xr-now" : "",
          }));
        }
      }
    }
    return out;
  }

  /** What the lines show, in words, for screen readers: the query's three strongest keys. */
  function describeAttention(row, frame, visible, focus) {
    const query = focus !== null ? focus : (row.side === "decoder" ? visible - 1 : null);
    const [name] = rowTitle(row);
    let text = `${name}, ${t("word.layer", { n: row.layer + 1 })}`;
    if (query !== null && query >= 0) {
      const weights = headWeights(attentionMatrix(row))[query];
      const keys = row.kind === "cross" ? S.trace.source_tokens : (row.side === "encoder" ? S.trace.source_tokens : S.trace.decoder_input);
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

  function outputBars(row, frame) {
    const out = [];
    if (frame.t === 0) {
      out.push(svg("text", { x: 4, y: 14, "font-size": 11, fill: "#888" }, t("xray.not_yet")));
      return out;
    }
    const step = S.trace.steps[frame.t - 1];
    const reached = frame.sub >= 6;
    const labelW = 46;
    const barMax = Math.max(row.width - labelW - 60, 40);
    stepTop(frame.t - 1, TOP_BARS).forEach((c, i) => {
      const y = 3 + i * 15;
      const chosen = c.token === step.token;
      const group = svg("g", { "data-token": c.token, class: chosen ? "xr-bar-chosen" : "" });
      group.append(svg("text", { x: 2, y: y + 10, "font-size": 12, fill: "#1d2330" }, c.token));
      group.append(svg("rect", { x: labelW, y, width: Math.max(1, barMax * c.prob), height: 11, rx: 2,
        fill: chosen && reached ? "#e69f00" : "#8aa6c1", opacity: reached ? 1 : 0.5 }));
      group.append(svg("text", { x: labelW + Math.max(1, barMax * c.prob) + 4, y: y + 10, "font-size": 10.5,
        fill: "#333" }, fixed(c.prob, 3)));
      out.push(group);
    });
    return out;
  }

  function drawTokens(frame) {
    const visible = visibleDecoder(frame);
    for (const row of S.rows.filter((r) => r.type === "tokens")) {
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

  function drawChosen(frame) {
    const row = S.rows.find((r) => r.type === "chosen");
    const steps = S.trace.steps;
    const done = frame.t === 0 ? 0 : (frame.sub >= 6 ? frame.t : frame.t - 1);
    const spans = [];
    for (let i = 0; i < done; i++) {
      const span = el("span", steps[i].token, steps[i].forced ? "xr-forced" : null);
      span.dataset.step = i;
      spans.push(span);
    }
    row.out.replaceChildren(...spans);
  }

  function activeBlocks(frame) {
    if (frame.t === 0) {
      if (frame.name === "tokens") return new Set(["enc-tokens"]);
      if (frame.name === "embedding") return new Set(["enc-embedding"]);
      return new Set(S.rows.filter((r) => r.side === "encoder" && r.block === frame.name).map((r) => r.key));
    }
    const keys = new Set(S.rows.filter((r) => r.side === "decoder" && r.block === frame.name && r.layer !== undefined)
      .map((r) => r.key));
    if (frame.name === "self_attention") { keys.add("dec-tokens"); keys.add("dec-embedding"); }
    if (frame.name === "output") { keys.add("dec-output"); keys.add("dec-chosen"); }
    return keys;
  }

  function render() {
    if (!S.trace) return;
    const frame = current();
    const active = activeBlocks(frame);
    for (const row of S.rows) {
      row.node.classList.toggle("xr-active", active.has(row.key));
      if (row.overlay) drawOverlay(row, frame);
    }
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

  function drawPlayer(frame) {
    const scrub = $("xr-scrub");
    scrub.max = String(Math.max(S.frames.length - 1, 0));
    scrub.value = String(S.frame);
    const phase = frame.t === 0 ? t("xray.phase_encoder")
      : t("xray.phase_step", { t: frame.t, total: S.trace.steps.length });
    const total = frame.t === 0 ? ENC_SUBS.length : DEC_SUBS.length;
    const where = t("xray.position", { phase, n: frame.sub + 1, total });
    $("xr-where").textContent = where;
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

  // -- narration with the real numbers --------------------------------------------------------------

  function layerLabel(l) { return l + 1; }

  function narrate(frame) {
    const tr = S.trace;
    const L = frame.t === 0 ? tr.encoder.length - 1 : tr.decoder.length - 1;
    let text;
    if (frame.t === 0) {
      const focusPos = S.focus && S.focus.side === "encoder" ? S.focus.pos : Math.min(1, tr.source_tokens.length - 1);
      const tok = tr.source_tokens[focusPos];
      const layer = tr.encoder[L];
      switch (frame.name) {
        case "tokens":
          text = t("xray.n.enc.tokens", { n: tr.source_tokens.length, tokens: tr.source_tokens.join(" · "),
            v: SIZES.vocab_en });
          break;
        case "embedding":
          text = t("xray.n.enc.embedding", { d: cfg.d_model, s: fixed(Math.sqrt(cfg.d_model), 0), tok,
            vals: tr.embeddings.encoder.sum[focusPos].slice(0, 3).map((v) => fixed(v, 2)).join(", ") });
          break;
        case "self_attention": {
          const w = headWeights(layer.self_attention)[focusPos];
          const k = argmax(w, focusPos);
          text = t("xray.n.enc.self_attention", { layers: tr.encoder.length, h: cfg.n_heads, k: cfg.d_model / cfg.n_heads,
            layer: layerLabel(L), tok, key: tr.source_tokens[k], w: fixed(w[k], 2) });
          break;
        }
        case "add_norm1": {
          const an = layer.add_norm1;
          text = t("xray.n.enc.add_norm1", { a: fixed(an.residual_norm[focusPos], 1), b: fixed(an.sublayer_norm[focusPos], 1),
            c: fixed(an.normed_norm[focusPos], 1), tok, layer: layerLabel(L) });
          break;
        }
        case "ffn": {
          const share = layer.ffn.active_share.reduce((a, b) => a + b, 0) / layer.ffn.active_share.length;
          text = t("xray.n.enc.ffn", { d: cfg.d_model, ff: cfg.d_ff, act: cfg.activation, layer: layerLabel(L), share: fixed(share * 100, 1) });
          break;
        }
        default:
          text = t("xray.n.enc.add_norm2", { layers: tr.encoder.length, n: tr.source_tokens.length, d: cfg.d_model });
      }
    } else {
      const p = frame.t - 1;
      const cur = tr.decoder_input[p];
      const layer = tr.decoder[L];
      const step = tr.steps[p];
      switch (frame.name) {
        case "self_attention": {
          const w = headWeights(layer.self_attention)[p].slice(0, p + 1);
          const k = argmax(w, -1);
          text = t("xray.n.dec.self_attention", { t: frame.t, prefix: tr.decoder_input.slice(0, p + 1).join(" "),
            cur, p, layer: layerLabel(L), key: tr.decoder_input[k], w: fixed(w[k], 2) });
          break;
        }
        case "add_norm1": case "add_norm2": case "add_norm3": {
          const an = layer[frame.name];
          text = t(`xray.n.dec.${frame.name}`, { a: fixed(an.residual_norm[p], 1), b: fixed(an.sublayer_norm[p], 1),
            c: fixed(an.normed_norm[p], 1), cur, layer: layerLabel(L), layers: tr.decoder.length });
          break;
        }
        case "cross_attention": {
          const w = headWeights(layer.cross_attention)[p];
          const k = argmax(w, -1);
          const avg = tr.source_tokens.map((_, j) => {
            let s = 0;
            let c = 0;
            for (const lay of tr.decoder) for (const head of lay.cross_attention) { s += head[p][j]; c++; }
            return s / c;
          });
          const ka = argmax(avg, -1);
          text = t("xray.n.dec.cross_attention", { cur, layer: layerLabel(L), src: tr.source_tokens[k], w: fixed(w[k], 2),
            src_avg: tr.source_tokens[ka], w_avg: fixed(avg[ka], 2) });
          break;
        }
        case "ffn":
          text = t("xray.n.dec.ffn", { d: cfg.d_model, ff: cfg.d_ff, act: cfg.activation, cur, layer: layerLabel(L),
            share: fixed(layer.ffn.active_share[p] * 100, 1) });
          break;
        default: {
          const top = step.top.slice(0, 3).map((c) => `P(${c.token}) = ${fixed(c.prob, 3)}`).join(", ");
          const strategy = tr.options.strategy;
          const how = t(step.forced ? "xray.how.forced" : `xray.how.${strategy}`);
          text = step.token === "<eos>"
            ? t("xray.n.dec.output_eos", { top, how })
            : t("xray.n.dec.output", { d: cfg.d_model, v: SIZES.vocab_zh, top, how,
              tok: step.token, prob: fixed(step.prob, 3) });
        }
      }
    }
    const box = $("xr-narration");
    if (box.textContent !== text) box.textContent = text;
  }

  // -- the player -------------------------------------------------------------------------------------

  function go(frame, fromPlay) {
    const last = S.frames.length - 1;
    const next = Math.max(0, Math.min(last, frame));
    const before = current();
    S.frame = next;
    render();
    const now = current();
    if (now.name === "output" && (before.t !== now.t || before.sub !== now.sub) && next > 0) {
      requestAnimationFrame(() => fly(now));
    }
    if (!fromPlay) saveFrame();
    scrollActiveIntoView();
  }

  function saveFrame() {
    const query = ITT.params();
    query.set("frame", String(S.frame));
    if (S.head !== "avg") query.set("head", S.head); else query.delete("head");
    if (S.open.size) query.set("open", [...S.open.keys()].join(",")); else query.delete("open");
    ITT.setURL(query, false);
  }

  function scrollActiveIntoView() {
    if (!S.playing) return;
    const row = S.rows.find((r) => r.node.classList.contains("xr-active") && r.side === (current().t === 0 ? "encoder" : "decoder"));
    if (!row) return;
    const rect = row.node.getBoundingClientRect();
    const player = $("xr-player").getBoundingClientRect();
    if (rect.top < player.bottom || rect.bottom > window.innerHeight) {
      window.scrollBy({ top: rect.top - player.bottom - 20, behavior: "auto" });
    }
  }

  function play() {
    if (S.frame >= S.frames.length - 1) S.frame = 0;
    S.playing = true;
    tick();
    drawPlayer(current());
  }

  function pause() {
    S.playing = false;
    clearTimeout(S.timer);
    saveFrame();
    drawPlayer(current());
  }

  function tick() {
    clearTimeout(S.timer);
    S.timer = setTimeout(() => {
      if (!S.playing) return;
      if (S.frame >= S.frames.length - 1) { pause(); return; }
      go(S.frame + 1, true);
      tick();
    }, SUB_MS / S.speed);
  }

  function stepTime(delta) {
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
    S.flying = flyer.animate(frames, { duration: Math.min(1200, (SUB_MS / S.speed) * 0.9), easing: "ease-in-out" });
    S.flying.onfinish = () => { flyer.style.display = "none"; };
    S.flying.oncancel = () => { flyer.style.display = "none"; };
  }

  function setFocus(side, pos) {
    S.focus = side ? { side, pos } : null;
    render();
  }

  // -- sampling: temperature, top-k, top-p redone in the browser ------------------------------------

  /** Exactly model.decoding.filter_distribution: softmax(logits / T), then top-k, then top-p. */
  function filterDistribution(logits, temperature, topK, topP) {
    const n = logits.length;
    const probs = new Float64Array(n);
    let max = -Infinity;
    for (let i = 0; i < n; i++) if (Number.isFinite(logits[i])) max = Math.max(max, logits[i] / temperature);
    let sum = 0;
    for (let i = 0; i < n; i++) {
      probs[i] = Number.isFinite(logits[i]) ? Math.exp(logits[i] / temperature - max) : 0;
      sum += probs[i];
    }
    for (let i = 0; i < n; i++) probs[i] /= sum;
    const cut = new Map();
    if (topK && topK < n) {
      const kth = Array.from(probs).sort((a, b) => b - a)[topK - 1];
      let kept = 0;
      for (let i = 0; i < n; i++) {
        if (probs[i] < kth) { if (probs[i] > 0) cut.set(i, "k"); probs[i] = 0; } else kept += probs[i];
      }
      for (let i = 0; i < n; i++) probs[i] /= kept;
    }
    if (topP !== null && topP < 1) {
      const order = Array.from(probs.keys()).sort((a, b) => probs[b] - probs[a]);
      let before = 0;
      const keep = new Uint8Array(n);
      order.forEach((i, rank) => {
        keep[i] = before < topP || rank === 0 ? 1 : 0;
        before += probs[i];
      });
      let kept = 0;
      for (let i = 0; i < n; i++) {
        if (!keep[i]) { if (probs[i] > 0) cut.set(i, "p"); probs[i] = 0; } else kept += probs[i];
      }
      for (let i = 0; i < n; i++) probs[i] /= kept;
    }
    return { probs, cut };
  }

  function softmax(logits) {
    return filterDistribution(logits, 1, null, null).probs;
  }

  function samplingSettings() {
    const temperature = Number($("xr-temperature").value);
    const k = Number($("xr-topk").value);
    const p = Number($("xr-topp").value);
    return { temperature, topK: k > 0 ? k : null, topP: p < 1 ? p : null };
  }

  function samplingStep() {
    const frame = current();
    return Math.min(frame.t === 0 ? 0 : frame.t - 1, S.trace.steps.length - 1);
  }

  function drawSampling() {
    const stepIndex = samplingStep();
    const logits = S.xr.logits[stepIndex];
    const settings = samplingSettings();
    $("xr-temperature-out").textContent = fixed(settings.temperature, 2);
    $("xr-topk-out").textContent = settings.topK ? String(settings.topK) : "0";
    $("xr-topp-out").textContent = fixed(settings.topP ?? 1, 2);
    $("xr-sampling-step").textContent = t("xray.sampling_step", { t: stepIndex + 1 });
    if (!logits) return;
    const model = softmax(logits);
    const { probs, cut } = filterDistribution(logits, settings.temperature, settings.topK, settings.topP);
    S.sampled = { stepIndex, probs, settings };
    let kept = 0;
    let keptMass = 0;
    for (let i = 0; i < probs.length; i++) if (probs[i] > 0) { kept++; keptMass += model[i]; }
    // the mass before rescaling, under the temperature-scaled distribution
    const scaled = filterDistribution(logits, settings.temperature, null, null).probs;
    let massBefore = 0;
    for (let i = 0; i < probs.length; i++) if (probs[i] > 0) massBefore += scaled[i];
    $("xr-kept").textContent = t("xray.kept", { n: kept, v: probs.length, mass: fixed(massBefore * 100, 1) });
    const order = Array.from(model.keys()).sort((a, b) => model[b] - model[a]).slice(0, DIST_ROWS);
    const step = S.trace.steps[stepIndex];
    const vocab = S.xr.vocab;
    const body = $("xr-dist-body");
    if (body.xrFor === S.trace && body.xrStep === stepIndex) {
      // same rows (ordered by the model's own probability): update in place so the bars glide
      for (const tr of body.children) {
        const id = Number(tr.dataset.id);
        tr.dataset.new = probs[id].toFixed(6);
        tr.classList.toggle("xr-cut", cut.has(id));
        const bar = tr.querySelector(".xr-new");
        bar.firstChild.style.width = `${(probs[id] * 100).toFixed(2)}%`;
        bar.lastChild.textContent = cut.has(id) ? t(cut.get(id) === "k" ? "xray.cut_k" : "xray.cut_p") : fixed(probs[id], 4);
      }
      return;
    }
    body.xrFor = S.trace;
    body.xrStep = stepIndex;
    body.replaceChildren(...order.map((id) => {
      const tr = el("tr");
      tr.dataset.token = vocab[id];
      tr.dataset.id = id;
      tr.dataset.model = model[id].toFixed(6);
      tr.dataset.new = probs[id].toFixed(6);
      if (cut.has(id)) tr.classList.add("xr-cut");
      if (vocab[id] === step.token) tr.classList.add("xr-chosen");
      const tok = el("td", vocab[id], "xr-tok");
      tok.setAttribute("lang", "zh-CN");
      tr.append(tok, barCell(model[id], false, null), barCell(probs[id], true, cut.get(id)));
      const action = el("td");
      if (vocab[id] !== step.token && !UNFORCEABLE.includes(vocab[id])) {
        const button = el("button", t("xray.force_short"), "secondary");
        button.type = "button";
        button.setAttribute("aria-label", t("xray.force", { tok: vocab[id], t: stepIndex + 1 }));
        button.addEventListener("click", () => force(stepIndex, vocab[id]));
        action.append(button);
      }
      tr.append(action);
      return tr;
    }));
  }

  function barCell(p, isNew, cutBy) {
    const td = el("td");
    const bar = el("div", null, isNew ? "xr-bar xr-new" : "xr-bar");
    const fill = el("span");
    fill.style.width = `${(p * 100).toFixed(2)}%`;
    const label = cutBy ? t(cutBy === "k" ? "xray.cut_k" : "xray.cut_p") : fixed(p, 4);
    bar.append(fill, el("b", label));
    td.append(bar);
    return td;
  }

  /** mulberry32: a small seeded generator, so the same seed always draws the same character. */
  function seeded(seed) {
    let a = seed >>> 0;
    return () => {
      a = (a + 0x6d2b79f5) >>> 0;
      let x = a;
      x = Math.imul(x ^ (x >>> 15), x | 1);
      x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
      return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
    };
  }

  function draw() {
    if (!S.sampled) return;
    const seed = Math.max(0, Math.min(2147483647, Number.parseInt($("xr-seed").value, 10) || 0));
    const u = seeded(seed)();
    const { probs, stepIndex } = S.sampled;
    let acc = 0;
    let choice = probs.length - 1;
    for (let i = 0; i < probs.length; i++) {
      acc += probs[i];
      if (probs[i] > 0 && u < acc) { choice = i; break; }
    }
    const token = S.xr.vocab[choice];
    const drew = $("xr-drew");
    drew.textContent = t("xray.drew", { seed, tok: token, u: fixed(u, 4) });
    drew.hidden = false;
    const use = $("xr-use-drawn");
    const same = token === S.trace.steps[stepIndex].token;
    use.hidden = same || UNFORCEABLE.includes(token);
    use.textContent = t("xray.use_drawn", { tok: token });
    use.onclick = () => force(stepIndex, token);
  }

  function decodeAll() {
    const s = samplingSettings();
    const query = ITT.params();
    query.set("strategy", "sample");
    query.set("temperature", String(s.temperature));
    if (s.topK) query.set("top_k", String(s.topK)); else query.delete("top_k");
    if (s.topP) query.set("top_p", String(s.topP)); else query.delete("top_p");
    query.set("seed", String(Math.max(0, Number.parseInt($("xr-seed").value, 10) || 0)));
    query.delete("forced");
    query.delete("frame");
    ITT.setURL(query, true);
    return reload();
  }

  // -- forcing, with the original beside the forced translation -------------------------------------

  function force(stepIndex, token) {
    const prefix = [...S.trace.target_tokens.slice(0, stepIndex), token];
    const query = ITT.params();
    query.delete("forced");
    for (const value of prefix) query.append("forced", value);
    const firstOfStep = S.frames.findIndex((f) => f.t === stepIndex + 1 && f.name === "output");
    query.set("frame", String(Math.max(firstOfStep, 0)));
    ITT.setURL(query, true);
    reload().catch((error) => ITT.showError(error.message));
  }

  function drawCompare() {
    const box = $("xr-compare");
    if (!S.original) { box.hidden = true; return; }
    box.hidden = false;
    const a = S.original.steps.map((s) => s.token);
    const b = S.trace.steps.map((s) => s.token);
    let diverge = 0;
    while (diverge < a.length && diverge < b.length && a[diverge] === b[diverge]) diverge++;
    const chips = (list, tokens) => list.replaceChildren(...tokens.map((token, i) => {
      const li = el("li", token, i === diverge ? "xr-diff" : (i > diverge ? "xr-after" : null));
      li.dataset.step = i;
      return li;
    }));
    chips($("xr-original"), a);
    chips($("xr-forced"), b);
    $("xr-diverge").textContent = diverge < Math.max(a.length, b.length)
      ? t("xray.diverge", { t: diverge + 1, a: a[diverge] ?? "∅", b: b[diverge] ?? "∅" }) : "";
    const query = ITT.params();
    query.delete("forced");
    query.delete("frame");
    $("xr-reset").setAttribute("href", `${window.location.pathname}?${query}`);
  }

  // -- beam search as a lineage tree ------------------------------------------------------------------

  function lengthPenalty(length, alpha) {
    return ((5 + length) / 6) ** alpha;
  }

  function drawBeam() {
    const box = $("xr-beam");
    const nodes = S.trace.beam || [];
    if (!nodes.length) { box.hidden = true; return; }
    box.hidden = false;
    const alpha = S.xr.length_penalty;
    $("xr-beam-help").textContent = t("xray.beam_help", { k: S.trace.options.beam_size, a: alpha });
    const byStep = new Map();
    for (const node of nodes) {
      if (!byStep.has(node.step)) byStep.set(node.step, []);
      byStep.get(node.step).push(node);
    }
    const widest = Math.max(...[...byStep.values()].map((list) => list.length));
    const colW = 64;
    const rowH = 46;
    const width = Math.max(widest * colW, 200);
    const steps = Math.max(...nodes.map((n) => n.step)) + 1;
    const height = steps * rowH + 10;
    const pos = new Map();
    const order = new Map();
    for (const step of [...byStep.keys()].sort((a, b) => a - b)) {
      const list = byStep.get(step);
      list.sort((a, b) => (order.get(a.parent) ?? 0) - (order.get(b.parent) ?? 0) || b.score - a.score);
      list.forEach((node, i) => order.set(node.id, i));
    }
    for (const [step, list] of byStep) {
      const offset = (width - list.length * colW) / 2;
      list.forEach((node, i) => pos.set(node.id, [offset + (i + 0.5) * colW, 18 + step * rowH]));
    }
    const root = $("xr-beam-svg");
    root.setAttribute("viewBox", `0 0 ${width} ${height}`);
    root.style.maxWidth = `${width * 1.4}px`;
    const parts = [];
    for (const node of nodes) {
      if (node.parent < 0) continue;
      const [x1, y1] = pos.get(node.parent);
      const [x2, y2] = pos.get(node.id);
      parts.push(svg("line", { x1, y1: y1 + 12, x2, y2: y2 - 14, stroke: node.selected ? "#e69f00" : "#9aa3ae",
        "stroke-width": node.selected ? 3 : 1.2 }));
    }
    for (const node of nodes) {
      const [x, y] = pos.get(node.id);
      const g = svg("g", { class: "xr-beam-node", "data-id": node.id });
      g.append(svg("rect", { x: x - 28, y: y - 14, width: 56, height: 26, rx: 5,
        fill: node.selected ? "#fff1d6" : "#fff", stroke: node.finished ? "#009e73" : "#8a93a0",
        "stroke-width": node.finished ? 2.4 : 1 }));
      g.append(svg("text", { x, y: y - 1, "text-anchor": "middle", "font-size": 12 }, node.token));
      g.append(svg("text", { x, y: y + 10, "text-anchor": "middle", "font-size": 9, fill: "#555" },
        node.parent < 0 ? "0" : fixed(node.score, 2)));
      g.append(svg("title", {}, `${node.token} · log p ${fixed(node.score, 3)}`));
      parts.push(g);
    }
    root.replaceChildren(...parts);
    const byId = new Map(nodes.map((n) => [n.id, n]));
    const finished = nodes.filter((n) => n.finished).map((n) => {
      const tokens = [];
      for (let p = byId.get(n.parent); p && p.parent >= 0; p = byId.get(p.parent)) tokens.unshift(p.token);
      const lp = lengthPenalty(n.step - 1, alpha);
      return { node: n, text: tokens.join(""), lp, normalised: n.score / lp };
    }).sort((a, b) => b.normalised - a.normalised);
    $("xr-finished").replaceChildren(...finished.map((f) => {
      const li = el("li", `${f.text || "∅"} — ${t("xray.score", { s: fixed(f.node.score, 3), lp: fixed(f.lp, 3), n: fixed(f.normalised, 3) })}`
        + (f.node.selected ? ` · ${t("xray.winner")}` : ""), f.node.selected ? "xr-winner" : null);
      return li;
    }));
  }

  // -- blocks that open in place ----------------------------------------------------------------------

  function blockPosition(row) {
    if (S.focus && S.focus.side === row.side) return S.focus.pos;
    if (row.side === "decoder") return Math.max(0, current().t - 1);
    return Math.min(1, S.trace.source_tokens.length - 1);
  }

  function toggleBlock(row) {
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

  function refreshOpenPanels() {
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
      const data = await ITT.api("/api/xray/block", body);
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
    const keyTokens = row.kind === "cross" || row.side === "encoder" ? S.trace.source_tokens : S.trace.decoder_input;
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
        const masked = row.kind === "decoder_self" && j > i;
        ctx.fillStyle = masked ? "#d9d9d9" : `rgba(0, 114, 178, ${Math.min(1, matrix[i][j]).toFixed(3)})`;
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
    ctx.strokeStyle = "#e69f00";
    ctx.lineWidth = 2;
    ctx.strokeRect(1, Math.min(position, rows - 1) * cell + 1, cols * cell - 2, cell - 2);
    canvas.addEventListener("mousemove", (event) => {
      const box = canvas.getBoundingClientRect();
      const j = Math.floor(((event.clientX - box.left) / box.width) * cols);
      const i = Math.floor(((event.clientY - box.top) / box.height) * rows);
      if (i < 0 || j < 0 || i >= rows || j >= cols) return;
      const masked = row.kind === "decoder_self" && j > i;
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
    const caption = t("xray.b.preview", { r: preview.shape[0], c: preview.shape[1], br: preview.block[0], bc: preview.block[1] });
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
        cell.style.background = `rgba(0, 114, 178, ${Math.min(0.85, v).toFixed(3)})`;
        if (v > 0.45) cell.classList.add("xr-strong");
      }
      if (v === null) cell.title = t("xray.b.future");
      box.append(cell);
    });
    return step(name, label, dims, box);
  }

  function blockLinks(row, data) {
    const links = el("p", null, "xr-links");
    const carried = new URLSearchParams();
    const query = ITT.params();
    for (const name of ["text", "strategy", "temperature", "top_k", "top_p", "beam_size", "max_len", "seed"]) {
      if (query.get(name)) carried.set(name, query.get(name));
    }
    for (const value of query.getAll("forced")) carried.append("forced", value);
    let path = "/embeddings";
    if (row.type === "attention") {
      carried.set("kind", row.kind);
      carried.set("layer", String(row.layer));
      carried.set("head", String(/^\d+$/.test(S.head) ? S.head : 0));
      carried.set("q", String(data.position));
      path = "/attention";
    } else if (row.side === "decoder" && row.block !== "embedding") {
      carried.set("layer", String(row.layer ?? cfg.n_decoder_layers - 1));
      path = "/decode";
    } else if (row.block !== "embedding") {
      path = "/attention";
    }
    const a = el("a", `${t("xray.deep_dive")} ↗`);
    a.href = `${path}?${carried}`;
    links.append(a);
    return links;
  }

  function renderBlock(state) {
    const { row, data } = state;
    const s = data.sizes;
    const parts = [];
    const title = el("p", `${data.token} · ${row.side === "encoder" ? t("xray.encoder") : t("xray.decoder")}`
      + (row.layer !== undefined ? ` · ${t("word.layer", { n: row.layer + 1 })}` : ""), "xr-sub");
    parts.push(title);
    if (data.block === "embedding") {
      parts.push(vectorStep("token", t("xray.b.token_vec", { d: s.d_model }), data.token_vector));
      parts.push(vectorStep("position", t("xray.b.pos_vec", { p: data.position }), data.position_vector));
      parts.push(vectorStep("sum", t("xray.b.emb_sum"), data.sum));
    } else if (data.block === "self_attention" || data.block === "cross_attention") {
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
      const cross = data.block === "cross_attention";
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
      parts.push(vectorStep("output", t("xray.b.output"), data.output, `1×${s.d_model}`));
    } else if (data.block.startsWith("add_norm")) {
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
      parts.push(vectorStep("output", t("xray.b.ln_out"), data.output));
    } else if (data.block === "ffn") {
      parts.push(vectorStep("x", t("xray.b.x", { p: data.position }), data.x));
      parts.push(previewStep("w_1", t("xray.b.w1"), data.weights.w_1));
      parts.push(vectorStep("pre", t("xray.b.pre", { act: cfg.activation }), data.pre));
      const hidden = vectorStep("hidden", t("xray.b.hidden", { n: data.active, ff: s.d_ff, act: cfg.activation }), data.hidden);
      hidden.dataset.active = data.active;
      parts.push(hidden);
      parts.push(previewStep("w_2", t("xray.b.w2"), data.weights.w_2));
      parts.push(vectorStep("output", t("xray.b.ffn_out"), data.output));
    } else if (data.block === "output") {
      parts.push(vectorStep("x", t("xray.b.final"), data.x));
      parts.push(previewStep("w_out", t("xray.b.wout"), data.weights.w_out));
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
    parts.push(blockLinks(row, data));
    row.panel.replaceChildren(...parts);
  }

  // -- loading ----------------------------------------------------------------------------------------

  function heatLinks() {
    const query = ITT.params();
    for (const row of S.rows.filter((r) => r.heatLink)) {
      const carried = new URLSearchParams();
      for (const name of ["text", "strategy", "temperature", "top_k", "top_p", "beam_size", "max_len", "seed"]) {
        if (query.get(name)) carried.set(name, query.get(name));
      }
      for (const value of query.getAll("forced")) carried.append("forced", value);
      carried.set("kind", row.kind);
      carried.set("layer", String(row.layer));
      carried.set("head", String(/^\d+$/.test(S.head) ? S.head : 0));
      row.heatLink.href = `/attention?${carried}`;
    }
  }

  async function reload() {
    document.body.dataset.xray = "loading";
    S.playing = false;
    clearTimeout(S.timer);
    ITT.clearError();
    const req = ITT.requestFromURL();
    const calls = [ITT.api("/api/trace", req), ITT.api("/api/xray", req)];
    if (req.forced_prefix && req.forced_prefix.length) {
      const plain = { ...req };
      delete plain.forced_prefix;
      calls.push(ITT.api("/api/trace", plain));
    }
    const [trace, xr, original] = await Promise.all(calls);
    for (const side of ["encoder", "decoder"]) xr[side].values = xr[side].values.map(decodeStrip);
    xr.logits = decodeLogits(xr.logits);
    S.req = req;
    S.trace = trace;
    S.xr = xr;
    S.original = original || null;
    S.focus = null;
    for (const state of S.open.values()) { state.position = null; state.row.panel.hidden = true; }
    S.open.clear();
    buildFrames();
    buildRows();
    buildTokens();
    const query = ITT.params();
    const head = query.get("head");
    S.head = head === "all" || (head !== null && /^\d+$/.test(head) && Number(head) < cfg.n_heads) ? head : "avg";
    $("xr-head").value = S.head;
    const frame = Number.parseInt(query.get("frame") || "", 10);
    S.frame = Number.isInteger(frame) ? Math.max(0, Math.min(S.frames.length - 1, frame)) : 0;
    S.drawn = null;
    layoutAll();
    for (const key of (query.get("open") || "").split(",").slice(0, 12)) {
      const row = S.rows.find((r) => r.key === key && r.panel);
      if (row && row.panel.hidden) toggleBlock(row);
    }
    heatLinks();
    drawCompare();
    drawBeam();
    document.body.dataset.xray = "ready";
    requestAnimationFrame(() => { document.body.dataset.xrayDrawnMs = String(Math.round(performance.now())); });
  }

  /** steps × vocabulary float32 (little-endian, base64) → one Float32Array per step (−∞ where
      the model may never produce the token). */
  function decodeLogits(block) {
    const bytes = Uint8Array.from(atob(block.float32), (c) => c.charCodeAt(0));
    const [steps, vocab] = block.shape;
    let all;
    if (new Uint8Array(new Uint16Array([1]).buffer)[0] === 1) {
      all = new Float32Array(bytes.buffer); // this machine is little-endian too: no copy
    } else {
      const view = new DataView(bytes.buffer);
      all = Float32Array.from({ length: steps * vocab }, (_, i) => view.getFloat32(i * 4, true));
    }
    return Array.from({ length: steps }, (_, i) => all.subarray(i * vocab, (i + 1) * vocab));
  }

  /** int8 codes (base64) and a scale → one Float32Array per position: code / 127 × scale. */
  function decodeStrip(stage) {
    const bytes = Uint8Array.from(atob(stage.codes), (c) => c.charCodeAt(0));
    const codes = new Int8Array(bytes.buffer);
    const [length, d] = stage.shape;
    const factor = stage.scale / 127;
    const rows = [];
    for (let i = 0; i < length; i++) {
      const row = new Float32Array(d);
      for (let j = 0; j < d; j++) row[j] = codes[i * d + j] * factor;
      rows.push(row);
    }
    return rows;
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
    $("xr-speed").addEventListener("change", (event) => { S.speed = Number(event.target.value) || 1; if (S.playing) tick(); });
    $("xr-head").addEventListener("change", (event) => {
      S.head = event.target.value;
      saveFrame();
      heatLinks();
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
    $("xr-decode-all").addEventListener("click", () => decodeAll().catch((e) => ITT.showError(e.message)));
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
        if (S.trace) layoutAll();
      });
    });
    observer.observe($("xr-stage"));
    stickyOffset();
  }

  wire();
  ITT.start(reload);
  window.ITTXray = { state: S, filterDistribution, go, play, pause };
})();
