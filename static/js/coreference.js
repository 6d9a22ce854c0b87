/* /coreference: rank every encoder head by the weight the pronoun puts on its referent. */
"use strict";

(() => {
  const value = (id) => document.getElementById(id).value.trim();

  async function load() {
    ITT.clearError();
    if (!value("coref-pronoun") || !value("coref-referent")) return; // the page says what is missing
    const data = await ITT.get("/api/coreference", {
      text: value("coref-text"), pronoun: value("coref-pronoun"),
      referent: value("coref-referent"), distractor: value("coref-distractor"),
    });
    document.getElementById("uniform").textContent =
      ITT.t("coref.uniform", { n: data.tokens.length, u: data.uniform.toFixed(3) });
    ITT.plot(document.getElementById("coref-grid"), data.figures.grid);
    ITT.plot(document.getElementById("coref-best"), data.figures.best);
    const head = [ITT.t("coref.rank"), ITT.t("coref.layer"), ITT.t("coref.head"), ITT.t("coref.weight"),
      ITT.t("coref.referent_rank"), ITT.t("coref.top_word")];
    if (data.distractor.length) head.splice(4, 0, ITT.t("coref.distractor_weight"));
    const rows = data.ranking.map((entry, index) => {
      const row = [String(index + 1), String(entry.layer + 1), String(entry.head + 1),
        entry.weight.toFixed(3), String(entry.referent_rank), entry.top_word];
      if (data.distractor.length) row.splice(4, 0, entry.distractor_weight.toFixed(3));
      return row;
    });
    ITT.table(document.getElementById("coref-ranking"), head, rows, false);
    // what the measurement shows, against two baselines measured on this sentence: the even
    // spread, and the same head's weight on every other word (the referent must beat them all)
    const best = data.ranking[0];
    const ratio = data.uniform > 0 ? best.weight / data.uniform : 0;
    const first = data.ranking.filter((entry) => entry.referent_rank === 1).length;
    const verdict = best.referent_rank === 1 && ratio >= 2 ? "clear"
      : ratio > 1 && best.referent_rank <= 3 ? "slight" : "none";
    document.getElementById("coref-verdict").textContent = ITT.t(`coref.verdict_${verdict}`, {
      layer: best.layer + 1, head: best.head + 1, w: best.weight.toFixed(3),
      u: data.uniform.toFixed(3), x: ratio.toFixed(2), place: best.referent_rank,
      top: best.top_word, first, heads: data.ranking.length,
    });
  }
  ITT.syncLinks();
  load().catch((error) => ITT.showError(error.message));
})();
