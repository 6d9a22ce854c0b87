/* Shared helpers for every page: strings, URL state, the one API helper and its busy counter,
   Plotly, tables.
   Pages never put user text into innerHTML: everything goes through textContent. */
"use strict";

const ITT = (() => {
  const strings = JSON.parse(document.getElementById("i18n").textContent);
  const pageData = JSON.parse(document.getElementById("page-data").textContent);
  // The decoding strategies, the options each reads and every option's range: the model's own
  // (DecodingOptions.contract(), in the page as JSON), never listed here.
  const decoding = JSON.parse(document.getElementById("decoding").textContent);
  // URL parameters that describe a translation (carried from page to page).
  const FIELDS = {
    text: "string", strategy: "string",
    ...Object.fromEntries(Object.keys(decoding.options).map((name) => [name, "number"])),
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
    const reads = decoding.reads[body.strategy] || decoding.reads[decoding.default];
    for (const name of Object.keys(decoding.options)) if (!reads.includes(name)) delete body[name];
    const forced = query.getAll("forced");
    if (forced.length) body.forced_prefix = forced;
    return Object.assign(body, extra || {});
  }

  /** The URL's translation settings (those set) and forced prefix, for a link to another page. */
  function carriedQuery() {
    const query = params();
    const carried = new URLSearchParams();
    for (const name of Object.keys(FIELDS)) {
      if (query.get(name)) carried.set(name, query.get(name));
    }
    for (const value of query.getAll("forced")) carried.append("forced", value);
    return carried;
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

  // The query the page last loaded or wrote itself. Going to a #fragment (a skip link) also fires
  // popstate; with the query unchanged there is nothing to load, and reloading would redraw the
  // very element the reader just jumped to.
  let shownSearch = null;
  let rerun = null;

  function setURL(query, push) {
    const search = query.toString();
    const url = window.location.pathname + (search ? `?${search}` : "") + window.location.hash;
    if (push) window.history.pushState(null, "", url);
    else window.history.replaceState(null, "", url);
    shownSearch = window.location.search;
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

  const fixesGiven = new Set(); // the fixes inputFix wrote, with their numbers

  function showError(message) {
    const box = document.getElementById("error");
    // a refused input says what to change; anything else is the server's own message
    const fix = [...fixesGiven].some((given) => String(message).includes(given));
    const colon = document.documentElement.lang.startsWith("zh") ? "：" : ": ";
    box.textContent = `${t(fix ? "error.input_title" : "error.title")}${colon}${message}`;
    box.hidden = false;
  }

  /* What the reader should do about a refused input, in their language and without field
     names: the server's 422 names the field and the rule (in English, for the API's users). */
  const INPUT_FIXES = [
    ["text", /English/i, "error.fix.text_english"],
    ["text", /tokens long/i, "error.fix.text_tokens"],
    ["text", /at most|too long/i, "error.fix.text_long"],
    ["text", /at least|empty|required|missing/i, "error.fix.text_empty"],
    ["reference", /Chinese|at least|required|missing/i, "error.fix.reference"],
    ["reference", /at most|too long/i, "error.fix.reference_long"],
    ["forced_prefix", /./, "error.fix.forced"],
  ];

  function inputFix(errors) {
    const fixes = errors.map((error) => {
      const match = INPUT_FIXES.find(([field, rule]) => error.field === field && rule.test(error.message || ""));
      if (!match) return null;
      // "text is 150 tokens long; the limit is 128 tokens: …": how much to cut
      const [n, limit] = (String(error.message).match(/\d+/g) || []).map(Number);
      const fix = t(match[2], n > limit ? { cut: n - limit, limit } : {});
      fixesGiven.add(fix);
      return fix;
    });
    return fixes.every(Boolean) ? [...new Set(fixes)].join(" ") : null;
  }

  function clearError() {
    const box = document.getElementById("error");
    box.textContent = "";
    box.hidden = true;
  }

  /* Answers by request. The latest JSON answers the server gave are kept as text, so that
     saved_trace.js can write what the page drew to a file; while a saved file is open,
     ``answers.replay`` (saved_trace.js's) answers instead of the server and a request it does not
     hold is refused, never sent. */
  const KEPT = { answers: 60, chars: 32 * 1024 * 1024 }; // a long sentence's answers are MBs
  const answers = { kept: new Map(), replay: null };
  let keptChars = 0;

  function keep(key, body) {
    if (answers.kept.has(key)) keptChars -= answers.kept.get(key).length;
    answers.kept.delete(key);
    answers.kept.set(key, body);
    keptChars += body.length;
    while (answers.kept.size > KEPT.answers || (keptChars > KEPT.chars && answers.kept.size > 1)) {
      const [oldest, text] = answers.kept.entries().next().value;
      answers.kept.delete(oldest);
      keptChars -= text.length;
    }
  }

  /** JSON with every object's keys sorted: one text for one value. */
  function canonical(value) {
    if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
    if (value && typeof value === "object") {
      return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
    }
    return JSON.stringify(value);
  }

  /** A request's name: its path, its query sorted and its JSON body with sorted keys. */
  function requestKey(url, init) {
    const [path, search] = String(url).split("?");
    const query = new URLSearchParams(search || "");
    query.sort();
    const body = init && typeof init.body === "string" ? canonical(JSON.parse(init.body)) : "";
    return `${path}?${query}|${body}`;
  }

  /** The one way to the server: fetch JSON (or, when the server answers
      application/octet-stream, the bytes as an ArrayBuffer), count the request as busy, reject
      with the server's message. */
  async function request(url, init) {
    const key = requestKey(url, init);
    const replay = answers.replay;
    if (replay && replay.holds()) {
      if (!replay.answers.has(key)) throw new Error(t("saved.not_in_file"));
      return JSON.parse(replay.answers.get(key));
    }
    setBusy(+1);
    try {
      let response;
      try {
        response = await fetch(url, init);
      } catch (error) {
        throw new Error(t("error.network"));
      }
      const binary = response.ok && (response.headers.get("Content-Type") || "").startsWith("application/octet-stream");
      if (binary) return await response.arrayBuffer();
      const body = await response.text().catch(() => "");
      let data = {};
      try { data = JSON.parse(body); } catch { /* not JSON: the status says what happened */ }
      if (!response.ok) {
        const fix = response.status === 422 && Array.isArray(data.errors) ? inputFix(data.errors) : null;
        throw new Error(fix || data.message || `${response.status}`);
      }
      keep(key, body);
      return data;
    } finally {
      setBusy(-1);
    }
  }

  /** POST a JSON body. */
  function api(path, body) {
    return request(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  }

  /** GET with query parameters (empty values left out). */
  function get(path, params) {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(params || {})) {
      if (value !== undefined && value !== null && value !== "") query.set(name, value);
    }
    return request(`${path}?${query}`, { headers: { Accept: "application/json" } });
  }

  // Every chart's mode bar keeps two buttons: download as PNG, and as SVG (vector, for slides and
  // print); no Plotly logo, no cloud links. Both are drawn in the browser: nothing leaves it.
  const PLOT_CONFIG = { displaylogo: false, responsive: true };
  const SVG_ICON = { width: 16, height: 16, path: "M2 1h9l3 3v11H2zM4 9l2 4 2-4M9 9h3v4H9v-2h2" };

  /** The chart's frame (``frame``) if it has one yet: its parent, or its scrolling box's. */
  function frameOf(node) {
    let parent = node.parentElement;
    if (parent && parent.classList.contains("plot-scroll")) parent = parent.parentElement;
    return parent && parent.classList.contains("plot-frame") ? parent : null;
  }

  /** A file name from the chart's caption (letters and digits, any script), else its id. */
  function imageName(node) {
    const box = frameOf(node);
    const caption = box && box.querySelector(".plot-title");
    const words = ((caption && caption.textContent) || node.id || "figure").match(/[\p{L}\p{N}]+/gu);
    return (words || ["figure"]).slice(0, 8).join("-");
  }

  function modeBar(node) {
    const svg = {
      name: "toSVG", title: t("plot.svg"), icon: SVG_ICON,
      click: (gd) => window.Plotly.downloadImage(gd, { format: "svg", filename: imageName(gd) }),
    };
    return { modeBarButtons: [["toImage", svg]], toImageButtonOptions: { format: "png", filename: imageName(node) } };
  }

  /** The chart's frame: a wrapper holding a caption above the chart, made once per chart (the
      chart may sit in a box of its own that scrolls sideways, ``scrolling``). */
  function frame(node) {
    let parent = frameOf(node);
    if (!parent) {
      const wrapper = document.createElement("div");
      wrapper.className = "plot-frame";
      const inner = node.parentElement.classList.contains("plot-scroll") ? node.parentElement : node;
      inner.replaceWith(wrapper);
      wrapper.append(element("p", null, "plot-title"), inner);
      parent = wrapper;
    }
    return parent;
  }

  /** A figure's layout made to fit any screen: the title becomes an HTML caption above the chart
      (it wraps on a phone instead of being clipped, and no toolbar covers it), and a horizontal
      legend sits above the plot area at the left, where Plotly makes room for it. */
  function fitted(node, layout) {
    const out = Object.assign({}, layout);
    const heading = out.title && out.title.text;
    if (heading || frameOf(node)) {
      const caption = frame(node).querySelector(".plot-title");
      // the title is Plotly's little HTML (app/plots.plotly_text escapes a literal "<bos>"): drop
      // its tags, then undo the three escapes, so the caption reads "<bos>", not "&lt;bos&gt;"
      caption.textContent = (heading || "").replace(/<br\s*\/?>/gi, " ").replace(/<[^>]*>/g, "")
        .replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
      caption.hidden = !heading;
      out.title = { text: "" };
      out.margin = Object.assign({}, out.margin, { t: Math.min((out.margin || {}).t ?? 16, 16) });
    }
    if (out.legend && out.legend.orientation === "h" && out.showlegend !== false) {
      out.legend = Object.assign({}, out.legend, { x: 0, xanchor: "left", y: 1.02, yanchor: "bottom" });
    }
    return out;
  }

  // On a phone a long page folds its secondary sections (data-fold-phone: open on a wide screen),
  // so no page runs for more than a few screens before its first fold; a #fragment still opens
  // the fold it leads into.
  if (window.matchMedia("(max-width: 600px)").matches) {
    let target = null;
    try { // a malformed "%" in the address is no fragment, not an error
      target = location.hash ? document.getElementById(decodeURIComponent(location.hash.slice(1))) : null;
    } catch (error) { target = null; }
    document.querySelectorAll("details[data-fold-phone]").forEach((details) => {
      if (!(target && details.contains(target))) details.open = false;
    });
  }

  // Wide tables of a few rows stack on a phone: each cell carries its column's heading
  // (data-label), and the phone's stylesheet draws every row as a small card of "heading: value"
  // lines instead of a table that scrolls sideways. Tables are filled by the pages' scripts: label them whenever
  // their rows change.
  const PHONE = window.matchMedia("(max-width: 600px)");
  function labelCells(table) {
    const head = table.tHead && table.tHead.rows[0];
    if (!head || head.cells.length < 3) return;
    const box = table.parentElement;
    // only a table still wider than the phone (after the phone's smaller type) is stacked
    if (!table.classList.contains("stack-on-phone")) {
      // a long table (a ranking, a grid of heads) keeps its columns: as cards it would be screens long
      const rows = [...table.tBodies].reduce((n, body) => n + body.rows.length, 0);
      if (!PHONE.matches || rows > 8 || box.scrollWidth <= box.clientWidth + 2) return;
      table.classList.add("stack-on-phone");
    }
    const labels = [...head.cells].map((cell) => cell.textContent.trim());
    for (const body of table.tBodies) {
      for (const row of body.rows) {
        [...row.cells].forEach((cell, i) => {
          if (labels[i] && cell.dataset.label !== labels[i]) cell.dataset.label = labels[i];
        });
      }
    }
  }
  // a table that still scrolls sideways can be reached and scrolled from the keyboard
  function focusable(table) {
    const box = table.parentElement;
    if (box.scrollWidth > box.clientWidth + 2) box.tabIndex = 0; else box.removeAttribute("tabindex");
  }
  document.querySelectorAll(".table-scroll > table").forEach((table) => {
    labelCells(table);
    focusable(table);
    new MutationObserver(() => { labelCells(table); focusable(table); })
      .observe(table, { childList: true, subtree: true });
  });

  // A chart whose box sits in a closed <details> (a folded section of a long page, or one folded
  // on a phone) is drawn when its fold opens, not before: a fold nobody opens costs the page no
  // drawing, and the chart is drawn to the width it will have. One drawn while its fold was open
  // and shown again is redrawn to its real width. A chart waiting for its fold says so
  // (data-waiting="fold"). "toggle" does not bubble: listen while it is captured.
  const waiting = new Map(); // chart node → [figure, config] of its latest plot() while folded
  document.addEventListener("toggle", (event) => {
    const details = event.target;
    if (!(details instanceof HTMLDetailsElement) || !details.open || !window.Plotly) return;
    const drawn = new Set();
    for (const [node, [figure, config]] of waiting) {
      if (!node.isConnected) waiting.delete(node); // its page part was replaced meanwhile
      else if (details.contains(node)) { plot(node, figure, config); drawn.add(node); }
    }
    details.querySelectorAll(".js-plotly-plot").forEach((node) => {
      if (!drawn.has(node) && node.getClientRects().length) window.Plotly.Plots.resize(node);
    });
  }, true);

  /** A chart that needs ``minWidth`` px to stay readable (a column per token, each cell labelled)
      gets at least that width, in a box of its own that scrolls sideways when the screen is
      narrower, so the cells' words never overlap and the page itself does not scroll sideways;
      the box is reachable from the keyboard while it scrolls. */
  function scrolling(node, minWidth) {
    let box = node.parentElement;
    if (!box.classList.contains("plot-scroll")) {
      box = element("div", null, "plot-scroll");
      node.replaceWith(box);
      box.append(node);
    }
    node.style.minWidth = `${minWidth}px`;
    if (box.scrollWidth > box.clientWidth + 2) box.tabIndex = 0; else box.removeAttribute("tabindex");
  }

  function plot(node, figure, config) {
    const layout = fitted(node, figure.layout); // first: the caption names the downloads
    if (node.closest("details:not([open])")) { // folded: drawn when the fold opens
      waiting.set(node, [figure, config]);
      node.dataset.waiting = "fold";
      return Promise.resolve(node);
    }
    waiting.delete(node);
    delete node.dataset.waiting;
    const minWidth = layout.meta && layout.meta.min_width;
    if (minWidth) scrolling(node, minWidth);
    const options = Object.assign({}, PLOT_CONFIG, modeBar(node), config || {});
    return window.Plotly.react(node, figure.data, layout, options);
  }

  /** Draw a figure if there is one, else leave a short note (e.g. no training history). */
  function plotOrNote(id, figure, note) {
    const node = document.getElementById(id);
    if (figure) {
      plot(node, figure);
    } else {
      node.replaceChildren(element("p", note, "muted"));
    }
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

  /** Fill a <table> from rows of cells; a header row first when ``head`` is given. */
  function table(node, head, rows, rowHeaders) {
    const parts = [];
    if (head) {
      const thead = document.createElement("thead");
      const tr = document.createElement("tr");
      head.forEach((cell) => tr.appendChild(element("th", cell)));
      thead.appendChild(tr);
      parts.push(thead);
    }
    const tbody = document.createElement("tbody");
    rows.forEach((row) => {
      const tr = document.createElement("tr");
      row.forEach((cell, index) => {
        const th = rowHeaders && index === 0;
        const cellNode = element(th ? "th" : "td", cell);
        if (th) cellNode.setAttribute("scope", "row");
        tr.appendChild(cellNode);
      });
      tbody.appendChild(tr);
    });
    parts.push(tbody);
    node.replaceChildren(...parts);
  }

  function number(value) {
    return Number(value).toLocaleString(document.documentElement.lang);
  }

  /** The sentence in the URL, or the default example. */
  function text() {
    return params().get("text") || pageData.default_text;
  }

  /** Run ``load`` now and whenever the URL changes through history navigation. */
  function start(load) {
    syncLinks();
    // the sentence box already says the model cannot take this sentence (app/layout.py's
    // refusal, with how much to cut): nothing is sent
    const refused = document.getElementById("text-refused") !== null;
    rerun = () => {
      shownSearch = window.location.search;
      if (refused) return Promise.resolve();
      return load().catch((error) => showError(error.message));
    };
    window.addEventListener("popstate", () => {
      if (window.location.search !== shownSearch) rerun();
    });
    rerun();
    return rerun;
  }

  /** Load the page again for the URL it shows. */
  function reload() {
    return rerun();
  }

  /** Go to a new URL of this page and load it, as going back or forward in history would. */
  function visit(query) {
    setURL(query, true);
    return rerun();
  }

  return {
    t, params, text, requestFromURL, carriedQuery, setURL, syncLinks, api, get, plot, plotOrNote, chips,
    element, table, number, start, visit, reload, showError, clearError, pageData, decoding, answers,
    requestKey, canonical,
  };
})();
