/* The narration: what the frame computes, in words, with the trace's real numbers. */

import { S } from "./state.js";
import { $, argmax, cfg, fixed, SIZES, t } from "./dom.js";
import { headWeights } from "./overlay.js";

function layerLabel(l) { return l + 1; }

export function narrate(frame) {
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
