/* The narration: what the frame computes, and in which layer, with the trace's real numbers. */

import { S } from "./state.js";
import { $, argmax, cfg, fixed, SIZES, t } from "./dom.js";
import { headWeights } from "./overlay.js";

/** The numbers an Add & Norm narration quotes at position pos. */
function addNorm(an, pos) {
  return { a: fixed(an.residual_norm[pos], 1), b: fixed(an.sublayer_norm[pos], 1), c: fixed(an.normed_norm[pos], 1) };
}

/* The strings are found by the stage's own name (xray.n.enc.<name>, xray.n.dec.<name>); the last
   stage of the last layer has its own (the encoder's memory, the decoder's hand-over to the
   output: <name>_last, xray.n.enc.memory). */

function encoderText(frame) {
  const tr = S.trace;
  const focusPos = S.focus && S.focus.side === "encoder" ? S.focus.pos : Math.min(1, tr.source_tokens.length - 1);
  const tok = tr.source_tokens[focusPos];
  if (frame.name === "tokens") {
    return t("xray.n.enc.tokens", { n: tr.source_tokens.length, tokens: tr.source_tokens.join(" · "), v: SIZES.vocab_en });
  }
  const key = `xray.n.enc.${frame.name}`;
  if (frame.part === "embed") {
    return t(key, { d: cfg.d_model, s: fixed(Math.sqrt(cfg.d_model), 0), tok,
      vals: tr.embeddings.encoder.sum[focusPos].slice(0, 3).map((v) => fixed(v, 2)).join(", ") });
  }
  const layer = tr.encoder[frame.layer];
  const where = { layer: frame.layer + 1, layers: tr.encoder.length, tok };
  switch (frame.part) {
    case "attention": {
      const w = headWeights(layer, frame.name)[focusPos];
      const k = argmax(w, focusPos);
      return t(key, { ...where, h: cfg.n_heads, k: cfg.d_model / cfg.n_heads,
        key: tr.source_tokens[k], w: fixed(w[k], 2) });
    }
    case "feed_forward": {
      const shares = layer[frame.name].active_share;
      const share = shares.reduce((a, b) => a + b, 0) / shares.length;
      return t(key, { ...where, d: cfg.d_model, ff: cfg.d_ff, act: cfg.activation, share: fixed(share * 100, 1) });
    }
    default: { // an Add & Norm
      const last = frame.end && frame.layer === tr.encoder.length - 1;
      return t(last ? "xray.n.enc.memory" : key, { ...where, ...addNorm(layer[frame.name], focusPos),
        next: frame.layer + 2, n: tr.source_tokens.length, d: cfg.d_model });
    }
  }
}

function decoderText(frame) {
  const tr = S.trace;
  const p = frame.t - 1;
  const cur = tr.decoder_input[p];
  const step = tr.steps[p];
  const key = `xray.n.dec.${frame.name}`;
  if (frame.part === "embed") {
    return t(key, { t: frame.t, prefix: tr.decoder_input.slice(0, p + 1).join(" "), cur, p,
      d: cfg.d_model });
  }
  if (frame.part === "logits") {
    const top = step.top.slice(0, 3).map((c) => `P(${c.token}) = ${fixed(c.prob, 3)}`)
      .join(t("xray.how.top_sep"));
    const how = t(step.forced ? "xray.how.forced" : `xray.how.${tr.options.strategy}`);
    return step.token === "<eos>"
      ? t(`${key}_eos`, { top, how })
      : t(key, { d: cfg.d_model, v: SIZES.vocab_zh, top, how, tok: step.token, prob: fixed(step.prob, 3) });
  }
  const layer = tr.decoder[frame.layer];
  const where = { layer: frame.layer + 1, layers: tr.decoder.length, cur };
  if (frame.part === "attention" && frame.attends === "cross") {
    const w = headWeights(layer, frame.name)[p];
    const k = argmax(w, -1);
    const avg = tr.cross_overall[p]; // every layer's every head, averaged (data.js)
    const ka = argmax(avg, -1);
    return t(key, { ...where, src: tr.source_tokens[k], w: fixed(w[k], 2),
      src_avg: tr.source_tokens[ka], w_avg: fixed(avg[ka], 2) });
  }
  switch (frame.part) {
    case "attention": {
      const w = headWeights(layer, frame.name)[p].slice(0, p + 1);
      const k = argmax(w, -1);
      return t(key, { ...where, key: tr.decoder_input[k], w: fixed(w[k], 2) });
    }
    case "feed_forward":
      return t(key, { ...where, d: cfg.d_model, ff: cfg.d_ff, act: cfg.activation,
        share: fixed(layer[frame.name].active_share[p] * 100, 1) });
    default: { // an Add & Norm
      const last = frame.end && frame.layer === tr.decoder.length - 1;
      return t(last ? `${key}_last` : key, { ...where, ...addNorm(layer[frame.name], p), next: frame.layer + 2 });
    }
  }
}

/** What the narration says at ``frame`` (the player times its dwell by it). */
export function narrationText(frame) {
  return frame.t === 0 ? encoderText(frame) : decoderText(frame);
}

/* How long a reader needs for a narration: its words (English, and the Latin words and numbers
   of a Chinese line) and its Chinese characters at a steady reading pace for text full of
   numbers, never less than MIN_READ_MS. About 200 words or 300 characters a minute: slower than
   prose (the lines quote numbers to compare), so a learner who reads each line once keeps up. */
export const MS_PER_WORD = 300;
export const MS_PER_HAN = 200;
export const MIN_READ_MS = 2000;
const HAN = /[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]/g;

/** Milliseconds to read ``text`` once (see above). */
export function readingMs(text) {
  const han = (text.match(HAN) || []).length;
  const words = text.replace(HAN, " ").split(/\s+/).filter((w) => /[\p{L}\p{N}]/u.test(w)).length;
  return Math.max(MIN_READ_MS, han * MS_PER_HAN + words * MS_PER_WORD);
}

export function narrate(frame) {
  const text = narrationText(frame);
  const box = $("xr-narration");
  if (box.textContent !== text) box.textContent = text;
  box.dataset.readMs = String(readingMs(text));
}
