/* The translation, above the player (issue 75, item 1: one translation). The decoding the learner
   chose (greedy by default, the documents' worked example) makes *the* translation: the one line
   here, labelled with that decoding, the one the player steps through, the narration and the
   marks read, the one a saved file holds. The other decoding (beam search with 4 beams, or greedy
   when the player runs beam 4) appears only when asked for, below it, labelled as a comparison
   ("beam search would say …"): POST /api/xray/compare, once per trace (a file saved before
   issue 75 carries it in its view as ``alternative``, shown the same way when asked for). With beam
   search on screen, its tree is a click away. Text only through textContent.

   How sure the model was (issue 56, item 6), from its own numbers: each step's probability for
   the character it wrote (temperature 1; the player's from its steps, the comparison's from its
   ``probs``, absent from files saved before). A character below even odds is underlined, its
   probability in its title and in words for a screen reader. The translation gets a plain warning
   when the model itself expects some of its characters to be wrong (the sum of 1 − p) or when its
   characters are unlikely on the whole (their geometric mean), or when the model could not read
   part of the sentence (<unk> pieces). The two thresholds are not set here (issue 75, item 6):
   bench/warning_calibration.py chooses them on held-out pairs with references, and the page
   brings them with what a warning means in measured terms (app/translation_warning.py, in
   #xr-warning-rule): how many warned translations were poor, how often it warns. Weights the
   calibration did not measure get no verdict, only the numbers and a line saying so. The
   comparison's line is marked the same way; the warning is the translation's only. */

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

/** The warning's thresholds and their measured meaning, from the page (app/translation_warning.py
    page_rule): { calibrated, expected_at, mean_below, pairs, bad_below, warned, warned_bad,
    precision, recall, warn_rate, quiet_bad_share }, or { calibrated: false }. */
function readRule() {
  const node = document.getElementById("xr-warning-rule");
  try {
    return node ? JSON.parse(node.textContent) : { calibrated: false };
  } catch {
    return { calibrated: false };
  }
}
const RULE = readRule();
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
  const level = !RULE.calibrated ? "unjudged"
    : mean < RULE.mean_below || unknown > 0 ? "far"
      : RULE.expected_at != null && expected >= RULE.expected_at ? "unsure" : "sure";
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
    unsure characters marked. ``comparison``: the other decoding's, asked for. */
function line(label, translation, finished, steps, { comparison = false, same = false } = {}) {
  const row = el("p", null, comparison ? "xr-result-line xr-result-comparison" : "xr-result-line xr-result-first");
  row.dataset.role = comparison ? "comparison" : "player";
  const name = comparison ? el("span", label, "xr-result-label")
    : el("span", t("xray.result.player", { label }), "xr-result-label xr-result-player");
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

/** What a warning means, measured (the calibration's figures, RULE): of the held-out sentences
    it warned on, how many in 10 were poor, and how often it warned; ``quiet``: the line under a
    translation it does not warn on, how many in 10 of those were poor all the same. */
function meaning(quiet) {
  const figures = {
    pairs: Number(RULE.pairs).toLocaleString(document.documentElement.lang), cut: RULE.bad_below, rate: percent(RULE.warn_rate),
    hits: Math.round(RULE.precision * 10), quiet: Math.round(RULE.quiet_bad_share * 10),
  };
  const note = el("div", t(quiet ? "xray.warning.quiet" : "xray.warning.meaning", figures),
    "xr-warning-meaning");
  note.id = "xr-warning-meaning";
  return note;
}

/** The warning under the translation when the model was unsure of it, in plain words with its
    own figures and what such a warning has meant; without a calibration for these weights, the
    figures and a line saying they are not judged. */
function warning(judged) {
  const box = el("div", null, "xr-result-warning"); // the lines are the box's <p>s
  box.dataset.level = judged.level;
  const gap = document.documentElement.lang.startsWith("zh") ? "" : " "; // Chinese runs on
  if (judged.level === "unjudged") {
    box.classList.add("xr-result-unjudged");
    box.append(el("strong", t("xray.warning.unjudged_title")), gap,
      t("xray.warning.unjudged", { n: judged.expected.toFixed(1), total: judged.steps, p: percent(judged.mean) }));
    return box;
  }
  const parts = [];
  if (judged.level === "far") {
    parts.push(t("xray.confidence.far", { p: percent(judged.mean) }));
    if (judged.unknown) parts.push(t("xray.confidence.unknown", { n: judged.unknown }));
  } else {
    parts.push(t("xray.confidence.unsure", { n: judged.expected.toFixed(1), total: judged.steps }));
  }
  box.append(el("strong", t("xray.confidence.title")), gap, parts.join(gap), meaning(false));
  return box;
}

/** Which decoding the comparison is: beam search with 4 beams, or greedy when the player runs
    exactly that (app/pages/xray.py alternative_options). */
function comparedStrategy(req) {
  const beam4 = req.strategy === "beam" && Number(req.beam_size ?? 4) === 4
    && !(req.forced_prefix && req.forced_prefix.length);
  return beam4 ? "greedy" : "beam";
}

let shownFor = null; // the trace whose comparison the learner asked to see
let asked = null; // { trace, promise } of the pending /api/xray/compare request

/** The other decoding of the trace on screen: the file's own (``alternative``), else asked once. */
function comparison() {
  if (S.alternative) return Promise.resolve(S.alternative);
  const trace = S.trace;
  if (!asked || asked.trace !== trace) {
    asked = { trace, promise: ITT.api("/api/xray/compare", S.req).then((answer) => {
      if (S.trace === trace) S.alternative = answer;
      return answer;
    }).finally(() => { if (asked && asked.trace === trace) asked = null; }) };
  }
  return asked.promise;
}

/** Show or hide the comparison (the button's click). */
async function toggleComparison() {
  const trace = S.trace;
  if (shownFor === trace) { shownFor = null; drawResult(); return; }
  const button = $("xr-compare-button");
  if (button) button.disabled = true;
  try {
    await comparison();
    if (S.trace !== trace) return;
    shownFor = trace;
  } catch (error) {
    ITT.showError(error.message);
  } finally {
    if (button) button.disabled = false;
  }
  drawResult();
}

/** The other decoding's translation, for a caller that needs it (the chapter on decoding): asks
    for it, which is the learner asking. Resolves to { strategy, translation } or null. */
export async function comparedTranslation() {
  try {
    return await comparison();
  } catch {
    return null;
  }
}

/** Draw the box for the trace on screen: its translation, and the comparison when asked for. */
export function drawResult() {
  const box = $("xr-result");
  const lines = $("xr-result-lines");
  if (!S.trace || !S.req) { box.hidden = true; return; }
  const unknown = (S.trace.source_tokens || []).filter((token) => token === "<unk>").length;
  const mine = { label: playerLabel(S.req), text: S.trace.translation, finished: S.trace.finished,
    steps: S.trace.steps };
  const rows = [];
  const main = line(mine.label, mine.text, mine.finished, mine.steps);
  const judged = confidence(mine.steps, unknown);
  main.dataset.confidence = judged ? judged.level : "unknown";
  if (judged) main.dataset.expected = judged.expected.toFixed(2);
  rows.push(main);
  if (judged && judged.level !== "sure") rows.push(warning(judged));
  else if (judged) rows.push(meaning(true)); // what no warning has meant
  let marked = main.querySelector(".xr-unsure") !== null;
  // the other decoding: a button, and its line once asked for
  const strategy = comparedStrategy(S.req);
  const showing = shownFor === S.trace && S.alternative;
  const actions = el("span", null, "xr-result-actions");
  const button = el("button", t(showing ? "xray.result.compare_hide"
    : (strategy === "beam" ? "xray.result.compare_beam" : "xray.result.compare_greedy")), "secondary xr-compare-button");
  button.type = "button";
  button.id = "xr-compare-button";
  button.setAttribute("aria-expanded", showing ? "true" : "false");
  button.addEventListener("click", toggleComparison);
  actions.append(button);
  if ((S.trace.beam || []).length) { // beam search on screen: its tree, a click away
    const tree = el("a", t("xray.result.tree"), "xr-tree-link");
    tree.href = "#xr-beam";
    tree.id = "xr-tree-link";
    tree.addEventListener("click", (event) => {
      event.preventDefault();
      const card = $("xr-beam");
      card.scrollIntoView({ block: "start" });
      card.focus({ preventScroll: true });
    });
    actions.append(tree);
  }
  main.append(actions); // on the translation's line, where it wraps: no line of its own
  if (showing) {
    const other = S.alternative;
    const label = other.strategy === "beam" ? t("xray.result.would_beam", { n: other.beam_size ?? 4 })
      : t("xray.result.would_greedy");
    const otherSteps = Array.isArray(other.probs) && Array.isArray(other.tokens)
      ? other.tokens.map((token, i) => ({ token, prob: other.probs[i], forced: false })) : null;
    const same = other.translation === mine.text && other.finished === mine.finished;
    const row = line(label, other.translation, other.finished, otherSteps, { comparison: true, same });
    const theirs = confidence(otherSteps, unknown);
    row.dataset.confidence = theirs ? theirs.level : "unknown";
    if (theirs) row.dataset.expected = theirs.expected.toFixed(2);
    marked = marked || row.querySelector(".xr-unsure") !== null;
    rows.push(row);
  }
  if (marked) rows.push(el("div", t("xray.confidence.legend", { p: percent(UNSURE_PROB) }), "xr-result-note xr-result-legend"));
  lines.replaceChildren(...rows);
  box.hidden = false;
}
