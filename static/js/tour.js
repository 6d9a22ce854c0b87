/* /tour: show the sentence's translation beside each stop, and a live figure of that stop's
   stage computed for the learner's own sentence; ← and → move between stops. */
"use strict";

(() => {
  document.addEventListener("keydown", (event) => {
    if (event.target.closest("input, textarea, select")) return;
    const link = document.getElementById(event.key === "ArrowLeft" ? "tour-back"
      : event.key === "ArrowRight" ? "tour-next" : "");
    if (link) window.location.assign(link.getAttribute("href"));
  });

  /* Which live figure each stop shows: the page's API and how to pick that stop's own figure
     from it (tests/e2e/test_pages.py checks each stop's figure kind). */
  const PREVIEWS = {
    // the x-ray's stages as numbers: each token's vector size after every stage, both sides
    "/": { post: "/api/figures/pipeline", pick: (d) => d.figures.flow,
      caption: () => ITT.t("tour.preview_xray") },
    "/pipeline": { post: "/api/figures/pipeline", pick: (d) => d.figures.probabilities },
    // pieces and ids: the source batch as token ids (the masks come later, on the tokens page)
    "/tokens": { post: "/api/figures/tokens", pick: (d) => d.figures.source },
    "/embeddings": { post: "/api/figures/embeddings", pick: (d) => d.figures.position },
    // self-attention, the stop that lights the encoder: the encoder's last layer, first head
    "/attention": {
      post: "/api/figures/attention",
      pick: (d) => d.kinds.encoder[d.kinds.encoder.length - 1].figure,
    },
    "/decode": {
      post: "/api/figures/decode",
      pick: (d) => d.steps[Math.min(1, d.steps.length - 1)].figures.softmax,
    },
    "/training": { get: "/api/training", pick: (d) => d.figures.whole || d.figures.curves },
    // the timeline's run: its loss curve (the snapshots themselves are read on the page)
    "/timeline": { get: "/api/timeline", query: () => ({}), pick: (d) => d.figure },
    "/kv-cache": { get: "/api/kv-cache", query: (text) => ({ text, steps: 32 }), pick: (d) => d.figures.timing },
    // The coreference stop measures the page's own first example: the reader's sentence may have
    // no pronoun in it.
    "/coreference": {
      get: "/api/coreference",
      query: (text, node) => ({ text: node.dataset.corefText, pronoun: node.dataset.corefPronoun,
        referent: node.dataset.corefReferent }),
      pick: (d) => d.figures.grid,
      caption: (node) => ITT.t("tour.preview_coref", { text: node.dataset.corefText }),
    },
    "/scale": { get: "/api/scale", query: () => ({}), pick: (d) => d.figure,
      caption: () => ITT.t("tour.preview_scale") },
  };

  async function preview(text) {
    const figure = document.querySelector(".tour-preview");
    const spec = PREVIEWS[figure.dataset.path];
    if (!spec) {
      figure.hidden = true;
      return;
    }
    const data = spec.post
      ? await ITT.api(spec.post, { text })
      : await ITT.get(spec.get, spec.query ? spec.query(text, figure) : {});
    const chosen = spec.pick(data);
    if (!chosen) {
      figure.hidden = true;
      return;
    }
    ITT.plot(document.getElementById("tour-preview"), chosen);
    document.getElementById("tour-preview-caption").textContent =
      spec.caption ? spec.caption(figure) : ITT.t("tour.preview");
  }

  async function load() {
    const text = ITT.text();
    document.getElementById("tour-source").textContent = text;
    const data = await ITT.api("/api/translate", { text });
    document.getElementById("tour-translation").textContent = data.translation || "∅";
    await preview(text);
  }
  load().catch((error) => ITT.showError(error.message));
})();
