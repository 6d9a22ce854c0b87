/* /embeddings: token vectors ×√d, positions, their sum, the position table and the
   layer-by-layer 2-D projection of the sentence. */
"use strict";

(() => {
  let figures = null;

  /** The projection, its labels set apart on a narrow chart. In a closed fold the chart may have
      no width yet (then it is drawn narrow): it is drawn again when its section opens. */
  function drawProjection() {
    const projection = document.getElementById("projection");
    if (figures) ITT.plot(projection, projection.clientWidth < 600 ? figures.projection_narrow : figures.projection);
  }

  async function load() {
    ITT.clearError();
    const data = await ITT.api("/api/figures/embeddings", ITT.requestFromURL());
    const f = data.figures;
    figures = f;
    for (const [id, figure] of [["emb-token", f.token], ["emb-position", f.position],
      ["emb-sum", f.sum], ["emb-norms", f.norms], ["pe-table", f.table], ["pe-cosine", f.cosine],
      ["pe-offset", f.offset]]) {
      ITT.plot(document.getElementById(id), figure);
    }
    drawProjection();
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
  document.getElementById("projection-card").addEventListener("toggle", (event) => {
    if (event.target.open) drawProjection();
  });
  ITT.start(load);
})();
