/* The x-ray's one state object. Every field is declared here; no module adds one. Modules read and
   write these fields and nothing else of each other's. */

export const S = {
  req: null, // the request body the URL describes (sentence, strategy, forced prefix …)
  view: null, // the packed /api/xray/view answer (an ArrayBuffer) everything below was decoded from
  trace: null, // /api/xray/view for that request, decoded into /api/trace's shape: tokens,
  //               attention, Add & Norm sizes, FFN shares, steps (top 5), beam nodes
  xr: null, // the rest of it: strips per stage, the sampling table's rows per step, length
  //           penalty; xr.logits and xr.vocab stay null until a knob turns (/api/xray/logits),
  //           xr.decoder.values until the player moves (/api/xray/strips)
  logits: null, // the pending /api/xray/logits request for this trace, once asked
  heads: null, // every head's attention (a packed /api/xray/heads answer, an ArrayBuffer), once
  //              asked (a head picked, an attention block opened) or read from a saved file
  headsAsked: null, // the pending /api/xray/heads request for this trace, once asked
  strips: null, // the decoder's strips (a packed /api/xray/strips answer), once the player moved
  //               past the landing frame, or read from a saved file
  stripsAsked: null, // the pending /api/xray/strips request for this trace, once asked
  original: null, // when a prefix is forced, the unforced translation's steps (for the comparison)
  alternative: null, // the sentence by the other decoding, { strategy, beam_size, translation,
  //                    finished }: beam 4, or greedy when the player runs beam 4 (result.js)
  detail: "blocks", // the timeline: "blocks" (every sub-step) or "steps" (one frame per time step)
  frames: [], // the timeline: one entry per frame, built by frames.js
  frame: 0, // index into frames of the frame on screen
  playing: false, // whether the player is advancing by itself
  timer: null, // the player's pending setTimeout
  speed: 1, // playback speed (1 = one frame per SUB_MS)
  head: "avg", // attention lines: "avg", "all" or a head number as a string
  focus: null, // { side, pos } of the token under the pointer or keyboard focus, else null
  rows: [], // the drawn rows, in page order (see rows.js for a row's fields)
  open: new Map(), // row key → { row, position, head, trace, asked, data } of each opened block
  flying: null, // the running animation of the chosen character, if any
  drawn: null, // the step whose sampling table is drawn (null: draw it again)
  sampled: null, // { stepIndex, probs, settings }: the distribution the Draw button samples
  overview: false, // whether the whole model is laid out on one screen (wide screens, zoom.js)
  zoom: null, // the layer opened in place, "e-0" … "d-2" (side letter, layer), else null
};

/** Keep the frame, head, detail and opened blocks in the URL (replacing the entry, not adding one). */
export function saveFrame() {
  const query = ITT.params();
  query.set("frame", String(S.frame));
  if (S.head !== "avg") query.set("head", S.head); else query.delete("head");
  if (S.detail !== "blocks") query.set("detail", S.detail); else query.delete("detail");
  if (S.open.size) query.set("open", [...S.open.keys()].join(",")); else query.delete("open");
  if (S.zoom) query.set("zoom", S.zoom); else query.delete("zoom");
  ITT.setURL(query, false);
}
