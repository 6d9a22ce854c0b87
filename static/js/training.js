/* /training: teacher-forced loss and gradient of a sentence pair, the warmup schedule, the
   model's real training curves and its held-out evaluation (before/after when eval.json has it). */
"use strict";

(() => {
  const referenceInput = document.getElementById("reference");
  let historyDrawn = false;

  async function drawHistory() {
    if (historyDrawn) return;
    const data = await ITT.get("/api/training", {});
    ITT.plot(document.getElementById("schedule"), data.figures.schedule);
    ITT.plotOrNote("curves", data.figures.curves, ITT.t("training.no_history"));
    ITT.plotOrNote("epochs", data.figures.epochs, ITT.t("training.no_history"));
    ITT.plotOrNote("whole", data.figures.whole, ITT.t("training.no_history"));
    drawStages(data.stages || []);
    drawStory(data.story);
    drawEvaluation(data.evaluation);
    historyDrawn = true;
  }

  /** One line per training run since random weights (text only: labels come from history.json). */
  function drawStages(stages) {
    const list = document.getElementById("stages");
    if (!list) return;
    list.hidden = stages.length < 2;
    list.replaceChildren(...stages.map((stage) => {
      const minutes = stage.minutes === null ? "?" : stage.minutes.toLocaleString();
      const line = ITT.t("training.stage_row", { label: stage.label, minutes })
        + (stage.recorded ? "" : " " + ITT.t("training.stage_unrecorded"));
      return ITT.element("li", line);
    }));
  }

  function drawStory(story) {
    const list = document.getElementById("story");
    list.hidden = !story;
    list.replaceChildren(...(story ? story.lines : []).map((line) => ITT.element("li", line)));
  }

  /** A score as the tables show it: two decimals, a sign on changes, "—" when missing. */
  function score(value, signed) {
    if (value === null || value === undefined) return "—";
    const text = Math.abs(value).toFixed(2);
    if (value < 0) return "−" + text;
    return signed && value > 0 ? "+" + text : text;
  }

  /** A table of {head, rows}: the first cell of a row is its header; numbers get two decimals; a
      cell {value, signed, before, better} also shows its earlier value and is coloured green
      (better) or red (worse). */
  function scoreTable(node, table, grouped) {
    const thead = document.createElement("thead");
    const top = document.createElement("tr");
    table.head.forEach((cell) => top.appendChild(ITT.element("th", cell)));
    thead.appendChild(top);
    const tbody = document.createElement("tbody");
    let group = null;
    table.rows.forEach((row) => {
      const tr = document.createElement("tr");
      row.forEach((cell, index) => {
        if (index === 0) {
          // grouped: "BLEU · greedy", "BLEU · beam 4" become a "BLEU" row over "greedy", "beam 4"
          const [metric, decoding] = grouped ? cell.split(" · ") : [cell];
          if (decoding !== undefined && metric !== group) {
            group = metric;
            const heading = document.createElement("tr");
            const th = ITT.element("th", null);
            th.appendChild(ITT.element("strong", metric));
            th.colSpan = row.length;
            th.setAttribute("scope", "rowgroup");
            heading.appendChild(th);
            tbody.appendChild(heading);
          }
          const th = ITT.element("th", decoding === undefined ? cell : decoding);
          th.setAttribute("scope", "row");
          th.style.whiteSpace = "nowrap";
          if (decoding !== undefined) th.style.paddingLeft = "1.2rem";
          tr.appendChild(th);
          return;
        }
        const td = document.createElement("td");
        if (cell !== null && typeof cell === "object") {
          td.textContent = score(cell.value, cell.signed);
          if (cell.before !== undefined) {
            td.append(" ", ITT.element("span", `(${score(cell.before)})`, "muted"));
          }
          if (cell.better === true) td.classList.add("match");
          if (cell.better === false) td.classList.add("miss");
        } else {
          td.textContent = typeof cell === "number" || cell === null ? score(cell) : cell;
        }
        tr.appendChild(td);
      });
      tbody.appendChild(tr);
    });
    node.replaceChildren(thead, tbody);
  }

  /** Source, reference and outputs of a few sentences, folded away under a summary line. */
  function examples(list) {
    const details = ITT.element("details", null, "explain eval-examples");
    details.appendChild(ITT.element("summary", `${ITT.t("training.eval.examples")} (${list.length})`));
    const dl = ITT.element("dl", null, "design");
    list.forEach((example) => {
      const dt = ITT.element("dt", example.category
        ? ITT.t("training.eval.label", { label: example.category }) : "");
      dt.append(example.english);
      dt.lang = "en";
      const dd = document.createElement("dd");
      dd.lang = "zh-CN";
      const line = (label, text, className) => {
        const div = ITT.element("div", null, className);
        div.append(ITT.element("span", ITT.t("training.eval.label", { label }), "muted"), text);
        dd.appendChild(div);
      };
      line(ITT.t("training.eval.reference"), example.reference);
      example.outputs.forEach((output) => line(output.label, output.text, output.before ? "muted" : ""));
      dl.append(dt, dd);
    });
    details.appendChild(dl);
    return details;
  }

  function setCard(node, name, title, caption, table) {
    const id = `eval-caption-${name}`;
    const wrap = ITT.element("div", null, "table-scroll");
    const tableNode = ITT.element("table", null, "numbers compact");
    tableNode.setAttribute("aria-describedby", id);
    scoreTable(tableNode, table, true);
    wrap.appendChild(tableNode);
    const nodes = [ITT.element("p", caption, "muted")];
    nodes[0].id = id;
    if (title) nodes.unshift(ITT.element("h3", title));
    node.replaceChildren(...nodes, wrap);
  }

  function drawEvaluation(evaluation) {
    const sets = document.getElementById("eval-sets");
    const previous = document.getElementById("eval-previous");
    const probe = document.getElementById("eval-probe");
    if (!evaluation) {
      sets.replaceChildren(ITT.element("p", ITT.t("training.eval.none"), "muted"));
      previous.hidden = true;
      probe.hidden = true;
      document.getElementById("eval-learner").hidden = true;
      return;
    }
    previous.hidden = !evaluation.previous;
    if (evaluation.previous) {
      previous.textContent = evaluation.previous.label
        ? ITT.t("training.eval.previous", { label: evaluation.previous.label })
        : ITT.t("training.eval.previous_unnamed");
    }
    sets.replaceChildren(...evaluation.sets.map((set) => {
      const article = document.createElement("article");
      article.dataset.set = set.name;
      setCard(article, set.name, set.title, set.caption, set.table);
      if (set.examples.length) article.appendChild(examples(set.examples));
      return article;
    }));
    drawProbe(probe, "probe", evaluation.probe);
    drawProbe(document.getElementById("eval-learner"), "learner", evaluation.learner);
  }

  function drawProbe(section, prefix, set) {
    section.hidden = !set;
    if (!set) return;
    setCard(document.getElementById(`${prefix}-overall`), prefix, "", set.caption, set.table);
    scoreTable(document.getElementById(`${prefix}-categories`), set.categories);
    document.getElementById(`${prefix}-examples`).replaceChildren(
      ...(set.examples.length ? [examples(set.examples)] : []));
  }

  /** With a reference the two cards show its numbers; without one, each says what it needs
      instead of an empty table and chart (nothing is computed without a correct answer). */
  function showScored(scored) {
    document.querySelectorAll(".needs-reference").forEach((part) => { part.hidden = !scored; });
    document.querySelectorAll(".needs-reference-note").forEach((note) => { note.hidden = scored; });
    document.getElementById("reference-form").classList.toggle("waiting", !scored);
  }

  function drawScore(data) {
    showScored(true);
    const n = data.labels.length;
    const free = data.greedy.slice(0, n);
    while (free.length < n) free.push("");
    const header = [ITT.t("training.row.position")].concat(data.labels.map((_, i) => String(i)));
    ITT.table(document.getElementById("shift-table"), header, [
      [ITT.t("training.row.input"), ...data.decoder_input],
      [ITT.t("training.row.label"), ...data.labels],
      [ITT.t("training.row.prob"), ...data.label_prob.map((p) => p.toFixed(3))],
      [ITT.t("training.row.ce"), ...data.cross_entropy.map((c) => c.toFixed(3))],
    ], true);
    ITT.plot(document.getElementById("score-figure"), data.figures.positions);
    document.getElementById("loss-line").textContent = ITT.t("training.loss", {
      loss: data.loss.toFixed(3), smoothed: data.smoothed_loss.toFixed(3), ls: data.label_smoothing,
    });
    document.getElementById("grad-line").textContent = ITT.t("training.grad", {
      norm: data.grad_norm.toFixed(3), clip: data.clip, clipped: data.clipped_grad_norm.toFixed(3),
    });
    const unknown = document.getElementById("unknown");
    unknown.hidden = data.unknown_characters.length === 0;
    unknown.textContent = ITT.t("training.unknown") + data.unknown_characters.join(" ");
    ITT.table(document.getElementById("teacher-table"), header, [
      [ITT.t("training.row.label"), ...data.labels],
      [ITT.t("training.row.predicted"), ...data.predicted],
      [ITT.t("training.row.free"), ...free],
    ], true);
    const forcedRight = data.predicted.filter((token, i) => token === data.labels[i]).length;
    const split = free.findIndex((token, i) => token !== data.labels[i]);
    document.getElementById("exposure-line").textContent = split < 0
      ? ITT.t("training.exposure_same", { n, right: forcedRight })
      : ITT.t("training.exposure_split", {
        n, right: forcedRight, pos: split, label: data.labels[split], free: free[split] || "∅",
      });
    document.getElementById("reference-source").textContent = ITT.t(
      data.reference === referenceInput.dataset.human ? "training.ref_human"
        : data.reference === data.greedy_translation ? "training.ref_own" : "training.ref_yours");
    // mark where teacher-forced and free-running predictions agree with the label
    const rows = document.querySelectorAll("#teacher-table tbody tr");
    [1, 2].forEach((r) => {
      rows[r].querySelectorAll("td").forEach((cell, i) => {
        cell.classList.add(cell.textContent === data.labels[i] ? "match" : "miss");
      });
    });
  }

  async function load() {
    ITT.clearError();
    const text = ITT.text();
    // a human translation when the sentence has one (the probe set) or the URL brings one; else
    // the learner is asked for one: the model's own output as the reference would make free
    // running agree with it everywhere, which shows nothing
    const reference = ITT.params().get("reference") || referenceInput.dataset.human || "";
    referenceInput.value = reference;
    document.getElementById("reference-choices").hidden = Boolean(reference);
    const history = drawHistory();
    if (reference) {
      drawScore(await ITT.api("/api/score", { text, reference }));
    } else {
      showScored(false);
      document.getElementById("reference-source").textContent = ITT.t("training.ref_needed");
    }
    await history;
  }

  function scorePair(text, reference) {
    const query = ITT.params();
    query.set("text", text);
    query.set("reference", reference);
    ITT.setURL(query, true);
    const box = document.querySelector("#sentence-form [name=text], #text");
    if (box) box.value = text;
    load().catch((error) => ITT.showError(error.message));
  }

  document.querySelectorAll(".preset-pair").forEach((button) => {
    button.addEventListener("click", () => {
      referenceInput.dataset.human = button.dataset.reference; // the probe set's human translation
      scorePair(button.dataset.text, button.dataset.reference);
    });
  });
  document.getElementById("use-own").addEventListener("click", async () => {
    const translation = await ITT.api("/api/translate", { text: ITT.text() });
    // the reference field takes 200 characters; a long (or never-ending) output is cut there
    const own = translation.translation.slice(0, referenceInput.maxLength > 0 ? referenceInput.maxLength : 200).trim();
    if (own) scorePair(ITT.text(), own);
  });

  document.getElementById("reference-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const query = ITT.params();
    query.set("text", ITT.text());
    query.set("reference", referenceInput.value.trim());
    ITT.setURL(query, true);
    ITT.api("/api/score", { text: ITT.text(), reference: referenceInput.value.trim() })
      .then(drawScore)
      .catch((error) => ITT.showError(error.message));
  });
  ITT.start(load);
})();
