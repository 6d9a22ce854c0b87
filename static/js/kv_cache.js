/* /kv-cache: a live race between cached and uncached decoding on this machine, timed over several
   runs, and the real cached K/V rows growing step by step. */
"use strict";

(() => {
  const stepsInput = document.getElementById("steps");
  const runsInput = document.getElementById("runs");
  const FIELDS = { steps: [stepsInput, 1, 128], runs: [runsInput, 1, 9] };
  let data = null;

  /** A whole number in [low, high] from the URL, else the field's current value. */
  function fromURL(name) {
    const [input, low, high] = FIELDS[name];
    const raw = ITT.params().get(name);
    const value = /^[0-9]{1,3}$/.test(raw || "") ? Number(raw) : Number.NaN;
    return value >= low && value <= high ? String(value) : input.value;
  }

  function selectFromURL(id, name) {
    const select = document.getElementById(id);
    const raw = ITT.params().get(name);
    if (raw !== null && [...select.options].some((o) => o.value === raw)) select.value = raw;
    return select.value;
  }

  /** A K/V heatmap; on a narrow screen without the numbers in the cells (they would overlap). */
  function plotRows(node, figure) {
    // a cell prints its value ("-0.60", 12 px text) only where a column is wide enough for it:
    // the chart's width less its margins and colour bar, shared by the columns
    const columns = Math.max(1, figure.data[0].x.length);
    const narrow = (node.clientWidth - 150) / columns < 42;
    const trace = Object.assign({}, figure.data[0], narrow ? { texttemplate: "" } : {});
    ITT.plot(node, { data: [trace], layout: figure.layout });
  }

  /** Show the cached rows after step n: the first n rows of the real K and V. */
  function drawRows(n) {
    const kv = data.kv;
    document.getElementById("kv-row-step-value").textContent = String(n);
    const [b, h, t, k] = kv.self.shapes[n - 1];
    document.getElementById("kv-shape").textContent = ITT.t("kv.shape", { n, b, h, t, k });
    for (const [id, key] of [["kv-k", "k_rows"], ["kv-v", "v_rows"]]) {
      const full = data.figures[key];
      const trace = Object.assign({}, full.data[0], {
        z: full.data[0].z.slice(0, n), y: full.data[0].y.slice(0, n),
      });
      const layout = Object.assign({}, full.layout, { height: 80 + 22 * Math.max(n, 3) });
      plotRows(document.getElementById(id), { data: [trace], layout });
    }
  }

  async function load() {
    ITT.clearError();
    const steps = fromURL("steps");
    const runs = fromURL("runs");
    stepsInput.value = steps;
    runsInput.value = runs;
    const layer = selectFromURL("kv-layer", "layer");
    const head = selectFromURL("kv-head", "head");
    data = await ITT.get("/api/kv-cache", { text: ITT.text(), steps, runs, layer, head });
    const ratio = data.cached_ms > 0 ? (data.uncached_ms / data.cached_ms).toFixed(2) : "–";
    document.getElementById("kv-summary").textContent = ITT.t("kv.summary", {
      steps: data.steps, runs: data.runs, cached: data.cached_ms.toFixed(1),
      cmin: data.cached_min_ms.toFixed(1), cmax: data.cached_max_ms.toFixed(1),
      uncached: data.uncached_ms.toFixed(1), umin: data.uncached_min_ms.toFixed(1),
      umax: data.uncached_max_ms.toFixed(1), ratio,
    });
    document.getElementById("kv-runs-note").textContent = ITT.t("kv.runs_note", { runs: data.runs, asked: runs });
    document.getElementById("kv-identical").textContent =
      ITT.t(data.identical ? "kv.identical" : "kv.different") + data.tokens.join("");
    ITT.plot(document.getElementById("kv-timing"), data.figures.timing);
    ITT.plot(document.getElementById("kv-work"), data.figures.work);
    ITT.plot(document.getElementById("kv-grid-cached"), data.figures.cached_grid);
    ITT.plot(document.getElementById("kv-grid-uncached"), data.figures.uncached_grid);
    const kv = data.kv;
    const [b, h, s, k] = kv.cross.shape;
    document.getElementById("kv-tensors-help").textContent = ITT.t("kv.tensors_help", {
      layer: kv.layer + 1, head: kv.head + 1, dims: kv.dims, d_head: k,
    });
    document.getElementById("kv-cross-note").textContent = ITT.t("kv.cross_note", {
      b, h, s, k,
      reused: ITT.t(kv.cross.reused ? "kv.cross_reused" : "kv.cross_changed", { n: kv.self.shapes.length }),
    });
    const slider = document.getElementById("kv-row-step");
    slider.max = String(kv.self.shapes.length);
    slider.value = slider.max;
    drawTensors();
  }

  /** The cross-attention K/V and the self-attention rows cached after the slider's step. In a
      closed fold the charts may have no width yet (then they are drawn narrow): they are drawn
      again when the fold opens. */
  function drawTensors() {
    plotRows(document.getElementById("kv-cross-k"), data.figures.cross_k);
    plotRows(document.getElementById("kv-cross-v"), data.figures.cross_v);
    drawRows(Number(document.getElementById("kv-row-step").value));
  }

  document.getElementById("kv-tensors").addEventListener("toggle", (event) => {
    if (event.target.open && data) drawTensors();
  });
  document.getElementById("kv-row-step").addEventListener("input", (event) => {
    if (data) drawRows(Number(event.target.value));
  });
  document.getElementById("steps-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const query = ITT.params();
    query.set("steps", stepsInput.value);
    query.set("runs", runsInput.value);
    query.set("layer", document.getElementById("kv-layer").value);
    query.set("head", document.getElementById("kv-head").value);
    ITT.setURL(query, true);
    load().catch((error) => ITT.showError(error.message));
  });
  ITT.start(load);
})();
