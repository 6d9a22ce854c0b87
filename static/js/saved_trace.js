/* Keeping what a page drew from the trace: "Download the trace (JSON)" writes /api/trace in full
   (for a notebook, as the x-ray's download does) together with the answers this page and the
   other pages of the translation drew from it; "Open a saved trace…" (or dropping the file on the
   page) draws the page again from that file with no request to the server at all.

   The answers are kept by common.js (ITT.answers), by the name of the request that got them
   (ITT.requestKey); while a file is open, common.js hands its answers back and refuses, without
   asking, what it does not hold. A banner says where the page comes from and leads back to the
   live model; a page of another sentence (the sentence box, Back) is live again by itself. */
"use strict";

(() => {
  const FORMAT = "inside-the-transformer/trace";
  const XRAY_FORMAT = "inside-the-transformer/xray-view"; // static/js/xray/saved.js
  const VERSION = 1;
  const MAX_FILE_BYTES = 64 * 1024 * 1024; // a long sentence's file is a few MB

  /* What each page asks first when it loads, for the request ``r`` (the same bodies as the
     pages' own calls): a download fetches them all, so the file opens on any of these pages. */
  const lastLayer = () => ITT.pageData.config.n_decoder_layers - 1;
  const DRAWN = {
    "/pipeline": (r) => [["/api/figures/pipeline", r]],
    "/tokens": (r) => [["/api/figures/tokens", r]],
    "/embeddings": (r) => [["/api/figures/embeddings", r]],
    "/attention": (r) => [["/api/figures/attention", r],
      ["/api/figures/attention-detail", { ...r, kind: "encoder", layer: 0, head: 0, query: 0 }]],
    "/decode": (r) => [["/api/figures/decode", { ...r, layer: lastLayer() }]],
  };
  // The answer a page cannot open without, and the part of it the page draws first. /kv-cache's
  // race is timed on the machine, not read from the trace: a file holds it only when it was
  // downloaded there.
  const MAIN = {
    "/pipeline": ["/api/figures/pipeline", "figures"], "/tokens": ["/api/figures/tokens", "figures"],
    "/embeddings": ["/api/figures/embeddings", "figures"], "/attention": ["/api/figures/attention", "kinds"],
    "/decode": ["/api/figures/decode", "figures"], "/kv-cache": ["/api/kv-cache", "figures"],
  };

  const page = window.location.pathname;
  let opened = null; // the file on screen: { name, data }

  function modelLine() {
    const line = document.getElementById("model-line");
    return line ? line.textContent.trim() : "";
  }

  /** The sentence a kept answer was asked for (its body's text, or its query's). */
  function textOf(key) {
    const bar = key.indexOf("|");
    const body = key.slice(bar + 1);
    if (body) {
      try { return JSON.parse(body).text; } catch { return null; }
    }
    return new URLSearchParams(key.slice(0, bar).split("?")[1] || "").get("text");
  }

  const keyOf = (path, body) => ITT.requestKey(path, { body: JSON.stringify(body) });

  function fileName(text) {
    const words = (text.match(/[A-Za-z0-9]+/g) || ["sentence"]).slice(0, 6).join("-").toLowerCase();
    return `trace-${page.replace(/\W+/g, "") || "page"}-${words}.json`;
  }

  function save(name, text) {
    const url = URL.createObjectURL(new Blob([text], { type: "application/json" }));
    const link = document.createElement("a");
    link.href = url;
    link.download = name;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 0);
  }

  /** The trace in full and every answer drawn from it for this sentence, as one file. */
  async function download() {
    if (opened) { // the file on screen, as it was opened
      save(opened.name, JSON.stringify(opened.data));
      return;
    }
    const request = ITT.requestFromURL();
    const trace = await ITT.api("/api/trace", request);
    for (const make of Object.values(DRAWN)) {
      for (const [path, body] of make(request)) {
        if (!ITT.answers.kept.has(keyOf(path, body))) await ITT.api(path, body);
      }
    }
    const answers = {};
    for (const [key, text] of ITT.answers.kept) {
      if (!key.startsWith("/api/trace?") && textOf(key) === request.text) answers[key] = JSON.parse(text);
    }
    save(fileName(request.text), JSON.stringify({
      format: FORMAT, version: VERSION, saved: new Date().toISOString(), model: modelLine(),
      config: ITT.pageData.config, page, search: window.location.search, request, trace, answers,
    }));
  }

  /** A file's text → its data, or an Error that says in plain words what is wrong with it. */
  function read(text) {
    let data;
    try {
      data = JSON.parse(text);
    } catch {
      throw new Error(ITT.t("saved.not_json"));
    }
    if (!data || typeof data !== "object" || Array.isArray(data)) throw new Error(ITT.t("saved.foreign"));
    if (data.format === XRAY_FORMAT) throw new Error(ITT.t("saved.xray_view"));
    if (data.format === undefined && data.trace && data.request) throw new Error(ITT.t("saved.notebook_trace"));
    if (data.format !== FORMAT) throw new Error(ITT.t("saved.foreign"));
    if (data.version !== VERSION) throw new Error(ITT.t("saved.version", { v: String(data.version) }));
    const object = (value) => Boolean(value) && typeof value === "object" && !Array.isArray(value);
    const whole = object(data.request) && typeof data.request.text === "string" && object(data.trace)
      && object(data.answers) && typeof data.page === "string" && typeof data.search === "string"
      && Object.entries(data.answers).every(([key, answer]) => key.startsWith("/api/") && key.includes("|")
        && object(answer));
    if (!whole) throw new Error(ITT.t("saved.damaged"));
    const [endpoint, part] = MAIN[page];
    const main = Object.keys(data.answers).find((key) => key.startsWith(`${endpoint}?`));
    if (!main && data.page === page) throw new Error(ITT.t("saved.damaged"));
    if (!main) throw new Error(ITT.t("saved.not_here", { page: data.page }));
    if (!object(data.answers[main][part])) throw new Error(ITT.t("saved.damaged"));
    return data;
  }

  /** The URL query that describes ``request`` (the inverse of ITT.requestFromURL). */
  function queryOf(request) {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(request)) {
      if (name === "forced_prefix") for (const token of value) query.append("forced", String(token));
      else if (value !== null && value !== undefined) query.set(name, String(value));
    }
    return query;
  }

  function banner(name, data) {
    const saved = String(data.saved || "").slice(0, 16).replace("T", " ");
    const same = ITT.canonical(data.config || {}) === ITT.canonical(ITT.pageData.config);
    const parts = [ITT.t("saved.opened", { name, text: data.request.text, saved, model: String(data.model || "") })];
    if (!same) parts.push(ITT.t("saved.other_model", { model: modelLine() }));
    parts.push(ITT.t("saved.limits"));
    document.getElementById("saved-status-text").textContent = parts.join(" ");
    document.getElementById("saved-status").hidden = false;
  }

  /** Back to the running model: the banner goes and the page is drawn live again. */
  function leave() {
    opened = null;
    ITT.answers.replay = null;
    document.getElementById("saved-status").hidden = true;
    document.getElementById("saved-status-text").textContent = "";
    delete document.body.dataset.source;
  }

  async function open(file) {
    ITT.clearError();
    let data;
    try {
      if (file.size > MAX_FILE_BYTES) throw new Error(ITT.t("saved.too_big", { mb: MAX_FILE_BYTES >> 20 }));
      data = read(await file.text());
    } catch (error) { // refused before anything on screen changes
      ITT.showError(error instanceof Error && error.message ? error.message : ITT.t("saved.damaged"));
      document.getElementById("error").scrollIntoView({ block: "nearest" }); // a drop far below it
      return;
    }
    const text = data.request.text;
    const held = new Map(Object.entries(data.answers).map(([key, answer]) => [key, JSON.stringify(answer)]));
    opened = { name: file.name, data };
    ITT.answers.replay = {
      answers: held,
      // another sentence on the page (Back, a link) is the live model's again
      holds: () => (ITT.text() === text ? true : (leave(), false)),
    };
    ITT.setURL(data.page === page ? new URLSearchParams(data.search) : queryOf(data.request), true);
    const box = document.getElementById("text");
    if (box) box.value = text;
    banner(file.name, data);
    await ITT.reload();
    if (opened && opened.data === data) document.body.dataset.source = "file"; // drawn from it
  }

  document.getElementById("saved-download").addEventListener("click", () => {
    download().catch((error) => ITT.showError(error.message));
  });
  document.getElementById("saved-open").addEventListener("change", (event) => {
    const [file] = event.target.files;
    if (file) open(file);
    event.target.value = "";
  });
  document.getElementById("saved-live").addEventListener("click", () => {
    leave();
    ITT.reload();
  });
  document.addEventListener("dragover", (event) => {
    if ([...event.dataTransfer.types].includes("Files")) event.preventDefault();
  });
  document.addEventListener("drop", (event) => {
    const [file] = event.dataTransfer.files;
    if (!file) return;
    event.preventDefault();
    open(file);
  });
})();
