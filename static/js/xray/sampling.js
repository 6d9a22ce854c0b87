/* Sampling redone in the browser, so the knobs answer at once: pure functions, no page access
   (tests/e2e/test_xray_formulas.py imports this file in node and holds it equal to the Python). */

/** softmax(logits / T), then top-k, then top-p, renormalised; cut tokens get exactly 0.
    A copy of model.decoding.filter_distribution (model/decoding.py), which the server samples
    from. Also returns why each cut token went ("k" or "p"); −∞ logits (<pad>, <bos>) are 0. */
export function filterDistribution(logits, temperature, topK, topP) {
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
      keep[i] = before < topP || rank === 0 ? 1 : 0; // the most likely token always stays
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

/** The model's own distribution: softmax(logits). */
export function softmax(logits) {
  return filterDistribution(logits, 1, null, null).probs;
}

/** mulberry32: a small seeded generator, so the same seed always draws the same character. */
export function seeded(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** The index a uniform number u in [0, 1) picks from probs (inverse CDF over kept tokens). */
export function pick(probs, u) {
  let acc = 0;
  for (let i = 0; i < probs.length; i++) {
    acc += probs[i];
    if (probs[i] > 0 && u < acc) return i;
  }
  return probs.length - 1;
}
