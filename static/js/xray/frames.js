/* The timeline: which frames exist and which blocks each one lights. */

import { S } from "./state.js";

export const ENC_SUBS = ["tokens", "embedding", "self_attention", "add_norm1", "ffn", "add_norm2"];
export const DEC_SUBS = ["self_attention", "add_norm1", "cross_attention", "add_norm2", "ffn", "add_norm3",
  "output"];

/** The encoder phase (t = 0), then seven sub-steps per decoding time step t = 1 … steps. */
export function buildFrames() {
  S.frames = ENC_SUBS.map((sub, i) => ({ t: 0, sub: i, name: sub }));
  S.trace.steps.forEach((_, index) => {
    DEC_SUBS.forEach((sub, i) => S.frames.push({ t: index + 1, sub: i, name: sub }));
  });
}

export function current() {
  return S.frames[S.frame] || { t: 0, sub: 0, name: "tokens" };
}

/** The index of time step t's frame named name (−1 if there is none). */
export function frameIndex(t, name) {
  return S.frames.findIndex((f) => f.t === t && f.name === name);
}

/** How many decoder positions exist at this frame (0 in the encoder phase). */
export function visibleDecoder(frame) {
  return frame.t;
}

/** The keys of the rows this frame lights. */
export function activeBlocks(frame) {
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
