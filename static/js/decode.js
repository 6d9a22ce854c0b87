/* Step-through decoding: seven views inside one decoder layer per time step; click a candidate
   to force it (forced_prefix = tokens so far + candidate) and decode on from there. */
"use strict";

(() => {
  const UNFORCEABLE = ["<pad>", "<bos>"]; // never a valid next token, so they cannot be forced
  let data = null;
  let step = 0;

  function layerFromURL() {
    const raw = ITT.params().get("layer");
    const fallback = ITT.pageData.config.n_decoder_layers - 1;
    const layer = raw === null ? fallback : Number.parseInt(raw, 10);
    return Number.isInteger(layer) && layer >= 0 ? layer : fallback;
  }

  function fixed(value, digits) {
    return Number(value).toFixed(digits);
  }

  /** In sampling mode: the chosen character's probability under the model and in the
      distribution it was actually drawn from (both from the step's recorded candidates). */
  function drawSampleNote(current) {
    const note = document.getElementById("sample-note");
    note.hidden = data.options.strategy !== "sample" || current.forced;
    if (note.hidden) return;
    const [model, drawn] = current.figures.softmax.data;
    const index = model.customdata.indexOf(current.token);
    note.textContent = index < 0 || !drawn
      ? ITT.t("decode.sample_outside", { p: fixed(current.prob, 4) })
      : ITT.t("decode.sample_now", { p: fixed(current.prob, 4), q: fixed(drawn.x[index], 4) });
  }

  /** Switch off the fields the chosen strategy ignores (a disabled field is not submitted). */
  function syncFields() {
    const form = document.getElementById("strategy-form");
    const strategy = form.querySelector('input[name="strategy"]:checked').value;
    form.querySelectorAll("label[data-strategy]").forEach((label) => {
      const off = label.dataset.strategy !== strategy;
      label.querySelector("input").disabled = off;
      if (off) label.title = ITT.t("decode.unused");
      else label.removeAttribute("title");
    });
  }

  function drawStep() {
    const steps = data.steps;
    const total = steps.length;
    step = Math.min(Math.max(step, 0), Math.max(total - 1, 0));
    const slider = document.getElementById("step-slider");
    slider.max = Math.max(total - 1, 0);
    slider.value = step;
    document.getElementById("prev-step").disabled = step <= 0;
    document.getElementById("next-step").disabled = step >= total - 1;
    document.getElementById("translation").textContent = ITT.t("decode.translation", { text: data.translation || "∅" });
    if (!total) return;
    const current = steps[step];
    document.getElementById("step-title").textContent = ITT.t("decode.step_of", { n: step + 1, total });
    ITT.chips(document.getElementById("prefix"), current.prefix);
    document.getElementById("chosen").textContent =
      ITT.t("decode.chose", { token: current.token, prob: fixed(current.prob, 4) })
      + (current.forced ? ` ${ITT.t("decode.forced")}` : "");
    // the boxes are the step's figures and numbers, by the names the answer gives them (the
    // layer's sublayers and Add & Norms; a box no step of this answer draws stays hidden)
    for (const box of new Set(steps.flatMap((s) => Object.keys(s.figures)))) {
      const figure = current.figures[box];
      const node = document.getElementById(`fig-${box}`);
      if (!node) continue;
      node.hidden = !figure;
      if (figure) ITT.plot(node, figure);
    }
    const numbers = current.numbers;
    const addNorms = Object.entries(numbers).filter(([, n]) => n && "residual_norm" in n);
    for (const [key, n] of addNorms) {
      const node = document.getElementById(`num-${key}`);
      if (!node) continue;
      node.textContent = `${ITT.t("num.residual", {
        a: fixed(n.residual_norm, 2), b: fixed(n.sublayer_norm, 2),
      })}; ${ITT.t("num.norm", {
        m1: fixed(n.sum_mean, 3), s1: fixed(n.sum_std, 3), m2: fixed(n.normed_mean, 3),
        s2: fixed(n.normed_std, 3),
      })}`;
    }
    const ffn = Object.values(numbers).find((n) => n && "active_share" in n);
    document.getElementById("num-ffn").textContent = ITT.t("num.ffn", {
      share: fixed(ffn.active_share * 100, 1), d: ffn.d_ff,
    });
    document.getElementById("num-ffn-out").textContent = ffn.input_norm === null ? ""
      : ITT.t("num.ffn_out", { a: fixed(ffn.input_norm, 2), b: fixed(ffn.output_norm, 2) });
    document.getElementById("num-entropy").textContent = ITT.t("num.entropy", { h: fixed(current.entropy, 3) });
    drawCandidates(current);
    drawWhy().catch((error) => ITT.showError(error.message));
  }

  // -- Why this token? The logit lens and source attributions, fetched per step when open --------
  let whyShown = "";
  let whyPending = "";
  let whyRequests = 0;

  function igStepsFromURL() {
    const raw = Number.parseInt(ITT.params().get("ig_steps") || "64", 10);
    return Number.isInteger(raw) && raw >= 2 && raw <= 256 ? raw : 64;
  }

  async function drawWhy() {
    if (!document.getElementById("why").open || !data || !data.steps.length) return;
    const body = ITT.requestFromURL({ step, ig_steps: igStepsFromURL() });
    const key = JSON.stringify(body);
    if (key === whyShown || key === whyPending) return;
    whyPending = key;
    const ticket = ++whyRequests;
    let why;
    try {
      why = await ITT.api("/api/figures/interpret", body);
    } finally {
      if (whyPending === key) whyPending = "";
    }
    if (ticket !== whyRequests) return; // the reader moved on while this one was computed
    whyShown = key;
    ITT.plot(document.getElementById("fig-lens"), why.figures.lens);
    ITT.plot(document.getElementById("fig-attribution"), why.figures.attribution);
    ITT.plot(document.getElementById("fig-lens-steps"), why.figures.lens_steps);
    const lens = why.lens;
    document.getElementById("lens-note").textContent = lens.first_top_layer === null
      ? ITT.t("why.never_top", { token: lens.token })
      : ITT.t("why.first_top", { token: lens.token, layer: lens.first_top_layer + 1, layers: why.layers });
    const a = why.attribution;
    const strongest = why.strongest;
    document.getElementById("attr-note").textContent = ITT.t("why.strongest", {
      gxi: a.source_tokens[strongest.gradient_x_input],
      ig: a.source_tokens[strongest.integrated_gradients],
      att: a.source_tokens[strongest.cross_attention[strongest.cross_attention.length - 1]],
    });
    const sum = a.integrated_gradients.reduce((total, value) => total + value, 0);
    document.getElementById("complete-note").textContent = ITT.t("why.complete", {
      sum: fixed(sum, 3), base: fixed(a.baseline_log_prob, 3), real: fixed(a.log_prob, 3),
      diff: fixed(a.log_prob - a.baseline_log_prob, 3), gap: fixed(a.completeness_gap, 3), n: a.ig_steps,
    });
  }

  function drawCandidates(current) {
    drawSampleNote(current);
    const list = document.getElementById("candidates");
    const items = current.figures.softmax.data[0].customdata.map((token, index) => {
      const item = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.className = token === current.token ? "candidate chosen" : "candidate";
      button.dataset.token = token;
      const p = fixed(current.figures.softmax.data[0].x[index], 4);
      // the name starts with what the button shows ("猫 0.9432"), so saying it reaches it
      button.setAttribute("aria-label", ITT.t("decode.force", { token, p }));
      button.append(ITT.element("span", token, "token"), " ", ITT.element("span", p, "prob"));
      if (UNFORCEABLE.includes(token)) button.disabled = true;
      button.addEventListener("click", () => force(token));
      item.appendChild(button);
      return item;
    });
    list.replaceChildren(...items);
  }

  /** The lineage tree, why the search stopped where it did, and the ended hypotheses ranked. */
  function drawBeam(beam) {
    const lineage = beam.lineage;
    // room for each step's "character score" labels; a phone scrolls the tree, not the page
    document.getElementById("beam-tree").style.minWidth = `${Math.max(320, 72 * (lineage.last_step + 1))}px`;
    ITT.plot(document.getElementById("beam-tree"), beam);
    const k = lineage.beam_size;
    const open = lineage.status.filter((s) => s === "open").length;
    const last = lineage.last_step;
    let stop = lineage.winner_step < last
      ? ITT.t("beam.stop_later", { k, w: lineage.winner_step, last })
      : ITT.t("beam.stop_here", { k, last });
    if (open) stop += ` ${ITT.t("beam.open_note", { n: open, last })}`;
    if (!data.finished) stop += ` ${ITT.t("beam.no_end")}`;
    document.getElementById("beam-stop").textContent = stop;
    document.getElementById("beam-ended-help").textContent = ITT.t("beam.ended_help", { alpha: lineage.alpha });
    const head = ["rank", "tokens", "length", "log_p", "penalty", "score"].map((c) => ITT.t(`beam.col.${c}`));
    head.push("");
    const rows = lineage.hypotheses.map((h, index) => [
      String(index + 1), h.tokens.join(""), String(h.length), fixed(h.log_prob, 4),
      fixed(h.penalty, 4), fixed(h.score, 4), h.winner ? ITT.t("beam.chosen") : "",
    ]);
    const table = document.getElementById("beam-ended");
    ITT.table(table, head, rows, true);
    table.querySelectorAll("tbody tr").forEach((tr, index) => {
      if (lineage.hypotheses[index].winner) tr.classList.add("winner");
    });
  }

  /** A chart with one category per sublayer; on a phone its labels stand upright and smaller. */
  function plotSublayers(node, figure) {
    if (node.clientWidth >= 600) return ITT.plot(node, figure);
    const xaxis = Object.assign({}, figure.layout.xaxis, { tickangle: -90, tickfont: { size: 9 } });
    return ITT.plot(node, { data: figure.data, layout: Object.assign({}, figure.layout, { xaxis }) });
  }

  /** Residual stream vs sublayer output for every sublayer, and the encoder's FFNs. */
  function drawResidual() {
    plotSublayers(document.getElementById("fig-residual"), data.figures.residual);
    ITT.plot(document.getElementById("fig-encoder_ffn"), data.figures.encoder_ffn);
    plotSublayers(document.getElementById("fig-gradients"), data.figures.gradients);
    const grads = data.gradients;
    document.getElementById("gradient-summary").textContent = grads.length ? ITT.t("res.grad_summary", {
      first: fixed(grads[0].at_input, 3), last: fixed(grads[grads.length - 1].at_input, 3), m: grads.length,
      k: grads.filter((g) => g.shortcut > g.through_sublayer).length,
    }) : "";
    const labels = data.figures.residual.data[0].x;
    const ratios = data.residual.map((row) => row.ratio);
    const low = ratios.indexOf(Math.min(...ratios));
    const high = ratios.indexOf(Math.max(...ratios));
    document.getElementById("residual-summary").textContent = ITT.t("res.summary", {
      min_name: labels[low], min: fixed(ratios[low], 2), max_name: labels[high], max: fixed(ratios[high], 2),
    });
  }

  function goTo(next) {
    if (!data || !data.steps.length) return;
    step = Math.min(Math.max(next, 0), data.steps.length - 1);
    const query = ITT.params();
    query.set("step", step);
    ITT.setURL(query, false);
    drawStep();
  }

  /** Keep the tokens before this step, put ``token`` here, and decode again from there. */
  function force(token) {
    const prefix = data.steps.slice(0, step).map((s) => s.token);
    const query = ITT.params();
    query.delete("forced");
    for (const t of [...prefix, token]) query.append("forced", t);
    query.set("step", step);
    ITT.setURL(query, true);
    // keep a keyboard user where they were: one Tab reaches the new step's first candidate
    load().then(() => document.getElementById("candidates").focus())
      .catch((error) => ITT.showError(error.message));
  }

  const DEFAULTS = { temperature: "1.0", top_k: "", top_p: "", seed: "0", max_len: "128", beam_size: "4" };

  /** Show the URL's settings in the form (also after the back button). */
  function syncForm(query) {
    const form = document.getElementById("strategy-form");
    const strategy = query.get("strategy") || "greedy";
    form.querySelectorAll('input[name="strategy"]').forEach((radio) => {
      radio.checked = radio.value === strategy;
    });
    for (const [name, fallback] of Object.entries(DEFAULTS)) {
      form.elements.namedItem(name).value = query.has(name) ? query.get(name) : fallback;
    }
    syncFields();
  }

  async function load() {
    ITT.clearError();
    const query = ITT.params();
    syncForm(query);
    const layer = layerFromURL();
    document.getElementById("layer-select").value = String(layer);
    document.getElementById("reset-forced").hidden = query.getAll("forced").length === 0;
    document.getElementById("why").open = query.get("why") === "1";
    document.getElementById("ig-steps").value = String(igStepsFromURL());
    data = await ITT.api("/api/figures/decode", ITT.requestFromURL({ layer }));
    step = Number.parseInt(query.get("step") || "0", 10) || 0;
    const beam = document.getElementById("beam");
    beam.hidden = !data.beam;
    if (data.beam) drawBeam(data.beam);
    drawResidual();
    drawStep();
    await drawForcedCompare(query);
  }

  /** With a forced prefix: the translation without it beside the one with it, and where they
      part (the same before/after as the x-ray's forcing). */
  async function drawForcedCompare(query) {
    const box = document.getElementById("forced-compare");
    const forced = query.getAll("forced");
    box.hidden = forced.length === 0;
    if (!forced.length) return;
    const body = ITT.requestFromURL();
    delete body.forced_prefix;
    const original = (await ITT.api("/api/translate", body)).steps.map((s) => s.token);
    const now = data.steps.map((s) => s.token);
    let part = 0;
    while (part < original.length && part < now.length && original[part] === now[part]) part++;
    const chips = (id, tokens) => document.getElementById(id).replaceChildren(...tokens.map((token, i) =>
      ITT.element("li", token, i === part ? "diff" : (i > part ? "after" : null))));
    chips("compare-original", original);
    chips("compare-forced", now);
    document.getElementById("compare-part").textContent = part < Math.max(original.length, now.length)
      ? ITT.t("decode.compare_part", { t: part + 1, a: original[part] ?? "∅", b: now[part] ?? "∅" })
      : ITT.t("decode.compare_same");
  }

  document.getElementById("prev-step").addEventListener("click", () => goTo(step - 1));
  document.getElementById("next-step").addEventListener("click", () => goTo(step + 1));
  document.getElementById("step-slider").addEventListener("input", (event) => goTo(Number(event.target.value)));
  document.addEventListener("keydown", (event) => {
    // Typing in a field or moving the slider (which handles its own arrow keys) is not stepping.
    const tag = (event.target.tagName || "").toLowerCase();
    if (["input", "select", "textarea"].includes(tag)) return;
    if (event.key === "ArrowLeft") { goTo(step - 1); event.preventDefault(); }
    if (event.key === "ArrowRight") { goTo(step + 1); event.preventDefault(); }
    if (event.key === "Home") { goTo(0); event.preventDefault(); }
    if (event.key === "End" && data) { goTo(data.steps.length - 1); event.preventDefault(); }
  });
  document.getElementById("strategy-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const form = new FormData(event.target);
    const query = new URLSearchParams();
    query.set("text", ITT.params().get("text") || ITT.pageData.default_text);
    for (const [name, value] of form.entries()) {
      if (name !== "text" && value !== "") query.set(name, value);
    }
    for (const name of ["why", "ig_steps"]) { // the "why" panel stays as it was
      if (ITT.params().has(name)) query.set(name, ITT.params().get(name));
    }
    ITT.setURL(query, true);
    load().catch((error) => ITT.showError(error.message));
  });
  document.getElementById("layer-select").addEventListener("change", (event) => {
    const query = ITT.params();
    query.set("layer", event.target.value);
    ITT.setURL(query, false);
    load().catch((error) => ITT.showError(error.message));
  });
  document.getElementById("why").addEventListener("toggle", (event) => {
    const query = ITT.params();
    if ((query.get("why") === "1") !== event.target.open) {
      if (event.target.open) query.set("why", "1");
      else query.delete("why");
      ITT.setURL(query, false);
    }
    drawWhy().catch((error) => ITT.showError(error.message));
  });
  document.getElementById("ig-steps").addEventListener("change", (event) => {
    const value = Number.parseInt(event.target.value, 10);
    if (!Number.isInteger(value) || value < 2 || value > 256) return;
    const query = ITT.params();
    query.set("ig_steps", value);
    ITT.setURL(query, false);
    drawWhy().catch((error) => ITT.showError(error.message));
  });
  document.getElementById("reset-forced").addEventListener("click", () => {
    const query = ITT.params();
    query.delete("forced");
    query.delete("step");
    ITT.setURL(query, true);
    load().catch((error) => ITT.showError(error.message));
  });
  document.querySelectorAll('#strategy-form input[name="strategy"]').forEach((radio) => {
    radio.addEventListener("change", () => {
      syncFields();
      if (radio.value === "sample") document.getElementById("sampling-help").open = true;
    });
  });
  ITT.start(load);
})();
