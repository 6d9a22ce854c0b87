/* Helpers shared by the section pages (tokens, embeddings, coreference, training, KV cache,
   scale, tour), on top of ITT from common.js. User text only ever reaches the page through
   textContent. */
"use strict";

const SEC = (() => {
  let busy = 0;

  function setBusy(delta) {
    busy = Math.max(0, busy + delta);
    document.body.classList.toggle("busy", busy > 0);
    document.getElementById("loading").hidden = busy === 0;
  }

  /** GET a JSON endpoint with query parameters; rejects with the server's message. */
  async function get(path, params) {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(params || {})) {
      if (value !== undefined && value !== null && value !== "") query.set(name, value);
    }
    setBusy(+1);
    try {
      let response;
      try {
        response = await fetch(`${path}?${query}`, { headers: { Accept: "application/json" } });
      } catch (error) {
        throw new Error(ITT.t("error.network"));
      }
      const data = await response.json().catch(() => ({}));
      if (!response.ok) throw new Error(data.message || `${response.status}`);
      return data;
    } finally {
      setBusy(-1);
    }
  }

  /** The sentence in the URL, or the default example. */
  function text() {
    return ITT.params().get("text") || ITT.pageData.default_text;
  }

  /** Fill a <table> from rows of cells; a header row first when ``head`` is given. */
  function table(node, head, rows, rowHeaders) {
    const parts = [];
    if (head) {
      const thead = document.createElement("thead");
      const tr = document.createElement("tr");
      head.forEach((cell) => tr.appendChild(ITT.element("th", cell)));
      thead.appendChild(tr);
      parts.push(thead);
    }
    const tbody = document.createElement("tbody");
    rows.forEach((row) => {
      const tr = document.createElement("tr");
      row.forEach((cell, index) => {
        const th = rowHeaders && index === 0;
        const node = ITT.element(th ? "th" : "td", cell);
        if (th) node.setAttribute("scope", "row");
        tr.appendChild(node);
      });
      tbody.appendChild(tr);
    });
    parts.push(tbody);
    node.replaceChildren(...parts);
  }

  /** Draw a figure if there is one, else leave a short note (e.g. no training history). */
  function plotOrNote(id, figure, note) {
    const node = document.getElementById(id);
    if (figure) {
      ITT.plot(node, figure);
    } else {
      node.replaceChildren(ITT.element("p", note, "muted"));
    }
  }

  function number(value) {
    return Number(value).toLocaleString(document.documentElement.lang);
  }

  return { get, text, table, plotOrNote, number, setBusy };
})();
