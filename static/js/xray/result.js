/* The translation, above the player (issue 26, item 5). Beam search with 4 beams scored higher
   than greedy decoding on the held-out test sets, so it is the translation shown first; the
   player below steps through greedy decoding by default (the simplest to follow), and its
   translation is the second line, marked when it is the same. When the player runs beam 4
   itself, the second line is greedy decoding's. Both come in the one view (``alternative``,
   app/pages/xray.py), so a saved x-ray shows them too; a file saved before carries only the
   player's. Text only through textContent.

   How sure the model was (issue 56, item 6), from its own numbers, on both lines: each step's
   probability for the character it wrote (temperature 1; the player's from its steps, the other
   decoding's from ``alternative.probs``, absent from files saved before). A character below
   even odds is underlined, its probability in its title and in words for a screen reader; a
   line gets a plain warning when the model itself expects some of its characters to be wrong
   (the sum of 1 − p) or when its characters are unlikely on the whole (their geometric mean),
   or when the model could not read part of the sentence (<unk> pieces). Thresholds set on the
   shipped model (26 sentences, greedy and beam 4): good translations expect 0.4–1.6 changed
   characters with a geometric mean of 0.70–0.95; a clause dropped or scrambled, 2.3–5.3; an
   out-of-domain or invented one, a mean of 0.26–0.54. */

import { S } from "./state.js";
import { $, el, t } from "./dom.js";

/** The player's decoding in words: its strategy, its beam size, whether a prefix was forced. */
export function playerLabel(req) {
  const strategy = req.strategy || "greedy";
  const size = Number(req.beam_size ?? 4);
  const label = strategy === "beam" ? t("xray.result.beam", { n: size })
    : t(strategy === "sample" ? "xray.result.sample" : "xray.result.greedy");
  return req.forced_prefix && req.forced_prefix.length ? t("xray.result.forced", { label }) : label;
}

const UNSURE_PROB = 0.5; // a character marked: the other characters had more, together
const EXPECTED_WRONG = 2; // Σ(1 − p): how many characters the model expects to differ
const FAR_MEAN_PROB = 0.6; // the geometric mean of p: below it, far from what the model knows
const SPECIAL = new Set(["<pad>", "<bos>", "<eos>", "<unk>"]); // never written as characters

const percent = (p) => `${Math.round(p * 100)}%`;

/** How sure the model was of one decoding: ``steps`` are { token, prob, forced } (a forced
    character was the learner's choice, not the model's, so it counts for nothing); ``unknown``
    the source pieces it could not read. null without probabilities (a file saved before). */
export function confidence(steps, unknown) {
  if (!steps || !steps.length || steps.some((step) => typeof step.prob !== "number")) return null;
  const chosen = steps.filter((step) => !step.forced);
  const expected = chosen.reduce((sum, step) => sum + (1 - step.prob), 0);
  const meanLog = chosen.reduce((sum, step) => sum + Math.log(Math.max(step.prob, 1e-30)), 0);
  const mean = chosen.length ? Math.exp(meanLog / chosen.length) : 1;
  const level = mean < FAR_MEAN_PROB || unknown > 0 ? "far"
    : expected >= EXPECTED_WRONG ? "unsure" : "sure";
  return { expected, mean, steps: chosen.length, unknown, level };
}

/** The translation's characters, each below even odds marked with its probability; plain text
    when the steps do not line up with the characters (for our model they always do: one step per
    character, the special tokens written as nothing; a Marian model's pieces seldom do, and its
    line then stays plain). */
function characters(translation, steps) {
  const chars = [...translation];
  const written = [];
  for (const step of steps || []) {
    if (step.token === "<eos>") break;
    if (!SPECIAL.has(step.token)) written.push(step);
  }
  if (!steps || written.length !== chars.length || typeof written[0]?.prob !== "number") {
    return [document.createTextNode(translation)];
  }
  return chars.map((char, i) => {
    const p = written[i].prob;
    if (p >= UNSURE_PROB) return document.createTextNode(char);
    const mark = el("mark", char, "xr-unsure");
    mark.title = t("xray.confidence.prob", { p: percent(p) });
    mark.dataset.prob = percent(p);
    return mark;
  });
}

/** The marked characters in words, after the line, for a screen reader (a title is not read). */
function saidUnsure(text) {
  const marks = [...text.querySelectorAll("mark.xr-unsure")];
  if (!marks.length) return null;
  const list = marks.map((mark) => `${mark.textContent} ${mark.dataset.prob}`);
  const said = el("span", t("xray.confidence.said", { list: list.join(", ") }), "visually-hidden");
  said.lang = document.documentElement.lang;
  return said;
}

/** One line: what decoding made it, whether the player steps through it, the Chinese with its
    unsure characters marked. */
function line(label, translation, finished, steps, { player = false, first = false, same = false } = {}) {
  const row = el("p", null, first ? "xr-result-line xr-result-first" : "xr-result-line");
  row.dataset.role = player ? "player" : "other";
  const name = player ? el("span", t("xray.result.player", { label }), "xr-result-label xr-result-player")
    : el("span", label, "xr-result-label");
  const text = el("span", null, "xr-result-text");
  text.lang = "zh-CN";
  text.append(...characters(translation, steps));
  if (!finished) text.append("…");
  row.append(name, text);
  const said = saidUnsure(text);
  if (said) row.append(" ", said);
  if (!finished) row.append(" ", el("span", t("xray.result.cut"), "xr-result-note"));
  if (same) row.append(" ", el("span", t("xray.result.same"), "xr-result-note"));
  return row;
}

/** The warning under a line the model was unsure of, in plain words with its own figures. */
function warning(judged) {
  const box = el("div", null, "xr-result-warning"); // the lines are the box's <p>s
  box.dataset.level = judged.level;
  const parts = [];
  if (judged.level === "far") {
    parts.push(t("xray.confidence.far", { p: percent(judged.mean) }));
    if (judged.unknown) parts.push(t("xray.confidence.unknown", { n: judged.unknown }));
  } else {
    parts.push(t("xray.confidence.unsure", { n: judged.expected.toFixed(1), total: judged.steps }));
  }
  const gap = document.documentElement.lang.startsWith("zh") ? "" : " "; // Chinese runs on
  box.append(el("strong", t("xray.confidence.title")), gap, parts.join(gap));
  return box;
}

/** Draw the box for the trace on screen and the view's ``alternative`` (null in older files). */
export function drawResult() {
  const box = $("xr-result");
  const lines = $("xr-result-lines");
  if (!S.trace || !S.req) { box.hidden = true; return; }
  const unknown = (S.trace.source_tokens || []).filter((token) => token === "<unk>").length;
  const mine = { label: playerLabel(S.req), text: S.trace.translation, finished: S.trace.finished,
    steps: S.trace.steps };
  const other = S.alternative;
  const shown = []; // [line, its steps, whether it repeats the line above]
  if (!other) {
    shown.push([line(mine.label, mine.text, mine.finished, mine.steps, { player: true, first: true }), mine.steps]);
  } else {
    const otherLabel = other.strategy === "beam" ? t("xray.result.beam", { n: other.beam_size })
      : t("xray.result.greedy");
    const otherSteps = Array.isArray(other.probs) && Array.isArray(other.tokens)
      ? other.tokens.map((token, i) => ({ token, prob: other.probs[i], forced: false })) : null;
    const same = other.translation === mine.text && other.finished === mine.finished;
    if (other.strategy === "beam") { // beam 4 first, the player's second
      shown.push([line(otherLabel, other.translation, other.finished, otherSteps, { first: true }), otherSteps]);
      shown.push([line(mine.label, mine.text, mine.finished, mine.steps, { player: true, same }), mine.steps, same]);
    } else { // the player runs beam 4: it is first, greedy second
      shown.push([line(mine.label, mine.text, mine.finished, mine.steps, { player: true, first: true }), mine.steps]);
      shown.push([line(otherLabel, other.translation, other.finished, otherSteps, { same }), otherSteps, same]);
    }
  }
  const rows = [];
  let marked = false;
  for (const [row, steps, repeats] of shown) {
    const judged = confidence(steps, unknown);
    row.dataset.confidence = judged ? judged.level : "unknown";
    if (judged) row.dataset.expected = judged.expected.toFixed(2);
    rows.push(row);
    // the same characters with the same probabilities: one warning says it for both
    if (judged && judged.level !== "sure" && !repeats) rows.push(warning(judged));
    marked = marked || row.querySelector(".xr-unsure") !== null;
  }
  if (marked) rows.push(el("div", t("xray.confidence.legend", { p: percent(UNSURE_PROB) }), "xr-result-note xr-result-legend"));
  lines.replaceChildren(...rows);
  box.hidden = false;
}
