/* The timeline, in the order the model computes: the encoder once, layer by layer (self-attention,
   Add & Norm, FFN, Add & Norm in each), then at every decoding step the new token's embedding,
   decoder layer 1's six sub-steps, layer 2's, …, and the output. A frame is one sub-step; a row
   is computed (its strip shown) once its sub-step has run, and lit only while it runs. */

import { S } from "./state.js";
import { cfg } from "./dom.js";

export const ENC_LAYER = ["self_attention", "add_norm1", "ffn", "add_norm2"];
export const DEC_LAYER = ["self_attention", "add_norm1", "cross_attention", "add_norm2", "ffn", "add_norm3"];

/** The sub-steps of one phase ({side, name, layer}): t = 0 the encoder, t ≥ 1 decoding step t. */
function phase(t) {
  const side = t === 0 ? "encoder" : "decoder";
  const subs = t === 0 ? [{ side, name: "tokens" }, { side, name: "embedding" }] : [{ side, name: "embedding" }];
  const layers = t === 0 ? cfg.n_encoder_layers : cfg.n_decoder_layers;
  for (let layer = 0; layer < layers; layer++) {
    for (const name of t === 0 ? ENC_LAYER : DEC_LAYER) subs.push({ side, name, layer });
  }
  if (t > 0) subs.push({ side, name: "output" });
  return subs;
}

/** S.frames for S.detail: "blocks" every sub-step; "steps" (fast) the start, the finished
    encoder and each step's output only. A frame is {t, sub, subs, side, name, layer}: sub is its
    index among the subs sub-steps of its phase. */
export function buildFrames() {
  const all = [];
  for (let t = 0; t <= S.trace.steps.length; t++) {
    const subs = phase(t);
    subs.forEach((f, sub) => all.push({ ...f, t, sub, subs: subs.length }));
  }
  S.frames = S.detail === "steps"
    ? all.filter((f) => (f.t === 0 && (f.sub === 0 || f.sub === f.subs - 1)) || f.name === "output")
    : all;
}

export function current() {
  return S.frames[S.frame] || { t: 0, sub: 0, subs: 1, side: "encoder", name: "tokens" };
}

/** The index of time step t's first frame named name (−1 if there is none). */
export function frameIndex(t, name) {
  return S.frames.findIndex((f) => f.t === t && f.name === name);
}

/** The first frame at or after (t, sub): where to stay when the frames are rebuilt. */
export function frameAtOrAfter(t, sub) {
  const index = S.frames.findIndex((f) => f.t > t || (f.t === t && f.sub >= sub));
  return index < 0 ? S.frames.length - 1 : index;
}

/** A row's sub-step within its phase (tokens and embedding rows of the decoder share the first,
    its output and chosen rows the last). */
function rowOrder(row) {
  if (row.side === "encoder") {
    if (row.type === "tokens") return 0;
    if (row.layer === undefined) return 1;
    return 2 + ENC_LAYER.length * row.layer + ENC_LAYER.indexOf(row.block);
  }
  if (row.type === "tokens" || row.block === "embedding") return 0;
  if (row.layer === undefined) return 1 + DEC_LAYER.length * cfg.n_decoder_layers;
  return 1 + DEC_LAYER.length * row.layer + DEC_LAYER.indexOf(row.block);
}

/** What a row shows at a frame: lanes, how many positions it has computed; fresh, whether its
    newest lane was computed in this frame's phase (this step, for the decoder); active, whether it
    is the block computing now. */
export function rowState(row, frame) {
  const order = rowOrder(row);
  const here = frame.side === row.side;
  const done = here ? order <= frame.sub : frame.t > 0; // the encoder is done once decoding starts
  const active = here && order === frame.sub;
  if (row.side === "encoder") return { lanes: done ? S.trace.source_tokens.length : 0, fresh: here && done, active };
  return { lanes: frame.t === 0 ? 0 : (done ? frame.t : frame.t - 1), fresh: done, active };
}

/** Whether the memory (the last encoder layer's output) exists at this frame. */
export function memoryReady(frame) {
  return frame.t > 0 || frame.sub === frame.subs - 1;
}

/** The keys of the rows this frame lights: only the block computing. */
export function activeBlocks(frame) {
  return new Set(S.rows.filter((row) => rowState(row, frame).active).map((row) => row.key));
}
