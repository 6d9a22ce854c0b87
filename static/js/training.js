/* /training: teacher-forced loss and gradient of a sentence pair, the warmup schedule and the
   model's real training curves. */
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
    historyDrawn = true;
  }

  function drawScore(data) {
    const n = data.labels.length;
    const free = data.greedy.slice(0, n);
    while (free.length < n) free.push("");
    const header = [""].concat(data.labels.map((_, i) => String(i)));
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
      data.reference === data.greedy_translation ? "training.ref_own"
        : data.reference === referenceInput.dataset.human ? "training.ref_human" : "training.ref_yours");
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
    // a human translation when the sentence has one (the probe set), else the model's own output
    let reference = ITT.params().get("reference") || referenceInput.dataset.human || "";
    if (!reference) {
      const translation = await ITT.api("/api/translate", { text });
      reference = translation.translation;
    }
    referenceInput.value = reference;
    const history = drawHistory();
    if (reference) drawScore(await ITT.api("/api/score", { text, reference }));
    await history;
  }

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
