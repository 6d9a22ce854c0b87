/* /tour: show the sentence's translation beside each stop; ← and → move between stops. */
"use strict";

(() => {
  document.addEventListener("keydown", (event) => {
    if (event.target.closest("input, textarea, select")) return;
    const link = document.getElementById(event.key === "ArrowLeft" ? "tour-back"
      : event.key === "ArrowRight" ? "tour-next" : "");
    if (link) window.location.assign(link.getAttribute("href"));
  });

  async function load() {
    const text = SEC.text();
    document.getElementById("tour-source").textContent = text;
    const data = await ITT.api("/api/translate", { text });
    document.getElementById("tour-translation").textContent = data.translation || "∅";
  }
  load().catch((error) => ITT.showError(error.message));
})();
