/* /scale: the parameter calculator. The arithmetic is done once, on the server (/api/scale);
   this script only collects the sizes, keeps them in the URL and draws the answer. */
"use strict";

(() => {
  const presets = JSON.parse(document.getElementById("scale-presets").textContent);
  const FIELDS = ["vocab", "target_vocab", "d_model", "layers", "heads", "d_ff", "context",
    "experts", "active_experts"];
  const presetSelect = document.getElementById("preset");
  const architecture = document.getElementById("architecture");
  const biases = document.getElementById("f-biases");

  function fill(query) {
    architecture.value = query.architecture || "decoder_only";
    for (const name of FIELDS) {
      const value = query[name];
      document.getElementById(`f-${name}`).value = value === null || value === undefined ? "" : value;
    }
    biases.checked = query.biases !== false && query.biases !== "false";
  }

  function collect() {
    const query = { architecture: architecture.value, biases: biases.checked ? "true" : "false" };
    for (const name of FIELDS) {
      const value = document.getElementById(`f-${name}`).value.trim();
      if (value !== "") query[name] = value;
    }
    if (query.architecture !== "encoder_decoder") delete query.target_vocab;
    return query;
  }

  function draw(data) {
    ITT.clearError();
    if (data.warnings.length) ITT.showError(data.warnings.join(" "));
    document.getElementById("calc-total").textContent = ITT.number(data.total);
    document.getElementById("calc-weights").textContent = ITT.number(data.total_weights_only);
    document.getElementById("calc-active").textContent = ITT.number(data.active_per_token);
    document.getElementById("calc-extra").textContent = [
      `${ITT.t("scale.d_head")}: ${data.d_head}`,
      `${ITT.t("scale.flops")}: ${Number(data.flops_per_token).toExponential(2)}`,
      `${ITT.t("scale.kv_per_token")}: ${ITT.number(data.kv_cache_floats_per_token)}`,
    ].join(" · ");
    const head = [ITT.t("scale.col.matrix"), ITT.t("scale.col.shape"), ITT.t("scale.col.per_layer"),
      ITT.t("scale.col.times"), ITT.t("scale.col.total")];
    const rows = data.rows.map((row) => [
      row.label, row.shape, ITT.number(row.per_layer),
      String(row.times), ITT.number(row.count),
    ]);
    rows.push([ITT.t("scale.total"), "", "", "", ITT.number(data.total)]);
    ITT.table(document.getElementById("calc-table"), head, rows, true);
    ITT.plot(document.getElementById("calc-figure"), data.figure);
  }

  async function compute(push) {
    ITT.clearError();
    const query = collect();
    if (push !== undefined) {
      const url = new URLSearchParams(query);
      url.set("preset", presetSelect.value);
      const text = ITT.params().get("text");
      if (text) url.set("text", text);
      ITT.setURL(url, push);
    }
    draw(await ITT.get("/api/scale", query));
  }

  function fromURL() {
    const query = ITT.params();
    const chosen = presets.find((p) => p.name === query.get("preset")) || presets[2];
    presetSelect.value = chosen.name;
    fill(chosen.query);
    if (query.get("d_model")) {
      const custom = { architecture: query.get("architecture"), biases: query.get("biases") };
      for (const name of FIELDS) custom[name] = query.get(name);
      fill(custom);
    }
  }

  presetSelect.addEventListener("change", () => {
    fill(presets.find((p) => p.name === presetSelect.value).query);
    compute(false).catch((error) => ITT.showError(error.message));
  });
  document.getElementById("calc-form").addEventListener("submit", (event) => {
    event.preventDefault();
    compute(true).catch((error) => ITT.showError(error.message));
  });
  ITT.start(async () => { fromURL(); await compute(); });
})();
