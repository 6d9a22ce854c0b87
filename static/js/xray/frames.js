/* The timeline, in the order the model computes: the encoder once, layer by layer, then at every
   decoding step the new token's embedding, decoder layer 1's sub-steps, layer 2's, …, and the
   output. The sub-steps are the model's own stages, as the view's header lists them
   (S.xr.layout: model/explain/record.py's layout), so another layout or more layers need no
   change here. A frame is one sub-step; a row is computed (its strip shown) once its sub-step has
   run, and lit only while it runs. */

import { S } from "./state.js";

/** The sub-steps of one phase ({side, name, layer, part, attends, end}): t = 0 the encoder, t ≥ 1
    decoding step t. part is the stage's kind (embed, attention, add_norm, feed_forward, logits);
    end, whether it is the last stage of its layer. */
function phase(t) {
  const side = t === 0 ? "encoder" : "decoder";
  const entries = S.xr.layout[side];
  const subs = t === 0 ? [{ side, name: "tokens" }] : [];
  entries.forEach((entry, i) => {
    const sub = { side, name: entry.name, part: entry.kind };
    if (entry.layer !== null) {
      sub.layer = entry.layer;
      sub.end = !entries[i + 1] || entries[i + 1].layer !== entry.layer;
    }
    if (entry.attends) sub.attends = entry.attends;
    subs.push(sub);
  });
  return subs;
}

/** S.frames for S.detail: "blocks" every sub-step; "steps" (fast) the start, the finished
    encoder and each step's output only. A frame is {t, sub, subs, side, name, layer, part}: sub
    is its index among the subs sub-steps of its phase. */
export function buildFrames() {
  const all = [];
  for (let t = 0; t <= S.trace.steps.length; t++) {
    const subs = phase(t);
    subs.forEach((f, sub) => all.push({ ...f, t, sub, subs: subs.length }));
  }
  S.frames = S.detail === "steps"
    ? all.filter((f) => (f.t === 0 && (f.sub === 0 || f.sub === f.subs - 1)) || f.part === "logits")
    : all;
}

export function current() {
  return S.frames[S.frame] || { t: 0, sub: 0, subs: 1, side: "encoder", name: "tokens" };
}

/** The index of time step t's first frame of kind part (−1 if there is none). */
export function frameIndex(t, part) {
  return S.frames.findIndex((f) => f.t === t && f.part === part);
}

/** The first frame at or after (t, sub): where to stay when the frames are rebuilt. */
export function frameAtOrAfter(t, sub) {
  const index = S.frames.findIndex((f) => f.t > t || (f.t === t && f.sub >= sub));
  return index < 0 ? S.frames.length - 1 : index;
}

/** A row's sub-step within its phase: its stage's place in the layout (the encoder's tokens come
    first; the decoder's tokens row shares the embedding's, its chosen row the output's). */
function rowOrder(row) {
  if (row.side === "encoder") return row.type === "tokens" ? 0 : 1 + row.index;
  if (row.type === "tokens") return 0;
  if (row.type === "chosen") return S.xr.layout.decoder.length - 1;
  return row.index;
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
