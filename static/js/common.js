/* Shared helpers for every page: strings, URL state, API calls, loading state, Plotly.
   Pages never put user text into innerHTML: everything goes through textContent. */
"use strict";

const ITT = (() => {
  const strings = JSON.parse(document.getElementById("i18n").textContent);
  const pageData = JSON.parse(document.getElementById("page-data").textContent);
  // URL parameters that describe a translation (carried from page to page).
  const FIELDS = {
    text: "string", strategy: "string", temperature: "number", top_k: "number",
    top_p: "number", beam_size: "number", max_len: "number", seed: "number",
  };
  const CARRIED = [...Object.keys(FIELDS), "forced"];

  function t(key, values) {
    let text = key in strings ? strings[key] : key;
    for (const [name, value] of Object.entries(values || {})) {
      text = text.split(`{${name}}`).join(String(value));
    }
    return text;
  }

  function params() {
    return new URLSearchParams(window.location.search);
  }

  /** The API request body described by the current URL (missing text → the first example). */
  function requestFromURL(extra) {
    const query = params();
    const body = { text: query.get("text") || pageData.default_text };
    for (const [name, type] of Object.entries(FIELDS)) {
      const raw = query.get(name);
      if (name === "text" || raw === null || raw === "") continue;
      body[name] = type === "number" ? Number(raw) : raw;
    }
    if (body.strategy !== "sample") {
      for (const name of ["temperature", "top_k", "top_p", "seed"]) delete body[name];
    }
    if (body.strategy !== "beam") delete body.beam_size;
    const forced = query.getAll("forced");
    if (forced.length) body.forced_prefix = forced;
    return Object.assign(body, extra || {});
  }

  /** Links marked data-carry keep the sentence and settings; the language toggle returns here. */
  function syncLinks() {
    const query = params();
    const carried = new URLSearchParams();
    for (const name of CARRIED) {
      for (const value of query.getAll(name)) carried.append(name, value);
    }
    const suffix = carried.toString() ? `?${carried}` : "";
    document.querySelectorAll("a[data-carry]").forEach((link) => {
      const url = new URL(link.getAttribute("href"), window.location.origin);
      link.setAttribute("href", url.pathname + suffix + url.hash);
    });
    const toggle = document.getElementById("lang-toggle");
    if (toggle) {
      const url = new URL(toggle.getAttribute("href"), window.location.origin);
      url.searchParams.set("next", window.location.pathname + window.location.search);
      toggle.setAttribute("href", url.pathname + url.search);
    }
  }

  function setURL(query, push) {
    const search = query.toString();
    const url = window.location.pathname + (search ? `?${search}` : "") + window.location.hash;
    if (push) window.history.pushState(null, "", url);
    else window.history.replaceState(null, "", url);
    syncLinks();
  }

  let busy = 0;
  let busyTimer = null;
  function setBusy(delta) {
    busy = Math.max(0, busy + delta);
    const indicator = document.getElementById("loading");
    document.body.classList.toggle("busy", busy > 0);
    document.getElementById("main").setAttribute("aria-busy", busy > 0 ? "true" : "false");
    clearTimeout(busyTimer);
    if (busy > 0) {
      // Show the indicator only for waits long enough to notice, so fast answers do not flicker.
      busyTimer = setTimeout(() => { indicator.hidden = false; }, 120);
    } else {
      indicator.hidden = true;
    }
  }

  function showError(message) {
    const box = document.getElementById("error");
    box.textContent = `${t("error.title")}: ${message}`;
    box.hidden = false;
  }

  function clearError() {
    const box = document.getElementById("error");
    box.textContent = "";
    box.hidden = true;
  }

  /** POST JSON; resolves to the parsed answer or rejects with the server's message. */
  async function api(path, body) {
    setBusy(+1);
    try {
      let response;
      try {
        response = await fetch(path, {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify(body),
        });
      } catch (error) {
        throw new Error(t("error.network"));
      }
      const data = await response.json().catch(() => ({}));
      if (!response.ok) throw new Error(data.message || `${response.status}`);
      return data;
    } finally {
      setBusy(-1);
    }
  }

  function plot(element, figure, config) {
    const options = Object.assign(
      { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"] },
      config || {},
    );
    return window.Plotly.react(element, figure.data, figure.layout, options);
  }

  /** Replace a list's items with one <li> per token (textContent only). */
  function chips(list, tokens, className) {
    list.replaceChildren(...tokens.map((token) => {
      const item = document.createElement("li");
      item.textContent = token;
      if (className) item.className = className;
      return item;
    }));
  }

  function element(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  /** Run ``load`` now and whenever the URL changes through history navigation. */
  function start(load) {
    syncLinks();
    const run = () => load().catch((error) => showError(error.message));
    window.addEventListener("popstate", run);
    run();
    return run;
  }

  return {
    t, params, requestFromURL, setURL, syncLinks, api, plot, chips, element, start,
    showError, clearError, pageData,
  };
})();
