/* The pipeline page: translate the sentence in the URL and show its tokens and probabilities. */
"use strict";

(() => {
  async function load() {
    ITT.clearError();
    const data = await ITT.api("/api/figures/pipeline", ITT.requestFromURL());
    document.getElementById("translation").textContent = data.translation || "∅";
    document.getElementById("unfinished").hidden = data.finished;
    ITT.chips(document.getElementById("source-tokens"), data.source_tokens);
    ITT.chips(document.getElementById("target-tokens"), data.target_tokens);
    ITT.plot(document.getElementById("probabilities"), data.figures.probabilities);
    document.getElementById("timing").textContent = ITT.t("word.model_ms", { ms: data.model_ms });
    ITT.plot(document.getElementById("fig-recurrence"), data.figures.recurrence);
    const links = data.links;
    const far = links[links.length - 1];
    document.getElementById("rnn-summary").textContent = far ? ITT.t("rnn.summary", {
      s: data.source_tokens.length, n: ITT.pageData.config.n_encoder_layers, d: far.distance,
      w: far.weight.toFixed(3), layer: far.layer + 1, head: far.head + 1, from: far.from, to: far.to,
    }) : "";
  }
  ITT.start(load);
})();
