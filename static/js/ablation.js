/* /ablation: switch parts of the model off and watch the translation change.
   State lives in the URL (besides the sentence and decoding settings every page carries):
     off=cross.1.2,enc.3,pos.enc   the parts switched off (names as model/explain/ablation.py spells them)
     mode=mean                     what a part that is off writes (zero when absent)
     step=2                        the step the importance grid shows (the whole translation when absent)
     shuffle=4                     which shuffle the word-order test uses (1 when absent)
   Three JSON routes of app/pages/ablation.py: /api/ablation (the re-translation),
   /api/ablation/importance (drawn into the grid by importance.js), /api/ablation/word-order. */
"use strict";

(() => {
  let importance = null;
  let drawn = 0; // the latest re-translation asked for: an older answer arriving late is dropped

  function offFromURL() {
    const raw = ITT.params().get("off") || "";
    return [...new Set(raw.split(",").map((part) => part.trim()).filter(Boolean))];
  }

  function modeFromURL() {
    return ITT.params().get("mode") === "mean" ? "mean" : "zero";
  }

  function stepFromURL() {
    const raw = ITT.params().get("step");
    if (raw === null || raw === "" || !importance) return null;
    const step = Number.parseInt(raw, 10);
    return Number.isInteger(step) && step >= 0 && step < importance.tokens.length ? step : null;
  }

  function shuffleFromURL() {
    const value = Number.parseInt(ITT.params().get("shuffle") || "1", 10);
    return Number.isInteger(value) && value >= 0 && value <= 9999 ? value : 1;
  }

  /** Change these URL parameters (null or an empty list removes one). */
  function setState(change, push) {
    const query = ITT.params();
    for (const [name, value] of Object.entries(change)) {
      const empty = value === null || value === "" || (Array.isArray(value) && !value.length);
      if (empty) query.delete(name);
      else query.set(name, Array.isArray(value) ? value.join(",") : String(value));
    }
    ITT.setURL(query, push);
  }

  // the kinds of parts that have heads, as the switchboard's head grid names them (enc, dec, cross:
  // model/explain/ablation.py's HEAD_KINDS)
  const HEAD_KINDS = new Set([...document.querySelectorAll("#switchboard .head-switch[data-part]")]
    .map((button) => button.dataset.part.split(".")[0]));

  /** "Cross-attention, layer 1, head 2", "positional encoding, encoder"… for a part name. */
  function partLabel(name) {
    const [kind, first, second] = name.split(".");
    if (kind === "pos") return ITT.t("ablation.part_pos", { side: ITT.t(`ablation.side_${first}`) });
    if (!HEAD_KINDS.has(kind)) { // a sublayer without heads: a feed-forward network ("encffn.2")
      return ITT.t("ablation.part_ffn", { side: ITT.t(`ablation.side_${kind.slice(0, 3)}`), layer: first });
    }
    const kindName = ITT.t(`importance.kind_${kind}`);
    if (second === undefined) return ITT.t("ablation.part_sublayer", { kind: kindName, layer: first });
    return ITT.t("importance.head_name", { kind: kindName, layer: first, head: second });
  }

  function markSwitches(off) {
    document.querySelectorAll("#switchboard [data-part]").forEach((button) => {
      const part = button.dataset.part;
      button.setAttribute("aria-pressed", off.includes(part) ? "true" : "false");
      if (button.classList.contains("head-switch")) {
        // a head whose whole sublayer is skipped is off with it
        button.classList.toggle("covered", off.includes(part.split(".").slice(0, 2).join(".")));
      }
    });
    document.querySelectorAll('input[name="mode"]').forEach((input) => {
      input.checked = input.value === modeFromURL();
    });
  }

  // -- importance ------------------------------------------------------------------------------

  async function loadImportance() {
    importance = await ITT.api("/api/ablation/importance", ITT.requestFromURL({ mode: modeFromURL() }));
    const select = document.getElementById("step-select");
    const options = [ITT.element("option", ITT.t("ablation.step_all"))];
    options[0].value = "";
    importance.tokens.forEach((token, index) => {
      const option = ITT.element("option", ITT.t("ablation.step_one", { n: index + 1, token }));
      option.value = String(index);
      options.push(option);
    });
    select.replaceChildren(...options);
    drawImportance();
    drawOriginal();
  }

  function drawImportance() {
    const step = stepFromURL();
    document.getElementById("step-select").value = step === null ? "" : String(step);
    ITTImportance.fill(importance, step);
    const carried = ITT.carriedQuery();
    const items = ITTImportance.top(importance, step).map((name) => {
      const entry = ITTImportance.entry(importance, name);
      const query = new URLSearchParams(carried);
      query.set("kind", entry.attention_kind);
      query.set("layer", entry.layer);
      query.set("head", entry.head);
      const link = ITT.element("a", ITT.t("ablation.top_link", {
        part: ITTImportance.label(entry),
        value: ITTImportance.format(ITTImportance.value(entry, step)),
      }));
      link.href = `/attention?${query}#enlarged-title`;
      const item = document.createElement("li");
      item.appendChild(link);
      return item;
    });
    document.getElementById("top-heads").replaceChildren(...items);
  }

  // -- the re-translation ----------------------------------------------------------------------

  function characters(node, tokens, from, className) {
    node.replaceChildren(...tokens.map((token, index) => {
      const span = ITT.element("span", token);
      if (from !== null && index >= from) span.className = className;
      return span;
    }));
  }

  function drawOffList(off, mode) {
    const box = document.getElementById("off-list");
    if (!off.length) {
      box.textContent = ITT.t("ablation.nothing_off");
      return;
    }
    const modeName = ITT.t(mode === "mean" ? "ablation.mode_mean" : "ablation.mode_zero");
    const list = ITT.element("span", ITT.t("ablation.off_list", { mode: modeName }));
    const chips = off.map((name) => {
      const chip = ITT.element("button", `${partLabel(name)} ×`, "chip-off");
      chip.type = "button";
      chip.dataset.remove = name;
      chip.addEventListener("click", () => toggle(name));
      return chip;
    });
    box.replaceChildren(list, ...chips);
  }

  /** Nothing is off: the original translation alone (the importance answer carries it). */
  function drawOriginal() {
    if (importance && !offFromURL().length) {
      characters(document.getElementById("original-translation"), importance.target_tokens, null);
    }
  }

  function clearResult() {
    for (const id of ["ablated-translation", "verdict", "log-prob"]) {
      document.getElementById(id).textContent = "\u00a0";
    }
    document.getElementById("new-chars").replaceChildren();
    document.getElementById("step-figure").replaceChildren();
  }

  async function loadAblation() {
    const off = offFromURL();
    const mode = modeFromURL();
    markSwitches(off);
    drawOffList(off, mode);
    const ticket = ++drawn;
    if (!off.length) {
      clearResult();
      drawOriginal();
      return;
    }
    const answer = await ITT.api("/api/ablation", ITT.requestFromURL({ off, mode }));
    if (ticket !== drawn) return;
    drawAblation(answer);
  }

  function drawAblation(answer) {
    const original = answer.original.shown; // each token as the translation writes it (，not ,)
    const ablated = answer.ablated.shown;
    const parted = answer.parted_at;
    const written = (part) => part.shown.filter((_, i) => !["<eos>", "</s>"].includes(part.tokens[i]));
    characters(document.getElementById("original-translation"), written(answer.original), parted, "parted-from");
    characters(document.getElementById("ablated-translation"), written(answer.ablated), parted, "parted-to");
    document.getElementById("verdict").textContent = answer.same
      ? ITT.t("ablation.same")
      : ITT.t("ablation.parted", {
        n: parted + 1, before: original[parted] ?? "—", after: ablated[parted] ?? "—",
      });
    const delta = answer.original.log_prob_without - answer.original.log_prob_with;
    document.getElementById("log-prob").textContent = ITT.t("ablation.log_prob", {
      with: answer.original.log_prob_with.toFixed(3),
      without: answer.original.log_prob_without.toFixed(3),
      delta: `${delta >= 0 ? "+" : "−"}${Math.abs(delta).toFixed(3)}`,
    });
    ITT.plot(document.getElementById("step-figure"), answer.figure);
    document.getElementById("new-chars").replaceChildren(...ablated.map((token, index) => {
      const item = document.createElement("li");
      item.appendChild(ITT.element("span", token, "tok"));
      item.appendChild(ITT.element("span", answer.ablated.prob[index].toFixed(3), "prob"));
      if (parted !== null && index >= parted) item.className = "parted-to";
      return item;
    }));
  }

  function toggle(part) {
    const off = offFromURL();
    const next = off.includes(part) ? off.filter((name) => name !== part) : [...off, part];
    setState({ off: next }, true);
    loadAblation().catch((error) => ITT.showError(error.message));
  }

  // -- word order ------------------------------------------------------------------------------

  async function loadOrder() {
    const body = ITT.requestFromURL({ shuffle: shuffleFromURL() });
    delete body.forced_prefix; // the test translates the sentence and its shuffle from scratch
    let answer;
    try {
      answer = await ITT.api("/api/ablation/word-order", body);
    } catch (error) {
      document.getElementById("order-verdict").textContent = error.message;
      return;
    }
    document.getElementById("order-words").textContent = answer.words.join(" ");
    document.getElementById("order-shuffled").textContent = answer.shuffled_words.join(" ");
    const gap = (value) => (value >= 0.01 ? value.toFixed(2) : value.toExponential(1));
    const settings = [answer.with_positions, answer.without_positions];
    const row = (key, read) => [ITT.t(key), ...settings.map(read)];
    ITT.table(document.getElementById("order-table"),
      [ITT.t("ablation.order_setting"), ITT.t("ablation.order_with"), ITT.t("ablation.order_without")], [
        row("ablation.order_gap", (setting) => gap(setting.max_difference)),
        row("ablation.order_relative", (setting) => gap(Math.max(...setting.relative_gap))),
        row("ablation.order_translation", (setting) => setting.translation),
        row("ablation.order_shuffled_translation", (setting) => setting.shuffled_translation),
      ], true);
    const without = answer.without_positions;
    if (!answer.shuffled) { // one word has one order: nothing to compare
      document.getElementById("order-verdict").textContent = ITT.t("ablation.too_short");
      return;
    }
    document.getElementById("order-verdict").textContent = ITT.t("ablation.order_verdict", {
      gap: gap(without.max_difference),
      size: without.typical_value.toFixed(2),
      same: ITT.t(without.same_translation ? "ablation.order_same" : "ablation.order_different"),
      gap_on: gap(answer.with_positions.max_difference),
    });
  }

  // -- wiring ----------------------------------------------------------------------------------

  async function load() {
    ITT.clearError();
    markSwitches(offFromURL());
    const order = loadOrder();
    await Promise.all([loadImportance(), loadAblation(), order]);
  }

  document.querySelectorAll("#switchboard [data-part]").forEach((button) => {
    button.addEventListener("click", () => toggle(button.dataset.part));
  });
  document.querySelectorAll('input[name="mode"]').forEach((input) => {
    input.addEventListener("change", () => {
      setState({ mode: input.value === "mean" ? "mean" : null }, true);
      Promise.all([loadImportance(), loadAblation()]).catch((error) => ITT.showError(error.message));
    });
  });
  document.getElementById("step-select").addEventListener("change", (event) => {
    setState({ step: event.target.value }, false);
    drawImportance();
  });
  document.getElementById("reset").addEventListener("click", () => {
    setState({ off: [] }, true);
    loadAblation().catch((error) => ITT.showError(error.message));
  });
  document.getElementById("shuffle").addEventListener("click", () => {
    setState({ shuffle: (shuffleFromURL() + 1) % 10000 }, false);
    loadOrder();
  });
  ITT.start(load);
})();
