/* /timeline: the sentence in the box through the model as it was at a few steps of its training.
   State lives in the URL (besides the sentence every page carries):
     at=step001000     the snapshot shown (the first when absent; "shipped": the served model)
     vs=shipped        a second one beside it (none when absent)
     layer=2           the decoder layer whose cross-attention is drawn (0-based; the last when absent)
     head=1            one head of it (0-based; the mean of its heads when absent)
   Two JSON routes of app/pages/timeline.py: GET /api/timeline (the snapshots, the run, the
   curve) once, POST /api/timeline/read for each view. */
"use strict";

(() => {
  let summary = null;
  let stops = []; // [{name, label, step, ...}] in order: the run's snapshots, then the shipped model
  let drawn = 0; // the latest reading asked for: an older answer arriving late is dropped

  const $ = (id) => document.getElementById(id);

  function stopIndex(name) {
    const index = stops.findIndex((stop) => stop.name === name);
    return index >= 0 ? index : 0;
  }

  function stateFromURL() {
    const query = ITT.params();
    const at = stops[stopIndex(query.get("at"))].name;
    const vs = stops.some((stop) => stop.name === query.get("vs")) ? query.get("vs") : null;
    const layers = $("layer-select").options.length;
    const heads = $("head-select").options.length - 1;
    const layer = Number.parseInt(query.get("layer") ?? "", 10);
    const head = Number.parseInt(query.get("head") ?? "", 10);
    return {
      at,
      vs,
      layer: Number.isInteger(layer) && layer >= 0 && layer < layers ? layer : layers - 1,
      head: Number.isInteger(head) && head >= 0 && head < heads ? head : null,
    };
  }

  function setState(change, push) {
    const query = ITT.params();
    for (const [name, value] of Object.entries(change)) {
      if (value === null || value === "") query.delete(name);
      else query.set(name, String(value));
    }
    ITT.setURL(query, push);
  }

  // -- the controls ---------------------------------------------------------------------------

  function buildControls() {
    const slider = $("snapshot-slider");
    slider.max = String(stops.length - 1);
    $("stops").replaceChildren(...stops.map((stop, index) => {
      const button = ITT.element("button", stop.short, "secondary");
      button.type = "button";
      button.title = stop.label;
      button.dataset.index = String(index);
      button.addEventListener("click", () => go(index, true).catch((e) => ITT.showError(e.message)));
      return button;
    }));
    const select = $("compare-select");
    const none = select.options[0];
    select.replaceChildren(none, ...stops.map((stop) => {
      const option = ITT.element("option", stop.label);
      option.value = stop.name;
      return option;
    }));
  }

  function markControls(state) {
    const index = stopIndex(state.at);
    $("snapshot-slider").value = String(index);
    $("snapshot-slider").setAttribute("aria-valuetext", stops[index].label);
    document.querySelectorAll("#stops button").forEach((button) => {
      button.setAttribute("aria-pressed", Number(button.dataset.index) === index ? "true" : "false");
    });
    $("earlier").disabled = index === 0;
    $("later").disabled = index === stops.length - 1;
    $("compare-select").value = state.vs || "";
    $("layer-select").value = String(state.layer);
    $("head-select").value = state.head === null ? "" : String(state.head);
    $("snapshot-line").textContent = stopLine(stops[index]);
  }

  function stopLine(stop) {
    if (stop.name === "shipped") {
      const key = stop.continues_run ? "timeline.shipped_line_continued" : "timeline.shipped_line";
      return ITT.t(key, { stages: stop.stages, steps: ITT.number(stop.steps || 0) });
    }
    const parts = [ITT.t("timeline.at_line", {
      step: ITT.number(stop.step), epoch: stop.epoch ?? "0", minutes: ITT.number(stop.minutes ?? 0),
    })];
    if (stop.step === 0) parts.push(ITT.t("timeline.at_zero"));
    return parts.join(" ");
  }

  function go(index, push) {
    const stop = stops[Math.max(0, Math.min(stops.length - 1, index))];
    setState({ at: stop.name === stops[0].name ? null : stop.name }, push);
    return view();
  }

  // -- drawing --------------------------------------------------------------------------------

  function bleuText(side) {
    if (side.name === "shipped") {
      const shipped = summary.shipped;
      return shipped.dev_bleu === undefined ? "" : ITT.t("timeline.bleu_shipped", { bleu: shipped.dev_bleu });
    }
    const stop = stops[stopIndex(side.name)];
    return ITT.t("timeline.bleu_line", { bleu: stop.dev_bleu, full: stop.dev_bleu_full });
  }

  function drawSide(key, side, parted) {
    $(`label-${key}`).textContent = side.label;
    const translation = $(`translation-${key}`);
    translation.replaceChildren(...side.target_tokens.map((token, index) => {
      const span = ITT.element("span", token);
      if (parted !== null && index >= parted) span.className = key === "a" ? "parted-from" : "parted-to";
      return span;
    }));
    if (!side.target_tokens.length) translation.textContent = ITT.t("timeline.empty");
    const facts = [bleuText(side)];
    if (!side.finished) facts.push(ITT.t("timeline.unfinished", { n: side.max_len }));
    $(`facts-${key}`).textContent = facts.filter(Boolean).join(" · ");
    $(`probs-${key}`).replaceChildren(...side.labels.map((token, index) => {
      const item = document.createElement("li");
      const p = side.probs[index];
      item.append(ITT.element("span", token), ITT.element("span", p.toFixed(2), "prob"));
      item.title = `p = ${p.toFixed(4)}`;
      // the paler the chip, the less sure the model was of this character (app.css's
      // .prob-chips rule tints it with the palette's accent by --p)
      item.style.setProperty("--p", p.toFixed(3));
      if (parted !== null && index >= parted && key === "b") item.classList.add("parted-to");
      return item;
    }));
  }

  function drawParting(answer) {
    const box = $("parting");
    if (!answer.b) {
      box.hidden = true;
      return;
    }
    box.hidden = false;
    const at = answer.parted_at;
    if (at === null) {
      box.textContent = ITT.t("timeline.same");
      return;
    }
    const before = answer.a.labels[at] ?? ITT.t("timeline.nothing");
    const after = answer.b.labels[at] ?? ITT.t("timeline.nothing");
    box.textContent = ITT.t("timeline.parted", { n: at + 1, before, after });
  }

  function spreadText(side) {
    return ITT.t("timeline.spread_line", {
      label: side.label,
      values: side.spread.map((value, layer) => `${layer + 1}: ${value.toFixed(2)}`).join(" · "),
    });
  }

  function drawAttention(answer) {
    ITT.plot($("attention-a"), answer.a.figure);
    const b = $("attention-b");
    b.hidden = !answer.b;
    if (answer.b) ITT.plot(b, answer.b.figure);
    $("spread-line").replaceChildren(...[answer.a, answer.b].filter(Boolean)
      .map((side) => ITT.element("p", spreadText(side))));
    const line = $("difference-line");
    const plot = $("difference-plot");
    const difference = answer.difference;
    line.hidden = !difference;
    plot.hidden = !(difference && difference.comparable && difference.rows);
    if (!difference) return;
    if (!difference.comparable) {
      line.textContent = difference.reason;
      return;
    }
    line.textContent = ITT.t("timeline.difference_line", {
      rows: difference.rows, distance: (difference.mean_distance ?? 0).toFixed(2),
    });
    if (!plot.hidden) ITT.plot(plot, difference.figure);
  }

  function drawStored() {
    const rows = summary.snapshots.map((stop) => [
      stop.label,
      stop.regenerated ? ITT.t("timeline.regenerated") : ITT.t("timeline.int8"),
      String(stop.dev_bleu),
      String(stop.dev_bleu_full),
      ITT.t("timeline.identical", { n: stop.identical, of: summary.dev.pairs }),
    ]);
    ITT.table($("stored-table"), [
      ITT.t("timeline.col_snapshot"), ITT.t("timeline.col_stored"), ITT.t("timeline.col_bleu"),
      ITT.t("timeline.col_bleu_full"), ITT.t("timeline.col_identical"),
    ], rows, true);
    const stored = summary.snapshots.find((stop) => !stop.regenerated);
    $("stored-size").textContent = stored ? ITT.t("timeline.stored_size", { mb: (stored.bytes / 1e6).toFixed(1) }) : "";
    const run = summary.run;
    $("run-line").textContent = ITT.t(run.finished ? "timeline.run_done" : "timeline.run_partial", {
      epochs: run.epochs_done, planned: run.epochs_planned, pairs: ITT.number(run.train_pairs || 0),
      dev: summary.dev.pairs,
    });
  }

  async function view() {
    const state = stateFromURL();
    markControls(state);
    const ticket = ++drawn;
    const body = { text: ITT.text(), snapshot: state.at, layer: state.layer };
    if (state.vs) body.compare = state.vs;
    if (state.head !== null) body.head = state.head;
    const answer = await ITT.api("/api/timeline/read", body);
    if (ticket !== drawn) return;
    ITT.clearError();
    $("side-b").hidden = !answer.b;
    drawSide("a", answer.a, answer.b ? answer.parted_at : null);
    if (answer.b) drawSide("b", answer.b, answer.parted_at);
    drawParting(answer);
    drawAttention(answer);
    ITT.plot($("curve-plot"), answer.figures.curve);
    document.body.dataset.shown = `${state.at}|${state.vs || ""}|${ITT.text()}`;
  }

  async function load() {
    if (!$("snapshot-slider")) return; // nothing packed: the page says so
    if (!summary) {
      summary = await ITT.get("/api/timeline");
      stops = summary.snapshots.map((stop) => ({ ...stop, short: stop.name === "final" ? ITT.t("timeline.final_short") : ITT.number(stop.step) }));
      if (summary.shipped.available) {
        stops.push({ ...summary.shipped, short: ITT.t("timeline.shipped_short") });
      }
      buildControls();
      drawStored();
    }
    await view();
  }

  function wire() {
    if (!$("snapshot-slider")) return;
    const slider = $("snapshot-slider");
    slider.addEventListener("input", () => go(Number(slider.value), false).catch((e) => ITT.showError(e.message)));
    $("earlier").addEventListener("click", () => go(Number(slider.value) - 1, true).catch((e) => ITT.showError(e.message)));
    $("later").addEventListener("click", () => go(Number(slider.value) + 1, true).catch((e) => ITT.showError(e.message)));
    $("compare-select").addEventListener("change", (event) => {
      setState({ vs: event.target.value || null }, true);
      view().catch((e) => ITT.showError(e.message));
    });
    $("layer-select").addEventListener("change", (event) => {
      setState({ layer: event.target.value }, true);
      view().catch((e) => ITT.showError(e.message));
    });
    $("head-select").addEventListener("change", (event) => {
      setState({ head: event.target.value || null }, true);
      view().catch((e) => ITT.showError(e.message));
    });
  }

  wire();
  ITT.start(load);
})();
