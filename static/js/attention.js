/* The attention page: a grid of every head, one enlarged head, and one query row stage by stage. */
"use strict";

(() => {
  const KINDS = ["encoder", "decoder_self", "cross"];
  let data = null;
  let selected = null; // {kind, layer, head}

  function selectionFromURL() {
    const query = ITT.params();
    const kind = KINDS.includes(query.get("kind")) ? query.get("kind") : "encoder";
    return {
      kind,
      layer: Math.max(0, Number.parseInt(query.get("layer") || "0", 10) || 0),
      head: Math.max(0, Number.parseInt(query.get("head") || "0", 10) || 0),
      query: Math.max(0, Number.parseInt(query.get("q") || "0", 10) || 0),
    };
  }

  function cellLabel(kind, layer, head) {
    return ITT.t("attention.open", {
      kind: ITT.t(`attention.${kind}`), layer: layer + 1, head: head + 1,
    });
  }

  function drawGrid() {
    for (const kind of KINDS) {
      const grid = document.querySelector(`.head-grid[data-kind="${kind}"]`);
      const buttons = data.kinds[kind].map((cell) => {
        const button = document.createElement("button");
        button.type = "button";
        button.className = "head-cell";
        button.dataset.kind = kind;
        button.dataset.layer = cell.layer;
        button.dataset.head = cell.head;
        // named by what it shows ("L1 · H1") and then what it does, with no aria-label that could
        // leave the visible words out (WCAG 2.5.3); the thumbnail is a picture, not part of the name
        button.append(ITT.element("span", `L${cell.layer + 1} · H${cell.head + 1}`, "cell-label"),
          ITT.element("span", ` ${cellLabel(kind, cell.layer, cell.head)}`, "visually-hidden"));
        const thumb = ITT.element("div", null, "thumb");
        thumb.setAttribute("aria-hidden", "true");
        button.appendChild(thumb);
        button.addEventListener("click", () => select({ kind, layer: cell.layer, head: cell.head, query: 0 }, true)
          .catch((error) => ITT.showError(error.message)));
        return [button, thumb, cell];
      });
      grid.replaceChildren(...buttons.map(([button]) => button));
      for (const [, thumb, cell] of buttons) drawThumbnail(thumb, cell.figure);
    }
  }

  /** One head in its grid cell: its weights one pixel each (rows the queries, columns the keys)
      on a canvas the stylesheet stretches over the cell with every pixel kept square-edged,
      coloured as the enlarged heatmap colours them (the sequential scale, 0 → 1, ITT.palette),
      between two axis lines titled in a word each (query ↓, key →). Dozens of heads are drawn in
      a few milliseconds: no chart library per thumbnail. */
  function drawThumbnail(thumb, figure) {
    const z = figure.data[0].z;
    const rows = z.length;
    const cols = rows ? z[0].length : 0;
    const canvas = document.createElement("canvas");
    canvas.width = Math.max(1, cols);
    canvas.height = Math.max(1, rows);
    const context = canvas.getContext("2d");
    const image = context.createImageData(canvas.width, canvas.height);
    z.forEach((row, r) => row.forEach((weight, c) => {
      if (weight === null) return; // no weight: left transparent, as Plotly leaves a gap
      const px = 4 * (r * cols + c);
      image.data.set(ITT.palette.sequential(weight), px);
      image.data[px + 3] = 255;
    }));
    context.putImageData(image, 0, 0);
    const arrow = ITT.element("span", "↓", "upright"); // points down the rows in vertical text
    const rowsTitle = ITT.element("span", `${ITT.t("attention.thumb_rows")} `, "ytitle");
    rowsTitle.append(arrow);
    thumb.replaceChildren(canvas, rowsTitle, ITT.element("span", `${ITT.t("attention.thumb_cols")} →`, "xtitle"));
  }

  function findCell(choice) {
    return data.kinds[choice.kind].find((c) => c.layer === choice.layer && c.head === choice.head);
  }

  /** A tapped head brings the chart it changed into view: on a phone the enlarged head sits
      below every grid, off-screen (a wide screen keeps it beside them, sticky, and does not move). */
  function revealEnlarged() {
    const card = document.querySelector(".enlarged");
    const chart = document.getElementById("enlarged").getBoundingClientRect();
    const header = document.querySelector("header.site")?.getBoundingClientRect().bottom ?? 0;
    if (chart.top < Math.max(0, header) || chart.bottom > window.innerHeight) {
      card.scrollIntoView({ block: "start" });
    }
  }

  async function select(choice, userAction) {
    if (!findCell(choice)) choice = { kind: choice.kind, layer: 0, head: 0, query: 0 };
    selected = choice;
    document.querySelectorAll(".head-cell").forEach((button) => {
      const on = button.dataset.kind === choice.kind && Number(button.dataset.layer) === choice.layer
        && Number(button.dataset.head) === choice.head;
      button.setAttribute("aria-pressed", on ? "true" : "false");
    });
    const cell = findCell(choice);
    document.getElementById("enlarged-label").textContent =
      `${ITT.t(`attention.${choice.kind}`)} · ${ITT.t("word.layer", { n: choice.layer + 1 })} · ${ITT.t("word.head", { n: choice.head + 1 })}`;
    ITT.plot(document.getElementById("enlarged"), cell.figure);
    markImportance(choice);
    if (userAction) {
      revealEnlarged();
      const query = ITT.params();
      query.set("kind", choice.kind);
      query.set("layer", choice.layer);
      query.set("head", choice.head);
      query.delete("q");
      ITT.setURL(query, true); // a new history entry: Back returns to the previous head
    }
    // decoder rows read one token and produce the next: labelled "<bos> → 猫" (the real tokens)
    const tokens = choice.kind === "encoder" ? data.source_tokens : data.decoder_rows;
    const select = document.getElementById("query-select");
    select.replaceChildren(...tokens.map((token, index) => {
      const option = ITT.element("option", `${index + 1}: ${token}`);
      option.value = index;
      return option;
    }));
    select.value = Math.min(choice.query, tokens.length - 1);
    await drawStages();
  }

  async function drawStages() {
    const query = Number(document.getElementById("query-select").value || 0);
    const body = ITT.requestFromURL({
      kind: selected.kind, layer: selected.layer, head: selected.head, query,
    });
    const answer = await ITT.api("/api/figures/attention-detail", body);
    const detail = answer.detail;
    document.getElementById("stage-scale-title").textContent =
      ITT.t("stage.scale", { root: Math.sqrt(detail.d_k).toFixed(3) });
    for (const stage of ["raw", "scaled", "masked", "weights"]) {
      ITT.plot(document.getElementById(`stage-${stage}`), answer.figures[stage]);
    }
    const hidden = detail.masked[query].filter((value) => value === null).length;
    document.getElementById("mask-note").textContent = hidden
      ? ITT.t("stage.mask_some", { n: hidden, total: detail.masked[query].length })
      : ITT.t(`stage.mask_none_${selected.kind}`);
    drawWeightedSum(detail, query);
  }

  function drawWeightedSum(detail, query) {
    const dims = Math.min(6, detail.v[0].length);
    const table = document.getElementById("weighted-sum");
    const head = document.createElement("tr");
    head.appendChild(ITT.element("th", ITT.t("stage.table_key")));
    head.appendChild(ITT.element("th", ITT.t("word.weight")));
    for (let d = 0; d < dims; d += 1) head.appendChild(ITT.element("th", `v[${d}]`));
    const rows = [head];
    detail.key_tokens.forEach((token, k) => {
      const weight = detail.weights[query][k];
      const row = document.createElement("tr");
      row.appendChild(ITT.element("th", token));
      row.appendChild(ITT.element("td", weight.toFixed(4)));
      for (let d = 0; d < dims; d += 1) row.appendChild(ITT.element("td", detail.v[k][d].toFixed(3)));
      if (weight === 0) row.className = "blocked";
      rows.push(row);
    });
    const total = document.createElement("tr");
    total.className = "total";
    total.appendChild(ITT.element("th", `${ITT.t("stage.output")} = Σ ${ITT.t("word.weight")} × v`));
    total.appendChild(ITT.element("td", "1"));
    for (let d = 0; d < dims; d += 1) total.appendChild(ITT.element("td", detail.output[query][d].toFixed(3)));
    rows.push(total);
    table.replaceChildren(...rows);
  }

  // -- how much each head matters (/api/ablation/importance, drawn by importance.js) -----------

  const PART_KIND = { encoder: "enc", decoder_self: "dec", cross: "cross" };

  /** The importance grid marks the enlarged head; its link switches that head off on /ablation. */
  function markImportance(choice) {
    const name = `${PART_KIND[choice.kind]}.${choice.layer + 1}.${choice.head + 1}`;
    document.querySelectorAll(".importance-grid .head-switch").forEach((button) => {
      button.setAttribute("aria-pressed", button.dataset.part === name ? "true" : "false");
    });
    const query = ITT.carriedQuery();
    query.set("off", name);
    document.getElementById("ablate-link").href = `/ablation?${query}`;
  }

  async function loadImportance() {
    try {
      ITTImportance.fill(await ITT.api("/api/ablation/importance", ITT.requestFromURL()), null);
    } catch (error) {
      document.getElementById("importance-legend").textContent =
        ITT.t("importance.failed", { message: error.message });
    }
  }

  document.querySelectorAll(".importance-grid .head-switch").forEach((button) => {
    const [kind, layer, head] = button.dataset.part.split(".");
    const choice = {
      kind: Object.keys(PART_KIND).find((name) => PART_KIND[name] === kind),
      layer: Number(layer) - 1, head: Number(head) - 1, query: 0,
    };
    button.addEventListener("click", () => {
      if (!data) return;
      select(choice, true).catch((error) => ITT.showError(error.message));
    });
  });

  /** The decoder cards' example row, from this translation's own first row ("<bos> → 我"). */
  function describeFirstRow() {
    const row = data.decoder_rows[0] ?? "";
    const read = data.decoder_input[0] ?? "";
    const arrow = `${read} → `; // the row's label: what it reads → what it produces
    const chosen = row.startsWith(arrow) ? row.slice(arrow.length) : null;
    document.querySelectorAll(".row-example").forEach((span) => {
      span.textContent = chosen === null ? "" : ITT.t("attention.row_example", { row, read, chosen });
    });
  }

  async function load() {
    ITT.clearError();
    data = await ITT.api("/api/figures/attention", ITT.requestFromURL());
    drawGrid();
    describeFirstRow();
    const importance = loadImportance(); // beside the heatmaps; a failure leaves them be
    await select(selectionFromURL(), false);
    await importance;
  }

  document.getElementById("query-select").addEventListener("change", () => {
    const query = ITT.params();
    query.set("q", document.getElementById("query-select").value);
    ITT.setURL(query, false);
    selected.query = Number(document.getElementById("query-select").value);
    drawStages().catch((error) => ITT.showError(error.message));
  });
  ITT.start(load);
})();
