/* /tokens: pieces and ids, a padded mini-batch with the user's sentence, and its three masks. */
"use strict";

(() => {
  let data = null;

  function drawMasks(row) {
    const masks = data.figures.masks[row];
    ITT.plot(document.getElementById("mask-padding"), masks.padding);
    ITT.plot(document.getElementById("mask-causal"), masks.causal);
    ITT.plot(document.getElementById("mask-cross"), masks.cross);
  }

  async function load() {
    ITT.clearError();
    data = await ITT.api("/api/figures/tokens", ITT.requestFromURL());
    document.getElementById("translation").textContent = data.translation || "∅";
    const tokenRow = (items) => [
      [ITT.t("tokens.piece"), ...items.map((item) => item.token)],
      [ITT.t("tokens.id"), ...items.map((item) => String(item.id))],
    ];
    ITT.table(document.getElementById("english-table"), null, tokenRow(data.english), true);
    const chinese = data.chinese.concat([{ token: "<eos>", id: 2 }]);
    ITT.table(document.getElementById("chinese-table"), null, tokenRow(chinese), true);
    ITT.plot(document.getElementById("batch-source"), data.figures.source);
    ITT.plot(document.getElementById("batch-decoder"), data.figures.decoder);
    ITT.plot(document.getElementById("batch-labels"), data.figures.labels);
    document.getElementById("padding-share").textContent = ITT.t("tokens.wasted", data.padding_share);
    const select = document.getElementById("mask-row");
    select.replaceChildren(...data.rows.map((name, index) => {
      const option = ITT.element("option", `${name}: ${data.batch.sources[index]}`);
      option.value = String(index);
      return option;
    }));
    const wanted = Number.parseInt(ITT.params().get("row") || "0", 10);
    const row = wanted >= 0 && wanted < data.rows.length ? wanted : 0;
    select.value = String(row);
    drawMasks(row);
  }

  document.getElementById("mask-row").addEventListener("change", (event) => {
    const row = Number(event.target.value);
    const query = ITT.params();
    query.set("row", String(row));
    ITT.setURL(query, false);
    drawMasks(row);
  });
  ITT.start(load);
})();
