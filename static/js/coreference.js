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
    // what may be said, decided by the server: a link only for a pronoun, a noun before it that
    // it could refer to, and a head that singles it out past the threshold calibrated on a
    // labelled set (bench/coreference_calibration.py); otherwise what was found and why it is not
    const said = data.finding.verdict;
    const kind = said.kind === "below" && !said.pick ? "below_none" : said.kind;
    document.getElementById("coref-verdict").textContent = ITT.t(`coref.verdict_${kind}`, {
      pronoun: value("coref-pronoun"), referent: value("coref-referent"), pick: said.pick ?? "",
      layer: (said.layer ?? 0) + 1, head: (said.head ?? 0) + 1,
      x: said.ratio == null ? "" : said.ratio.toFixed(1), t: said.threshold == null ? "" : said.threshold.toFixed(1),
      n: said.sentences ?? "", links: said.links ?? "", right: said.right ?? "",
      nolink: said.no_link == null ? "" : `${Math.round(said.no_link * 100)}%`,
      pkind: said.pronoun_kind ? ITT.t(`coref.kind.${said.pronoun_kind}`) : "",
      nkind: said.noun_kind ? ITT.t(`coref.noun.${said.noun_kind}`) : "",
    });
    document.getElementById("coref-verdict").dataset.kind = said.kind;
  }
  ITT.syncLinks();
  load().catch((error) => ITT.showError(error.message));
})();
