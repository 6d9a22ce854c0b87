/* The what-ifs: the sampling knobs on the current step's real logits, a seeded draw, decoding the
   whole sentence with the knobs, forcing a character, and the original beside the forced run.
   The table starts from the view's rows; every logit is asked for when a knob first turns.

   The knobs and the address agree (issue 56, item 8). A new trace that is not sampled sets the
   knobs back to the model's own distribution; a sampled one keeps knobs that show its settings
   (the learner's "decode the whole sentence"), else the knobs start at the model's distribution
   too (every logit would be needed to draw its table: a link, a saved file) and a line says what
   the run on screen was sampled with. Knobs let go back at the model's distribution after
   showing the sampled run's settings take the page back to greedy decoding, so the address keeps
   no setting the knobs no longer show, forcing a character forces the decoding on screen, and
   "Original" is the translation the player showed (the comparison names its decoding). */

import { S } from "./state.js";
import { $, barCell, el, fixed, t } from "./dom.js";
import { current, frameIndex } from "./frames.js";
import { decodeLogits } from "./data.js";
import { filterDistribution, pick, seeded, softmax } from "./sampling.js";
import { playerLabel } from "./result.js";

const DIST_ROWS = 15;
// the options only sampling reads (the model's list, from the page: ITT.decoding)
const SAMPLING = ITT.decoding.reads.sample.filter((name) => !ITT.decoding.reads.greedy.includes(name));
const UNFORCEABLE = ["<pad>", "<bos>"];

/** A what-if is a new URL: push it and load it, as going back or forward in history would. */
function visit(query) {
  ITT.visit(query);
}

function samplingSettings() {
  const temperature = Number($("xr-temperature").value);
  const k = Number($("xr-topk").value);
  const p = Number($("xr-topp").value);
  return { temperature, topK: k > 0 ? k : null, topP: p < 1 ? p : null };
}

function samplingStep() {
  const frame = current();
  return Math.min(frame.t === 0 ? 0 : frame.t - 1, S.trace.steps.length - 1);
}

function atStart(settings) {
  return settings.temperature === 1 && !settings.topK && settings.topP === null;
}

/** The knobs of the request on screen: a sampled run's settings, else the model's own
    distribution (temperature 1, no top-k, no top-p); the seed a sampled run used. */
function requestKnobs(req) {
  const sampled = req.strategy === "sample";
  return {
    temperature: sampled && req.temperature !== undefined ? Number(req.temperature) : 1,
    topK: sampled && Number(req.top_k) > 0 ? Number(req.top_k) : null,
    topP: sampled && req.top_p !== undefined && Number(req.top_p) < 1 ? Number(req.top_p) : null,
    seed: sampled && req.seed !== undefined ? Number(req.seed) : null,
  };
}

const sameKnobs = (a, b) => a.temperature === b.temperature && a.topK === b.topK && a.topP === b.topP;

/** The settings a sampled request used, in words (none for another decoding). */
function samplingWords(req) {
  if (req.strategy !== "sample") return "";
  const knobs = requestKnobs(req);
  return t("xray.result.sample_settings", { temperature: fixed(knobs.temperature, 2),
    k: knobs.topK ?? 0, p: fixed(knobs.topP ?? 1, 2), seed: knobs.seed ?? 0 });
}

let knobsFor = null; // the trace the knobs were last checked against
let knobsShowRun = false; // whether the knobs showed the sampled run's settings for that trace

/** Once per trace: the knobs agree with the decoding on screen, or a line says how it differs. */
function knobsFromRequest() {
  if (knobsFor === S.trace) return;
  knobsFor = S.trace;
  const run = requestKnobs(S.req);
  knobsShowRun = S.req.strategy === "sample" && sameKnobs(samplingSettings(), run);
  if (!knobsShowRun) { // the model's own distribution: its table needs only the view's rows
    $("xr-temperature").value = "1";
    $("xr-topk").value = "0";
    $("xr-topp").value = "1";
  }
  if (run.seed !== null) $("xr-seed").value = String(run.seed);
  let note = document.getElementById("xr-sampling-run");
  if (!note) {
    note = el("p", null, "xr-sub");
    note.id = "xr-sampling-run";
    $("xr-sampling-step").after(note);
  }
  note.hidden = S.req.strategy !== "sample" || knobsShowRun;
  note.textContent = note.hidden ? "" : t("xray.result.sample_run", { settings: samplingWords(S.req) });
}

/** A knob let go: back at the model's own distribution after showing the sampled run's
    settings, the page goes back to greedy decoding. */
function knobSettled() {
  if (!S.trace || !S.req || S.req.strategy !== "sample") return;
  const settings = samplingSettings();
  if (sameKnobs(settings, requestKnobs(S.req))) { knobsShowRun = true; return; }
  if (!knobsShowRun || !atStart(settings)) return;
  const query = ITT.params();
  for (const name of ["strategy", ...SAMPLING, "forced", "frame"]) query.delete(name);
  visit(query);
}

// main.js redraws the table on every movement ("input"); a knob let go is a "change"
for (const id of ["xr-temperature", "xr-topk", "xr-topp"]) $(id).addEventListener("change", knobSettled);

/** Every logit of this sentence, asked for once per trace (the view carries only the table's
    rows at the knobs' starting values); resolves when S.xr.logits and S.xr.vocab are set. */
export function loadLogits() {
  if (!S.logits) {
    const trace = S.trace;
    S.logits = ITT.api("/api/xray/logits", S.req).then((buffer) => {
      if (S.trace === trace) Object.assign(S.xr, decodeLogits(buffer));
    }).catch((error) => {
      if (S.trace === trace) S.logits = null; // asked again at the next turn of a knob
      ITT.showError(error.message);
    });
  }
  return S.logits;
}

/** The table's numbers from every logit, for any knob settings: sampling.js on all of them. */
function fromLogits(stepIndex, settings) {
  const logits = S.xr.logits[stepIndex];
  if (!logits) return null;
  const model = softmax(logits);
  const { probs, cut } = filterDistribution(logits, settings.temperature, settings.topK, settings.topP);
  let kept = 0;
  for (let i = 0; i < probs.length; i++) if (probs[i] > 0) kept++;
  // the mass before rescaling, under the temperature-scaled distribution
  const scaled = filterDistribution(logits, settings.temperature, null, null).probs;
  let mass = 0;
  for (let i = 0; i < probs.length; i++) if (probs[i] > 0) mass += scaled[i];
  const order = Array.from(model.keys()).sort((a, b) => model[b] - model[a]).slice(0, DIST_ROWS);
  return { probs, cut, kept, mass, size: probs.length, order, token: (id) => S.xr.vocab[id],
    model: (id) => model[id], chance: (id) => probs[id] };
}

/** The same numbers at temperature 1 without top-k or top-p, from the view's rows alone: the
    15 likeliest tokens' logits, the largest logit and Σ exp(logit − max), so exp(logit − max) / sum
    is filterDistribution's probability to its last bit or so (the sum used the server's exp):
    every shown digit the same (tests/e2e/test_xray_formulas.py holds the two equal). */
function fromRows(stepIndex) {
  const rows = S.xr.sampling[stepIndex];
  if (!rows) return null;
  const p = new Map(rows.ids.map((id, i) => [id, Math.exp(rows.logits[i] - rows.max) / rows.sum]));
  const token = new Map(rows.ids.map((id, i) => [id, rows.tokens[i]]));
  return { probs: null, cut: new Map(), kept: rows.kept, mass: rows.mass, size: S.xr.vocabSize,
    order: rows.ids.slice(0, DIST_ROWS), token: (id) => token.get(id), model: (id) => p.get(id), chance: (id) => p.get(id) };
}

/** The sampling table for the current step: the model's probabilities and the knobs' ones. */
export function drawSampling() {
  knobsFromRequest();
  const stepIndex = samplingStep();
  const settings = samplingSettings();
  $("xr-temperature-out").textContent = fixed(settings.temperature, 2);
  $("xr-topk-out").textContent = settings.topK ? String(settings.topK) : "0";
  $("xr-topp-out").textContent = fixed(settings.topP ?? 1, 2);
  $("xr-sampling-step").textContent = t("xray.sampling_step", { t: stepIndex + 1 });
  if (!S.xr.logits && !atStart(settings)) {
    const trace = S.trace;
    loadLogits().then(() => { if (S.trace === trace && S.xr.logits) drawSampling(); });
    return;
  }
  const d = S.xr.logits ? fromLogits(stepIndex, settings) : fromRows(stepIndex);
  if (!d) return;
  S.sampled = d.probs ? { stepIndex, probs: d.probs, settings } : null;
  $("xr-kept").textContent = t("xray.kept", { n: d.kept, v: d.size, mass: fixed(d.mass * 100, 1) });
  const step = S.trace.steps[stepIndex];
  const body = $("xr-dist-body");
  if (body.xrFor === S.trace && body.xrStep === stepIndex) {
    // same rows (ordered by the model's own probability): update in place so the bars glide
    for (const tr of body.children) {
      const id = Number(tr.dataset.id);
      const p = d.chance(id);
      tr.dataset.new = p.toFixed(6);
      tr.classList.toggle("xr-cut", d.cut.has(id));
      const bar = tr.querySelector(".xr-new");
      bar.firstChild.style.width = `${(p * 100).toFixed(2)}%`;
      bar.lastChild.textContent = d.cut.has(id) ? t(d.cut.get(id) === "k" ? "xray.cut_k" : "xray.cut_p") : fixed(p, 4);
    }
    return;
  }
  body.xrFor = S.trace;
  body.xrStep = stepIndex;
  body.replaceChildren(...d.order.map((id) => {
    const token = d.token(id);
    const tr = el("tr");
    tr.dataset.token = token;
    tr.dataset.id = id;
    tr.dataset.model = d.model(id).toFixed(6);
    tr.dataset.new = d.chance(id).toFixed(6);
    if (d.cut.has(id)) tr.classList.add("xr-cut");
    if (token === step.token) tr.classList.add("xr-chosen");
    const tok = el("td", token, "xr-tok");
    tok.setAttribute("lang", "zh-CN");
    tr.append(tok, barCell(d.model(id), false, null), barCell(d.chance(id), true, d.cut.get(id)));
    const action = el("td");
    if (token !== step.token && !UNFORCEABLE.includes(token)) {
      const button = el("button", t("xray.force_short"), "secondary");
      button.type = "button";
      button.setAttribute("aria-label", t("xray.force", { tok: token, t: stepIndex + 1 }));
      button.addEventListener("click", () => force(stepIndex, token));
      action.append(button);
    }
    tr.append(action);
    return tr;
  }));
}

/** Draw one character from the knobs' distribution with the seed, and offer to force it. */
export async function draw() {
  if (!S.xr.logits) {
    const trace = S.trace;
    await loadLogits();
    if (S.trace !== trace || !S.xr.logits) return;
    drawSampling();
  }
  if (!S.sampled) return;
  const seed = Math.max(0, Math.min(2147483647, Number.parseInt($("xr-seed").value, 10) || 0));
  const u = seeded(seed)();
  const { probs, stepIndex } = S.sampled;
  const token = S.xr.vocab[pick(probs, u)];
  const drew = $("xr-drew");
  drew.textContent = t("xray.drew", { seed, tok: token, u: fixed(u, 4) });
  drew.hidden = false;
  const use = $("xr-use-drawn");
  const same = token === S.trace.steps[stepIndex].token;
  use.hidden = same || UNFORCEABLE.includes(token);
  use.textContent = t("xray.use_drawn", { tok: token });
  use.onclick = () => force(stepIndex, token);
}

/** Translate the whole sentence again, sampling with the knobs and the seed. */
export function decodeAll() {
  const s = samplingSettings();
  const query = ITT.params();
  query.set("strategy", "sample");
  query.set("temperature", String(s.temperature));
  if (s.topK) query.set("top_k", String(s.topK)); else query.delete("top_k");
  if (s.topP) query.set("top_p", String(s.topP)); else query.delete("top_p");
  query.set("seed", String(Math.max(0, Number.parseInt($("xr-seed").value, 10) || 0)));
  query.delete("forced");
  query.delete("frame");
  visit(query);
}

/** The URL of this sentence with the other decoding: beam search (beam 4) from greedy or sampling,
    greedy from beam search (the sentence and max length kept, no forced prefix). */
function otherDecoding() {
  const query = ITT.params();
  for (const name of ["forced", "frame", "open", ...SAMPLING]) query.delete(name);
  if (S.req.strategy === "beam") {
    query.set("strategy", "greedy");
    query.delete("beam_size");
  } else {
    query.set("strategy", "beam");
    query.set("beam_size", "4");
  }
  return query;
}

/** The held-out note's link (when the checkpoint's evaluation has both decodings): to beam search,
    or back to greedy when beam search is on screen. */
export function drawDecodingSwitch() {
  const link = document.getElementById("xr-beam-link");
  if (!link || !S.req) return;
  link.textContent = t(S.req.strategy === "beam" ? "xray.greedy_show" : "xray.beam_show");
  link.href = `${window.location.pathname}?${otherDecoding()}`;
}

export function switchDecoding(event) {
  if (!S.req) return;
  event.preventDefault();
  visit(otherDecoding());
}

/** Translate again with this step's character forced, opening at that step's output frame. */
function force(stepIndex, token) {
  const prefix = [...S.trace.target_tokens.slice(0, stepIndex), token];
  const query = ITT.params();
  query.delete("forced");
  for (const value of prefix) query.append("forced", value);
  query.set("frame", String(Math.max(frameIndex(stepIndex + 1, "logits"), 0)));
  visit(query);
}

/** The original and the forced translation side by side, from where they part. */
export function drawCompare() {
  const box = $("xr-compare");
  if (!S.original) { box.hidden = true; return; }
  box.hidden = false;
  const a = S.original.steps.map((s) => s.token);
  const b = S.trace.steps.map((s) => s.token);
  let diverge = 0;
  while (diverge < a.length && diverge < b.length && a[diverge] === b[diverge]) diverge++;
  const chips = (list, tokens) => list.replaceChildren(...tokens.map((token, i) => {
    const li = el("li", token, i === diverge ? "xr-diff" : (i > diverge ? "xr-after" : null));
    li.dataset.step = i;
    return li;
  }));
  chips($("xr-original"), a);
  chips($("xr-forced"), b);
  // the decoding both runs used: the one on screen before forcing, with its settings
  const plain = { ...S.req, forced_prefix: [] };
  $("xr-original-how").textContent = t("xray.result.original_how", {
    label: playerLabel(plain) + samplingWords(S.req) });
  $("xr-diverge").textContent = diverge < Math.max(a.length, b.length)
    ? t("xray.diverge", { t: diverge + 1, a: a[diverge] ?? "∅", b: b[diverge] ?? "∅" }) : "";
  const query = ITT.params();
  query.delete("forced");
  query.delete("frame");
  $("xr-reset").setAttribute("href", `${window.location.pathname}?${query}`);
}
