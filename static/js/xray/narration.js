/* The narration: what the frame computes, and in which layer, with the trace's real numbers. */

import { S } from "./state.js";
import { $, argmax, cfg, fixed, SIZES, t } from "./dom.js";
import { headWeights } from "./overlay.js";

/** The numbers an Add & Norm narration quotes at position pos. */
function addNorm(an, pos) {
  return { a: fixed(an.residual_norm[pos], 1), b: fixed(an.sublayer_norm[pos], 1), c: fixed(an.normed_norm[pos], 1) };
}

function encoderText(frame) {
  const tr = S.trace;
  const focusPos = S.focus && S.focus.side === "encoder" ? S.focus.pos : Math.min(1, tr.source_tokens.length - 1);
  const tok = tr.source_tokens[focusPos];
  if (frame.name === "tokens") {
    return t("xray.n.enc.tokens", { n: tr.source_tokens.length, tokens: tr.source_tokens.join(" · "), v: SIZES.vocab_en });
  }
  if (frame.name === "embedding") {
    return t("xray.n.enc.embedding", { d: cfg.d_model, s: fixed(Math.sqrt(cfg.d_model), 0), tok,
      vals: tr.embeddings.encoder.sum[focusPos].slice(0, 3).map((v) => fixed(v, 2)).join(", ") });
  }
  const layer = tr.encoder[frame.layer];
  const where = { layer: frame.layer + 1, layers: tr.encoder.length, tok };
  switch (frame.name) {
    case "self_attention": {
      const w = headWeights(layer, "self_attention")[focusPos];
      const k = argmax(w, focusPos);
      return t("xray.n.enc.self_attention", { ...where, h: cfg.n_heads, k: cfg.d_model / cfg.n_heads,
        key: tr.source_tokens[k], w: fixed(w[k], 2) });
    }
    case "add_norm1":
      return t("xray.n.enc.add_norm1", { ...where, ...addNorm(layer.add_norm1, focusPos) });
    case "ffn": {
      const share = layer.ffn.active_share.reduce((a, b) => a + b, 0) / layer.ffn.active_share.length;
      return t("xray.n.enc.ffn", { ...where, d: cfg.d_model, ff: cfg.d_ff, act: cfg.activation, share: fixed(share * 100, 1) });
    }
    default: {
      const last = frame.layer === tr.encoder.length - 1;
      return t(last ? "xray.n.enc.memory" : "xray.n.enc.add_norm2", { ...where, ...addNorm(layer.add_norm2, focusPos),
        next: frame.layer + 2, n: tr.source_tokens.length, d: cfg.d_model });
    }
  }
}

function decoderText(frame) {
  const tr = S.trace;
  const p = frame.t - 1;
  const cur = tr.decoder_input[p];
  const step = tr.steps[p];
  if (frame.name === "embedding") {
    return t("xray.n.dec.embedding", { t: frame.t, prefix: tr.decoder_input.slice(0, p + 1).join(" "), cur, p,
      d: cfg.d_model });
  }
  if (frame.name === "output") {
    const top = step.top.slice(0, 3).map((c) => `P(${c.token}) = ${fixed(c.prob, 3)}`).join(", ");
    const how = t(step.forced ? "xray.how.forced" : `xray.how.${tr.options.strategy}`);
    return step.token === "<eos>"
      ? t("xray.n.dec.output_eos", { top, how })
      : t("xray.n.dec.output", { d: cfg.d_model, v: SIZES.vocab_zh, top, how, tok: step.token, prob: fixed(step.prob, 3) });
  }
  const layer = tr.decoder[frame.layer];
  const where = { layer: frame.layer + 1, layers: tr.decoder.length, cur };
  switch (frame.name) {
    case "self_attention": {
      const w = headWeights(layer, "self_attention")[p].slice(0, p + 1);
      const k = argmax(w, -1);
      return t("xray.n.dec.self_attention", { ...where, key: tr.decoder_input[k], w: fixed(w[k], 2) });
    }
    case "cross_attention": {
      const w = headWeights(layer, "cross_attention")[p];
      const k = argmax(w, -1);
      const avg = tr.cross_overall[p]; // every layer's every head, averaged (data.js)
      const ka = argmax(avg, -1);
      return t("xray.n.dec.cross_attention", { ...where, src: tr.source_tokens[k], w: fixed(w[k], 2),
        src_avg: tr.source_tokens[ka], w_avg: fixed(avg[ka], 2) });
    }
    case "ffn":
      return t("xray.n.dec.ffn", { ...where, d: cfg.d_model, ff: cfg.d_ff, act: cfg.activation,
        share: fixed(layer.ffn.active_share[p] * 100, 1) });
    case "add_norm3": {
      const last = frame.layer === tr.decoder.length - 1;
      return t(last ? "xray.n.dec.add_norm3_last" : "xray.n.dec.add_norm3",
        { ...where, ...addNorm(layer.add_norm3, p), next: frame.layer + 2 });
    }
    default: // add_norm1, add_norm2
      return t(`xray.n.dec.${frame.name}`, { ...where, ...addNorm(layer[frame.name], p) });
  }
}

export function narrate(frame) {
  const text = frame.t === 0 ? encoderText(frame) : decoderText(frame);
  const box = $("xr-narration");
  if (box.textContent !== text) box.textContent = text;
}
