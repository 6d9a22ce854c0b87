/* Decoding the x-ray's packed answers (no page access): POST /api/xray/view, the one download per
   sentence, POST /api/xray/heads, asked for when a head is picked or an attention block opens,
   and POST /api/xray/logits, asked for when a sampling knob first turns. The layout is
   app/xray/wire.py's: a uint32 header length, a JSON header, then typed arrays. The view's header
   carries the model's own list of stages (``layout``: model/explain/record.py's), and every
   stage and sublayer name here is read from it, never spelled. */

const TYPES = { int8: Int8Array, uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, float32: Float32Array };
const LITTLE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/* What a packed answer may describe, whatever its header says (a saved file comes from anywhere,
   and every loop below runs over these counts). The originals: model/tokenizer.py's
   MAX_SOURCE_TOKENS (128 pieces, + <eos>: positions), app/schemas.py's MAX_FORCED (a translation's
   steps), the request schemas' layer and head limits (0–63); tests/app/test_xray_caps.py holds
   them equal. The rest bound what no model this app serves comes near. */
export const CAPS = { positions: 129, steps: 128, layers: 64, heads: 64, width: 8192,
  vocab: 1 << 18, candidates: 64, stages: 1024, tokenChars: 64, textChars: 600, magnitude: 1e12 };

/** A packed answer or a saved file that breaks a cap or disagrees with itself. */
export class BadView extends Error {}

export function check(condition, why) {
  if (!condition) throw new BadView(why);
}

const isCount = (n, max) => Number.isInteger(n) && n >= 0 && n <= max;

/** Every number in a parsed header is finite and of a sane size (JSON reads 1e999 as Infinity). */
function finiteEverywhere(value, depth = 0) {
  check(depth < 12, "the header nests too deeply");
  if (typeof value === "number") check(Number.isFinite(value) && Math.abs(value) <= CAPS.magnitude, "a number in the header is not finite");
  else if (Array.isArray(value)) for (const item of value) finiteEverywhere(item, depth + 1);
  else if (value && typeof value === "object") for (const item of Object.values(value)) finiteEverywhere(item, depth + 1);
}

/** A packed answer → { header, arrays: name → { data (a typed array), shape } }. Its structure is
    checked first: a known type, whole non-negative sizes inside the buffer, and no shape whose
    loops would run far past its data (a zero-size dimension beside a huge one). */
export function unpack(buffer) {
  check(buffer instanceof ArrayBuffer && buffer.byteLength >= 4, "too short");
  const length = new DataView(buffer).getUint32(0, true);
  check(length <= buffer.byteLength - 4, "the header runs past the end");
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, length)));
  check(header && typeof header === "object" && !Array.isArray(header), "no header");
  check(header.arrays && typeof header.arrays === "object" && !Array.isArray(header.arrays), "no arrays");
  finiteEverywhere(header);
  const start = 4 + length;
  const arrays = {};
  for (const [name, entry] of Object.entries(header.arrays)) {
    const { dtype, shape, offset } = entry || {};
    const Type = TYPES[dtype];
    check(Type && Object.hasOwn(TYPES, dtype), `${name}: unknown type`);
    check(Array.isArray(shape) && shape.length >= 1 && shape.length <= 5
      && shape.every((n) => isCount(n, 1 << 24)), `${name}: bad shape`);
    const count = shape.reduce((a, b) => a * b, 1);
    const loops = shape.reduce((a, b) => a * Math.max(b, 1), 1);
    check(loops <= 64 * Math.max(count, 1), `${name}: a zero-size dimension beside a large one`);
    check(isCount(offset, buffer.byteLength) && offset % 4 === 0
      && start + offset + count * Type.BYTES_PER_ELEMENT <= buffer.byteLength, `${name}: runs past the end`);
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
  const S = trace.source_tokens.length;
  const T = trace.decoder_input.length;
  for (const side of ["encoder", "decoder"]) {
    for (const entry of attentionsOf(trace.layout, side)) {
      const keys = entry.weights === "encoder" || entry.weights === "cross" ? S : T;
      const array = arrays[`attention.${entry.weights}`];
      check(array && array.shape.length === 5 && array.shape[0] === 3 && array.shape[1] === trace[side].length
        && array.shape[2] >= 1 && array.shape[2] <= CAPS.heads
        && array.shape[3] === (side === "encoder" ? S : T) && array.shape[4] === keys,
      `attention.${entry.weights}: a shape that is not this sentence's`);
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

// -- checks: what a view must be before anything is drawn from it ---------------------------------

const isTokens = (list, max) => Array.isArray(list) && list.length <= max
  && list.every((token) => typeof token === "string" && token.length <= CAPS.tokenChars);
const isProb = (p) => typeof p === "number" && p >= 0 && p <= 1 + 1e-6; // sums may round past 1
const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

/** A side's strips: (stages, L) scales, the codes, and what rebuilds the Add & Norm stages. */
function checkStrips(h, arrays, side, stages, positions) {
  const scales = arrays[`strips.${side}.scales`];
  const codes = arrays[`strips.${side}`];
  check(scales && codes, `strips.${side}: missing`);
  check(scales.data instanceof Float32Array && scales.shape.length === 2 && scales.shape[0] === stages
    && scales.shape[1] === positions, `strips.${side}.scales: a shape that is not this sentence's`);
  for (const x of scales.data) check(Number.isFinite(x) && Math.abs(x) <= 1e6, `strips.${side}.scales: not finite`);
  check(codes.data instanceof Int8Array && codes.shape.length === 3 && codes.shape[1] === positions
    && codes.shape[2] >= 1 && codes.shape[2] <= CAPS.width, `strips.${side}: a shape that is not this sentence's`);
  const coding = (h.norm_prediction || {})[side];
  if (!coding) return check(codes.shape[0] === stages, `strips.${side}: not one strip per stage`);
  const d = codes.shape[2];
  check(Array.isArray(coding) && coding.length <= stages && codes.shape[0] === stages - coding.length,
    `norm_prediction.${side}: not the strips' stages`);
  let last = 1;
  for (const entry of coding) {
    check(isObject(entry) && Number.isInteger(entry.stage) && entry.stage > last && entry.stage < stages
      && entry.eps > 0, `norm_prediction.${side}: a stage out of order`);
    last = entry.stage;
  }
  const size = coding.length * positions * d;
  for (const [part, Type, shape] of [["gamma", Int8Array, [coding.length, d]], ["beta", Int8Array, [coding.length, d]],
    ["corrections", Uint8Array, [Math.ceil(size / 5)]]]) {
    const array = arrays[`strips.${side}.${part}`];
    check(array && array.data instanceof Type && array.shape.length === shape.length
      && array.shape.every((n, i) => (part === "corrections" ? n >= shape[i] : n === shape[i])), `strips.${side}.${part}: bad shape`);
  }
  const gaps = arrays[`strips.${side}.beyond_gaps`];
  const beyond = arrays[`strips.${side}.beyond`];
  check(gaps && beyond && gaps.data instanceof Uint32Array && beyond.data instanceof Int8Array
    && gaps.data.length === beyond.data.length, `strips.${side}.beyond: bad shape`);
}

/** The view's header and arrays agree with each other and stay within CAPS: every count a loop
    runs over, every token list's length, every id below the vocabulary, every float finite. */
function checkView(h, arrays, layout) {
  check(typeof h.text === "string" && h.text.length <= CAPS.textChars, "text");
  check(typeof h.translation === "string" && h.translation.length <= CAPS.steps * CAPS.tokenChars, "translation");
  check(isTokens(h.source_tokens, CAPS.positions) && h.source_tokens.length >= 1, "source_tokens");
  const S = h.source_tokens.length;
  check(isTokens(h.target_tokens, CAPS.steps) && isTokens(h.decoder_input, CAPS.steps), "target_tokens");
  const T = h.decoder_input.length;
  // one step and one decoder input per position; the target tokens lack the <eos> that ends a
  // finished translation
  check(Array.isArray(h.steps) && h.steps.length === T
    && h.target_tokens.length === (h.finished === true ? T - 1 : T), "the steps, target tokens and decoder input are not as many");
  for (const step of h.steps) {
    check(isObject(step) && typeof step.token === "string" && isProb(step.prob ?? 0)
      && (step.top === undefined || (Array.isArray(step.top) && step.top.length <= CAPS.candidates
        && step.top.every((c) => isObject(c) && typeof c.token === "string" && isProb(c.prob)))), "steps");
  }
  check(isObject(h.options) && (h.options.max_len === undefined || isCount(h.options.max_len, CAPS.steps)), "options");
  check(h.beam === undefined || h.beam === null || (Array.isArray(h.beam) && h.beam.length <= CAPS.steps * 64), "beam");
  check(h.original === undefined || h.original === null || isTokens(h.original, CAPS.steps), "original");
  const other = h.alternative;
  check(other === undefined || other === null || (isObject(other) && typeof other.translation === "string"
    && (other.tokens === undefined || isTokens(other.tokens, CAPS.steps))
    && (other.probs === undefined || (Array.isArray(other.probs) && other.probs.length <= CAPS.steps && other.probs.every(isProb)))),
  "alternative");
  check(Array.isArray(h.embedding_head) && h.embedding_head.length === S
    && h.embedding_head.every((row) => Array.isArray(row) && row.length <= CAPS.width), "embedding_head");
  check(Array.isArray(h.norms) && h.norms.length >= 1 && h.norms.length <= 8 && h.norms.every((n) => typeof n === "string"), "norms");
  check(isCount(h.vocab_size, CAPS.vocab) && h.vocab_size >= 1, "vocab_size");
  check(isObject(layout), "layout");
  const layers = {};
  for (const side of ["encoder", "decoder"]) {
    const entries = layout[side];
    check(Array.isArray(entries) && entries.length <= CAPS.stages && entries.every((entry) => isObject(entry)
      && typeof entry.kind === "string" && typeof entry.name === "string" && isCount(entry.layer ?? 0, CAPS.layers - 1)),
    `layout.${side}`);
    check(isObject(h.stages) && Array.isArray(h.stages[side]) && h.stages[side].length <= CAPS.stages
      && h.stages[side].every(isObject), `stages.${side}`);
    const norms = arrays[`norms.${side}`];
    const ffn = arrays[`ffn.${side}`];
    const positions = side === "encoder" ? S : T;
    check(norms && norms.shape.length === 4 && norms.shape[0] >= 1 && norms.shape[0] <= CAPS.layers
      && norms.shape[2] === h.norms.length && norms.shape[3] === positions, `norms.${side}: a shape that is not this sentence's`);
    layers[side] = norms.shape[0];
    check(ffn && ffn.shape.length === 2 && ffn.shape[0] === layers[side] && ffn.shape[1] === positions,
      `ffn.${side}: a shape that is not this sentence's`);
    check(entries.every((entry) => (entry.layer ?? 0) < layers[side]), `layout.${side}: a layer the arrays lack`);
    for (const entry of entries.filter((e) => e.layer === 0)) {
      if (entry.kind === "add_norm") check(isCount(entry.norm, norms.shape[1] - 1), `layout.${side}: an Add & Norm the arrays lack`);
    }
    if (side === "encoder" || arrays["strips.decoder.scales"]) checkStrips(h, arrays, side, h.stages[side].length, positions);
  }
  if (h.attention_means) {
    const { heads, overall, shapes } = h.attention_means;
    check(isCount(heads, CAPS.heads) && heads >= 1 && isCount(overall, CAPS.heads * CAPS.layers) && overall >= 1
      && isObject(shapes), "attention_means");
    const expected = { encoder: [layers.encoder, S, S], decoder_self: [layers.decoder, T, T],
      cross: [layers.decoder, T, S], "cross.overall": [T, S] };
    for (const [kind, shape] of Object.entries(expected)) {
      check(Array.isArray(shapes[kind]) && shapes[kind].length === shape.length && shapes[kind].every((n, i) => n === shape[i]),
        `attention_means.${kind}: a shape that is not this sentence's`);
      const count = shape.reduce((a, b) => a * b, 1);
      const exact = arrays[`attention.${kind}.exact`];
      const sum = arrays[`attention.${kind}.sum`];
      const nudge = arrays[`attention.${kind}.nudge`];
      const coarse = arrays[`attention.${kind}.coarse`];
      check(exact && sum && nudge && coarse && exact.data.length === Math.ceil(count / 8) && sum.shape.length === 2
        && sum.shape[0] === 3 && nudge.data.length === sum.shape[1] && sum.shape[1] + coarse.data.length === count,
      `attention.${kind}: not as many weights as its shape`);
    }
  }
  const ids = arrays["sampling.ids"];
  const logits = arrays["sampling.logits"];
  check(ids && logits && ids.shape.length === 2 && ids.shape[0] === T && ids.shape[1] <= CAPS.candidates
    && logits.shape.length === 2 && logits.shape[0] === T && logits.shape[1] === ids.shape[1]
    && logits.data instanceof Float32Array, "sampling: not one row per step");
  for (const id of ids.data) check(id < h.vocab_size, "sampling.ids: an id beyond the vocabulary");
  for (const x of logits.data) check(Number.isFinite(x), "sampling.logits: not finite");
  const table = h.sampling;
  check(isObject(table) && ["max", "sum", "kept", "mass", "tokens"].every((key) => Array.isArray(table[key]) && table[key].length === T)
    && table.tokens.every((row) => isTokens(row, ids.shape[1]) && row.length === ids.shape[1]) && table.mass.every(isProb),
  "sampling: not one row per step");
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
  checkView(h, arrays, layout);
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
    decoder: { stages: h.stages.decoder, positions: h.decoder_input.length,
      values: arrays["strips.decoder.scales"] ? sideStrips(h, arrays, "decoder") : null,
      ranges: h.strip_ranges ? h.strip_ranges.decoder : null },
    length_penalty: h.length_penalty, vocabSize: h.vocab_size, sampling, logits: null, vocab: null,
  };
  const original = h.original ? { steps: h.original.map((token) => ({ token })) } : null;
  return { trace, xr, original, alternative: h.alternative || null };
}

/** /api/xray/strips → the decoder's strips, set on ``xr`` as decodeView sets the encoder's. */
export function decodeStrips(buffer, xr) {
  const { header, arrays } = unpack(buffer);
  checkStrips(header, arrays, "decoder", xr.decoder.stages.length, xr.decoder.positions);
  xr.decoder.values = sideStrips(header, arrays, "decoder");
}

/** /api/xray/logits → { logits: one Float32Array per step (−∞ where the model may never
    produce the token), vocab }. */
export function decodeLogits(buffer) {
  const { header, arrays } = unpack(buffer);
  const { data, shape: [steps, vocab] } = arrays.logits;
  return { vocab: header.vocab, logits: Array.from({ length: steps }, (_, i) => data.subarray(i * vocab, (i + 1) * vocab)) };
}
