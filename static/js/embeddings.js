/* /embeddings: token vectors ×√d, positions, their sum, the position table and the
   layer-by-layer 2-D projection of the sentence. */
"use strict";

(() => {
  async function load() {
    ITT.clearError();
    const data = await ITT.api("/api/figures/embeddings", ITT.requestFromURL());
    const f = data.figures;
    for (const [id, figure] of [["emb-token", f.token], ["emb-position", f.position],
      ["emb-sum", f.sum], ["emb-norms", f.norms], ["pe-table", f.table], ["pe-cosine", f.cosine],
      ["pe-offset", f.offset]]) {
      ITT.plot(document.getElementById(id), figure);
    }
    const projection = document.getElementById("projection");
    ITT.plot(projection, projection.clientWidth < 600 ? f.projection_narrow : f.projection);
    const s = data.sample;
    const fmt = (values) => values.map((v) => Number(v).toFixed(3)).join(", ") + ", …";
    ITT.table(document.getElementById("sample-table"), null, [
      [`${s.token} · ${ITT.t("emb.norm.raw")}`, fmt(s.raw)],
      [`× √${data.d_model} = × ${data.sqrt_d}`, fmt(s.scaled)],
      [`+ ${ITT.t("emb.norm.position")} (${ITT.t("common.position")} 0)`, fmt(s.position)],
      [`= ${ITT.t("emb.norm.sum")}`, fmt(s.sum)],
    ], true);
    const link = document.getElementById("coref-link");
    link.setAttribute("href", "/coreference");
  }
  ITT.start(load);
})();
