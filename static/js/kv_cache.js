/* /kv-cache: a live race between cached and uncached decoding on this machine. */
"use strict";

(() => {
  const stepsInput = document.getElementById("steps");

  async function load() {
    ITT.clearError();
    const steps = ITT.params().get("steps") || stepsInput.value || "32";
    stepsInput.value = steps;
    const data = await ITT.get("/api/kv-cache", { text: ITT.text(), steps });
    const ratio = data.cached_ms > 0 ? (data.uncached_ms / data.cached_ms).toFixed(2) : "–";
    document.getElementById("kv-summary").textContent = ITT.t("kv.summary", {
      steps: data.steps, cached: data.cached_ms.toFixed(1), uncached: data.uncached_ms.toFixed(1),
      ratio,
    });
    document.getElementById("kv-identical").textContent =
      ITT.t(data.identical ? "kv.identical" : "kv.different") + data.tokens.join("");
    ITT.plot(document.getElementById("kv-timing"), data.figures.timing);
    ITT.plot(document.getElementById("kv-work"), data.figures.work);
    ITT.plot(document.getElementById("kv-grid-cached"), data.figures.cached_grid);
    ITT.plot(document.getElementById("kv-grid-uncached"), data.figures.uncached_grid);
  }

  document.getElementById("steps-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const query = ITT.params();
    query.set("steps", stepsInput.value);
    ITT.setURL(query, true);
    load().catch((error) => ITT.showError(error.message));
  });
  ITT.start(load);
})();
