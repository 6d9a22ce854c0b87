/* Decoding the x-ray's packed answers (no page access): POST /api/xray/view, the one download per
   sentence, POST /api/xray/heads, asked for when a head is picked or an attention block opens,
   and POST /api/xray/logits, asked for when a sampling knob first turns. The layout is
   app/xray/wire.py's: a uint32 header length, a JSON header, then typed arrays. The view's header
   carries the model's own list of stages (``layout``: model/explain/record.py's), and every
   stage and sublayer name here is read from it, never spelled. */

const TYPES = { int8: Int8Array, uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, float32: Float32Array };
const LITTLE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** A packed answer → { header, arrays: name → { data (a typed array), shape } }. */
export function unpack(buffer) {
  const length = new DataView(buffer).getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, length)));
  const start = 4 + length;
  const arrays = {};
  for (const [name, { dtype, shape, offset }] of Object.entries(header.arrays)) {
    const Type = TYPES[dtype];
    const count = shape.reduce((a, b) => a * b, 1);
    let data;
    if (LITTLE || Type.BYTES_PER_ELEMENT === 1) {
      data = new Type(buffer, start + offset, count); // every array starts at a multiple of 4
    } else {
      const view = new DataView(buffer, start + offset);
      const get = { 2: (i) => view.getUint16(i * 2, true), 4: dtype === "float32"
        ? (i) => view.getFloat32(i * 4, true) : (i) => view.getUint32(i * 4, true) }[Type.BYTES_PER_ELEMENT];
      data = Type.from({ length: count }, (_, i) => get(i));
    }
    arrays[name] = { data, shape };
  }
  return { header, arrays };
}

/** The int8 codes LayerNorm(residual + sublayer) · γ + β would get at the output's scales, from
    the two strips before it: app/xray/strips.py's norm_prediction, operation for operation
    (integer sums, then the same float64 operations in the same order), so the guess is the
    server's bit for bit. a, b, out: offsets of the (L, d) stages in codes; scales (stages, L). */
function normPrediction(codes, scales, length, d, a, b, out, gamma, beta, eps) {
  const guess = new Int32Array(length * d);
  for (let i = 0; i < length; i++) {
    const sa = scales[a / d + i] / 127;
    const sb = scales[b / d + i] / 127;
    const so = scales[out / d + i];
    let sumA = 0, sumB = 0, qaa = 0, qab = 0, qbb = 0;
    for (let j = 0; j < d; j++) {
      const x = codes[a + i * d + j], y = codes[b + i * d + j];
      sumA += x; sumB += y; qaa += x * x; qab += x * y; qbb += y * y;
    }
    const caa = d * qaa - sumA * sumA, cab = d * qab - sumA * sumB, cbb = d * qbb - sumB * sumB;
    const mean = (sa * sumA + sb * sumB) / d;
    const variance = (sa * sa * caa + 2 * sa * sb * cab + sb * sb * cbb) / (d * d);
    const den = Math.sqrt(variance + eps);
    for (let j = 0; j < d; j++) {
      const v = ((sa * codes[a + i * d + j] + sb * codes[b + i * d + j]) - mean) / den * gamma[j] + beta[j];
      guess[i * d + j] = Math.min(127, Math.max(-127, Math.floor(v / so * 127 + 0.5)));
    }
  }
  return guess;
}

/** Base-3 corrections, five per byte (app/xray/wire.py's trits), with the few beyond ±1
    at the running sums of gaps → count int8 corrections. */
const TRITS = Int8Array.from({ length: 243 * 5 }, (_, i) => (Math.floor(Math.floor(i / 5) / 3 ** (i % 5)) % 3) - 1);

function untrits(packed, gaps, beyond, count) {
  const out = new Int8Array(packed.length * 5);
  for (let i = 0, o = 0; i < packed.length; i++) {
    const t = packed[i] * 5;
    out[o++] = TRITS[t]; out[o++] = TRITS[t + 1]; out[o++] = TRITS[t + 2]; out[o++] = TRITS[t + 3]; out[o++] = TRITS[t + 4];
  }
  let at = 0;
  for (let e = 0; e < gaps.length; e++) { at += gaps[e]; out[at] = beyond[e]; }
  return out.subarray(0, count);
}

/** A side's (stages, L, d) int8 codes as the page paints them. When the header has
    norm_prediction, the Add & Norm stages come apart, as code − guess (mod 256): the guess is
    recomputed here from the stages before (in stage order) and added back. Earlier answers (a
    saved x-ray) carry every stage's codes themselves. */
function stripCodes(header, arrays, side) {
  const coding = (header.norm_prediction || {})[side];
  if (!coding) return arrays[`strips.${side}`].data;
  const scales = arrays[`strips.${side}.scales`];
  const [stages, length] = scales.shape;
  const { data: plain, shape: [, , d] } = arrays[`strips.${side}`];
  const size = length * d;
  const codes = new Int8Array(stages * size);
  const predicted = new Set(coding.map(({ stage }) => stage));
  let k = 0;
  for (let s = 0; s < stages; s++) {
    if (predicted.has(s)) continue;
    codes.set(plain.subarray(k * size, (k + 1) * size), s * size);
    k++;
  }
  const corrections = untrits(arrays[`strips.${side}.corrections`].data, arrays[`strips.${side}.beyond_gaps`].data,
    arrays[`strips.${side}.beyond`].data, coding.length * size);
  coding.forEach(({ stage: s, eps, gamma_step: gStep, beta_step: bStep }, k) => {
    const gamma = Float64Array.from(arrays[`strips.${side}.gamma`].data.subarray(k * d, (k + 1) * d), (g) => g * gStep);
    const beta = Float64Array.from(arrays[`strips.${side}.beta`].data.subarray(k * d, (k + 1) * d), (b) => b * bStep);
    const guess = normPrediction(codes, scales.data, length, d, (s - 2) * size, (s - 1) * size, s * size, gamma, beta, eps);
    for (let n = 0; n < size; n++) codes[s * size + n] = ((guess[n] + corrections[k * size + n] + 128) & 255) - 128;
  });
  return codes;
}

/** (stages, L, d) int8 codes and (stages, L) float32 scales, one per position → per stage, one
    Float32Array per position: code / 127 × its position's scale (what /api/xray's strips decode
    to). One scale per position keeps a token with a huge vector from blanking the others. */
function strips(data, [stages, length, d], { data: scales }) {
  return Array.from({ length: stages }, (_, s) => {
    const rows = [];
    for (let i = 0; i < length; i++) {
      const factor = scales[s * length + i] / 127;
      const row = new Float32Array(d);
      const base = (s * length + i) * d;
      for (let j = 0; j < d; j++) row[j] = data[base + j] * factor;
      rows.push(row);
    }
    return rows;
  });
}

function sideStrips(header, arrays, side) {
  const scales = arrays[`strips.${side}.scales`];
  const d = arrays[`strips.${side}`].shape[2];
  return strips(stripCodes(header, arrays, side), [...scales.shape, d], scales);
}

/** Nested arrays of plain numbers, code / divisor, for an array's shape (from its first axis). */
function nested(values, shape, divisor, at = 0, axis = 0) {
  if (axis === shape.length - 1) {
    const out = new Array(shape[axis]);
    for (let i = 0; i < shape[axis]; i++) out[i] = values[at + i] / divisor;
    return out;
  }
  const stride = shape.slice(axis + 1).reduce((a, b) => a * b, 1);
  return Array.from({ length: shape[axis] }, (_, i) => nested(values, shape, divisor, at + i * stride, axis + 1));
}

/** Three byte planes (low, middle, high) → the uint32 codes they split. */
function joinPlanes({ data, shape: [, ...shape] }) {
  const n = shape.reduce((a, b) => a * b, 1);
  const codes = new Uint32Array(n);
  for (let i = 0; i < n; i++) codes[i] = data[i] | (data[n + i] << 8) | (data[2 * n + i] << 16);
  return { codes, shape };
}

/** [layer][head][query][key] attention weights, code / 10⁵: the trace's 5-decimal numbers. */
function attention(array) {
  const { codes, shape } = joinPlanes(array);
  return nested(codes, shape, 1e5);
}

const BITS = new Float64Array(1);
const BITS_INT = new BigInt64Array(BITS.buffer);

/** A head average as app/xray/view.py's shown_means sends it: where ``.exact`` is set,
    sum / (n · 10⁵) moved by its nudge in float64 steps — the very float the page took before
    as the mean of every head's weights —, elsewhere coarse / 100 (below the weight from which a
    line is drawn, and never among a row's three largest: nothing shows it). */
function means(arrays, name, n, shape) {
  const exact = arrays[`${name}.exact`].data;
  const { codes } = joinPlanes(arrays[`${name}.sum`]);
  const nudges = arrays[`${name}.nudge`].data;
  const coarse = arrays[`${name}.coarse`].data;
  const count = shape.reduce((a, b) => a * b, 1);
  const values = new Float64Array(count);
  let e = 0;
  let c = 0;
  for (let i = 0; i < count; i++) {
    if ((exact[i >> 3] >> (7 - (i & 7))) & 1) {
      let v = codes[e] / (n * 100000);
      if (nudges[e] !== 0) {
        BITS[0] = v;
        BITS_INT[0] += BigInt(nudges[e]);
        v = BITS[0];
      }
      values[i] = v;
      e++;
    } else {
      values[i] = coarse[c++] / 100;
    }
  }
  return nested(values, shape, 1);
}

/** The mean of several [query][key] matrices as the page takes it: the sum in order, ÷ n. */
export function meanOf(matrices) {
  return matrices[0].map((row, q) => row.map((_, k) => {
    let s = 0;
    for (const matrix of matrices) s += matrix[q][k];
    return s / matrices.length;
  }));
}

/** The attention of a view saved before the heads went apart (every head in it), as a view of
    today reads: every head, their means per layer and the narration's mean over all of them. */
function oldAttention(arrays) {
  const all = Object.fromEntries(Object.keys(arrays).filter((name) => /^attention\.[a-z_]+$/.test(name))
    .map((name) => [name.slice("attention.".length), attention(arrays[name])]));
  const mean = Object.fromEntries(Object.entries(all).map(([kind, layers]) => [kind, layers.map(meanOf)]));
  return { heads: all, mean, overall: meanOf(all.cross.flat()) };
}

/** The head averages of a view: [layer][query][key] per kind, and [query][key] over every layer. */
function attentionMeans(header, arrays) {
  if (arrays["attention.encoder"]) return oldAttention(arrays);
  const { heads, overall, shapes } = header.attention_means;
  const kinds = Object.keys(shapes).filter((kind) => !kind.includes("."));
  const mean = Object.fromEntries(kinds.map((kind) => [kind, means(arrays, `attention.${kind}`, heads, shapes[kind])]));
  return { heads: null, mean, overall: means(arrays, "attention.cross.overall", overall, shapes["cross.overall"]) };
}

/** The attention stages of a side's layer 0 (each one's name and the name of its weights). */
const attentionsOf = (layout, side) => layout[side].filter((entry) => entry.kind === "attention" && entry.layer === 0);

/** /api/xray/heads → every head's weights, set on the trace's layers as /api/trace has them
    (by each attention's name: [head][query][key]). */
export function decodeHeads(buffer, trace) {
  const { arrays } = unpack(buffer);
  for (const side of ["encoder", "decoder"]) {
    for (const entry of attentionsOf(trace.layout, side)) {
      const weights = attention(arrays[`attention.${entry.weights}`]);
      trace[side].forEach((layer, l) => { layer[entry.name] = weights[l]; });
    }
  }
  trace.heads = true;
}

/** Per layer of a side, what the page reads of /api/trace's layers, by the layout's names: each
    attention's weights averaged over the heads (``<name>_mean``; every head's, ``<name>``, null
    until /api/xray/heads), each Add & Norm's three sizes (code / 10³) and the FFN's active share
    (code / 10⁴). */
function layers(header, arrays, side, weights, layout) {
  const norms = nested(arrays[`norms.${side}`].data, arrays[`norms.${side}`].shape, 1e3);
  const ffn = nested(arrays[`ffn.${side}`].data, arrays[`ffn.${side}`].shape, 1e4);
  const first = layout[side].filter((entry) => entry.layer === 0);
  return norms.map((_, l) => {
    const layer = {};
    for (const entry of first) {
      if (entry.kind === "attention") {
        layer[entry.name] = weights.heads ? weights.heads[entry.weights][l] : null;
        layer[`${entry.name}_mean`] = weights.mean[entry.weights][l];
      } else if (entry.kind === "feed_forward") {
        layer[entry.name] = { active_share: ffn[l] };
      } else if (entry.kind === "add_norm") {
        layer[entry.name] = Object.fromEntries(header.norms.map((norm, k) => [norm, norms[l][entry.norm][k]]));
      }
    }
    return layer;
  });
}

/** /api/xray/view → { trace, xr, original, alternative }: trace with the fields of /api/trace the page reads
    (every head's attention only in a view saved before they went apart: trace.heads says) and
    the model's stages (``layout``: the header's; ``fallback``, the page's model's, for a view
    saved before headers carried theirs),
    xr the strips (the decoder's null until /api/xray/strips), the sampling table's rows and the length penalty (logits: null until asked),
    original the unforced translation's steps when a prefix was forced, alternative the sentence
    by the other decoding (beam 4, or greedy when the view is beam 4's; null in older files). */
export function decodeView(buffer, fallback = null) {
  const { header: h, arrays } = unpack(buffer);
  const layout = h.layout || fallback;
  const weights = attentionMeans(h, arrays);
  const trace = {
    text: h.text, translation: h.translation, finished: h.finished, options: h.options,
    source_tokens: h.source_tokens, target_tokens: h.target_tokens, decoder_input: h.decoder_input,
    steps: h.steps, beam: h.beam, embeddings: { encoder: { sum: h.embedding_head } },
    encoder: layers(h, arrays, "encoder", weights, layout), decoder: layers(h, arrays, "decoder", weights, layout),
    cross_overall: weights.overall, heads: weights.heads !== null, layout,
  };
  const ids = arrays["sampling.ids"];
  const [steps, rows] = ids.shape;
  const sampling = Array.from({ length: steps }, (_, t) => ({
    ids: Array.from(ids.data.subarray(t * rows, (t + 1) * rows)),
    logits: arrays["sampling.logits"].data.subarray(t * rows, (t + 1) * rows),
    tokens: h.sampling.tokens[t], max: h.sampling.max[t], sum: h.sampling.sum[t],
    kept: h.sampling.kept[t], mass: h.sampling.mass[t],
  }));
  // the decoder's strips come from /api/xray/strips when the player first moves (decodeStrips);
  // a view saved before they went apart carries them. ranges: each decoder row's ±m meanwhile
  const xr = {
    layout,
    encoder: { stages: h.stages.encoder, values: sideStrips(h, arrays, "encoder") },
    decoder: { stages: h.stages.decoder, values: arrays["strips.decoder.scales"] ? sideStrips(h, arrays, "decoder") : null,
      ranges: h.strip_ranges ? h.strip_ranges.decoder : null },
    length_penalty: h.length_penalty, vocabSize: h.vocab_size, sampling, logits: null, vocab: null,
  };
  const original = h.original ? { steps: h.original.map((token) => ({ token })) } : null;
  return { trace, xr, original, alternative: h.alternative || null };
}

/** /api/xray/strips → the decoder's strips, set on ``xr`` as decodeView sets the encoder's. */
export function decodeStrips(buffer, xr) {
  const { header, arrays } = unpack(buffer);
  xr.decoder.values = sideStrips(header, arrays, "decoder");
}

/** /api/xray/logits → { logits: one Float32Array per step (−∞ where the model may never
    produce the token), vocab }. */
export function decodeLogits(buffer) {
  const { header, arrays } = unpack(buffer);
  const { data, shape: [steps, vocab] } = arrays.logits;
  return { vocab: header.vocab, logits: Array.from({ length: steps }, (_, i) => data.subarray(i * vocab, (i + 1) * vocab)) };
}
