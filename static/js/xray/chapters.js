/* Guided chapters on the live picture (issue 56, item 5): the seed documents' story in twelve
   chapters — tokens, embeddings and positions, self-attention, multi-head, Add & Norm, the
   feed-forward network, the encoder's memory, masked self-attention, cross-attention, linear +
   softmax, decoding strategies, the KV cache. Each chapter moves the player to the frame where its
   part computes (zooming into its layer), rings that part of the picture, says what it does with
   the learner's own sentence and numbers (read from the trace on screen, never a fixed example),
   and points at the next thing to click. The chapter is kept in the URL (?chapter=N, 1-based).
   A block is found by its kind in the view's layout (attention, Add & Norm, feed-forward, what an
   attention attends to), so no sublayer is named here. Text only through textContent. */

import { S } from "./state.js";
import { $, cfg, el, fixed, SIZES, t } from "./dom.js";
import { rowState } from "./frames.js";
import { zoomTo } from "./zoom.js";
import { comparedTranslation } from "./result.js";

let goTo = () => {};
let shown = 0; // the chapter on screen, 1-based; 0: none
let shownRow = null; // the row whose computing the open chapter explains (playing stops there)
const RINGED = "xr-ring";
const POINTED = "xr-point";

const pct = (w) => `${Math.round(w * 100)}%`;
const argmax = (row) => row.reduce((best, v, i) => (v > row[best] ? i : best), 0);

/** The rows of one layer in the model's order. */
function layerRows(side, layer) {
  return S.rows.filter((row) => row.side === side && row.layer === layer);
}

/** A layer's blocks by their kind in the view's layout (never by name): its self-attention, its
    cross-attention (a decoder layer's), its first Add & Norm, its feed-forward network. */
function blocksOf(side, layer) {
  const rows = layerRows(side, layer);
  const attention = rows.filter((row) => row.part === "attention");
  return { rows, self: attention.find((row) => row.attends === "self"),
    cross: attention.find((row) => row.attends === "cross"),
    norm: rows.find((row) => row.part === "add_norm"), ffn: rows.find((row) => row.part === "feed_forward") };
}

const rowByKey = (key) => S.rows.find((row) => row.key === key);
const rowOfKind = (side, part) => S.rows.find((row) => row.side === side && row.part === part);

/** An attention row's weights for this sentence, averaged over the heads: [query][key]. */
function meanWeights(row) {
  const layer = (row.side === "encoder" ? S.trace.encoder : S.trace.decoder)[row.layer];
  return layer[`${row.block}_mean`]; // the trace keeps each attention's mean under its name in the layout
}

/** The frame of time step ``step`` at which ``row`` computes (−1 when it never does). */
function frameOf(row, step) {
  return row ? S.frames.findIndex((frame) => frame.t === step && rowState(row, frame).active) : -1;
}

/** The decoding step the decoder's chapters show: the third character, or the last there is. */
const decStep = () => Math.max(1, Math.min(3, S.trace.steps.length));

/** What each chapter shows: {row, step, zoom, ring (elements), point (element), params}. */
const CHAPTERS = [
  () => { // 1 tokens
    const tokens = S.trace.source_tokens;
    const row = rowByKey("enc-tokens");
    return { row, step: 0, zoom: null, ring: [row.node], point: row.buttons && row.buttons[0],
      params: { n: tokens.length, tokens: tokens.join(" · "), v: SIZES.vocab_en ?? "?" } };
  },
  () => { // 2 embedding + position
    const row = rowOfKind("encoder", "embed");
    const first = S.trace.embeddings.encoder.sum[0] || [];
    return { row, step: 0, zoom: null, ring: [row.node], point: row.headButton,
      params: { d: cfg.d_model, root: fixed(Math.sqrt(cfg.d_model), 1), token: S.trace.source_tokens[0],
        values: first.slice(0, 3).map((v) => fixed(v, 2)).join(", ") } };
  },
  () => { // 3 self-attention
    const { self } = blocksOf("encoder", 0);
    const weights = meanWeights(self);
    const q = Math.min(1, weights.length - 1);
    const k = argmax(weights[q]);
    return { row: self, step: 0, zoom: "e-0", ring: [self.node], point: self.headButton,
      params: { q: S.trace.source_tokens[q], k: S.trace.source_tokens[k], w: pct(weights[q][k]), n: weights.length } };
  },
  () => { // 4 multi-head
    const { self } = blocksOf("encoder", 0);
    return { row: self, step: 0, zoom: "e-0", ring: [self.node], point: $("xr-head"),
      params: { h: cfg.n_heads, k: cfg.d_model / cfg.n_heads, d: cfg.d_model } };
  },
  () => { // 5 Add & Norm
    const { norm } = blocksOf("encoder", 0);
    return { row: norm, step: 0, zoom: "e-0", ring: [norm.node], point: norm.headButton,
      params: { d: cfg.d_model, m: fixed(norm.scale ?? 0, 2) } };
  },
  () => { // 6 feed-forward
    const { ffn } = blocksOf("encoder", 0);
    return { row: ffn, step: 0, zoom: "e-0", ring: [ffn.node], point: ffn.headButton,
      params: { d: cfg.d_model, ff: cfg.d_ff, act: cfg.activation } };
  },
  () => { // 7 the encoder's memory
    const rows = layerRows("encoder", cfg.n_encoder_layers - 1);
    const last = rows[rows.length - 1];
    const note = document.querySelector(".xr-memory-note");
    return { row: last, step: 0, zoom: null, ring: [note, last.node], point: note,
      params: { layers: cfg.n_encoder_layers, n: S.trace.source_tokens.length, d: cfg.d_model,
        dec: cfg.n_decoder_layers } };
  },
  () => { // 8 masked self-attention
    const step = decStep();
    const { self } = blocksOf("decoder", 0);
    const seen = S.trace.decoder_input.slice(0, step);
    return { row: self, step, zoom: "d-0", ring: [self.node], point: self.headButton,
      params: { t: step, cur: S.trace.decoder_input[step - 1], seen: seen.join(" · "), n: seen.length } };
  },
  () => { // 9 cross-attention
    const step = decStep();
    const { cross } = blocksOf("decoder", 0);
    const weights = meanWeights(cross)[step - 1];
    const k = argmax(weights);
    return { row: cross, step, zoom: "d-0", ring: [cross.node], point: cross.headButton,
      params: { t: step, cur: S.trace.decoder_input[step - 1], k: S.trace.source_tokens[k], w: pct(weights[k]) } };
  },
  () => { // 10 linear + softmax
    const step = decStep();
    const row = rowOfKind("decoder", "logits");
    const top = S.trace.steps[step - 1].top;
    return { row, step, zoom: null, ring: [row.node], point: row.headButton,
      params: { v: SIZES.vocab_zh ?? "?", d: cfg.d_model, c1: top[0].token, p1: fixed(top[0].prob, 3),
        c2: top[1] ? top[1].token : "–", p2: top[1] ? fixed(top[1].prob, 3) : "–",
        chosen: S.trace.steps[step - 1].token } };
  },
  () => { // 11 decoding strategies
    const row = rowOfKind("decoder", "logits");
    // the player's translation and the other decoding's, which this chapter asks for (issue 75)
    const other = S.alternative;
    if (!other) comparedTranslation().then(() => { if (shown === 11 && S.alternative) showChapter(11); });
    const by = (strategy) => (S.req.strategy === strategy ? S.trace.translation
      : (other && other.strategy === strategy ? other.translation : null));
    const [greedy, beam] = [by("greedy"), by("beam")];
    const link = $("xr-beam-link");
    return { row, step: S.trace.steps.length, zoom: null, ring: [$("xr-result"), $("xr-sampling")].filter(Boolean),
      point: link || $("xr-decode-all"),
      params: { greedy: greedy ?? "…", beam: beam ?? "…",
        same: greedy === null || beam === null ? "…" : t(beam === greedy ? "xray.ch.11.same" : "xray.ch.11.differ") } };
  },
  () => { // 12 the KV cache
    const step = Math.max(1, S.trace.steps.length);
    const { self } = blocksOf("decoder", 0);
    const kept = step - 1;
    const link = $("xr-kv-link");
    link.href = `/kv-cache?${ITT.carriedQuery()}`;
    return { row: self, step, zoom: "d-0", ring: [self.node], point: link,
      params: { t: step, kept, d: cfg.d_model, layers: cfg.n_decoder_layers,
        saved: kept * 2 * cfg.d_model * cfg.n_decoder_layers } };
  },
];

export const CHAPTER_COUNT = CHAPTERS.length;

function clearMarks() {
  document.querySelectorAll(`.${RINGED}`).forEach((node) => node.classList.remove(RINGED));
  document.querySelectorAll(`.${POINTED}`).forEach((node) => node.classList.remove(POINTED));
}

function keepInURL(n) {
  const query = ITT.params();
  if (n) query.set("chapter", String(n)); else query.delete("chapter");
  ITT.setURL(query, false);
}

/** Scroll the chapter's ringed part into view: below the sticky player (and its card) when it
    comes after the player on the page, below the site header when it comes before. */
function reveal(node) {
  if (!node || !node.getClientRects().length) return;
  const player = $("xr-player");
  const top = parseFloat(getComputedStyle(document.documentElement).getPropertyValue("--xr-top")) || 0;
  const after = Boolean(player.compareDocumentPosition(node) & Node.DOCUMENT_POSITION_FOLLOWING)
    && !player.contains(node);
  const from = after ? top + player.getBoundingClientRect().height + 8 : top + 8;
  const rect = node.getBoundingClientRect();
  if (rect.top >= from - 1 && (rect.bottom <= window.innerHeight || rect.top <= from + 40)) return;
  window.scrollBy({ top: rect.top - from, behavior: "auto" });
}

/** Show chapter ``n`` (1-based) on the picture: move, ring, say, point. 0 closes the guide. */
export function showChapter(n) {
  clearMarks();
  const card = $("xr-chapter");
  shown = Number.isInteger(n) && n >= 1 && n <= CHAPTERS.length && S.trace ? n : 0;
  keepInURL(shown);
  for (const item of document.querySelectorAll("#xr-chapter-list button")) {
    if (Number(item.dataset.chapter) === shown) item.setAttribute("aria-current", "step");
    else item.removeAttribute("aria-current");
  }
  $("xr-chapters-start").setAttribute("aria-expanded", shown ? "true" : "false");
  if (!shown) { card.hidden = true; shownRow = null; return; }
  const chapter = CHAPTERS[shown - 1]();
  shownRow = chapter.row || null;
  const frame = frameOf(chapter.row, chapter.step);
  const ringed = chapter.ring.filter(Boolean);
  const ring = () => {
    ringed.forEach((node) => node.classList.add(RINGED));
    if (chapter.point) chapter.point.classList.add(POINTED);
  };
  $("xr-chapter-count").textContent = t("xray.ch.of", { n: shown, total: CHAPTERS.length });
  $("xr-chapter-title").textContent = t(`xray.ch.${shown}.title`);
  $("xr-chapter-text").textContent = t(`xray.ch.${shown}.text`, chapter.params);
  $("xr-chapter-point").textContent = t(`xray.ch.${shown}.point`, chapter.params);
  $("xr-chapter-prev").disabled = shown === 1;
  $("xr-chapter-next").textContent = shown === CHAPTERS.length ? t("xray.ch.done") : t("xray.ch.next");
  $("xr-kv-link").hidden = shown !== CHAPTERS.length;
  $("xr-chapter-body").scrollTop = 0;
  card.hidden = false;
  card.dataset.chapter = String(shown);
  if (frame >= 0) goTo(frame);
  const current = item(); // the open chapter's number in view where the list scrolls (a phone)
  const list = $("xr-chapter-list");
  if (current && list.scrollWidth > list.clientWidth) {
    list.scrollLeft = current.offsetLeft - list.offsetLeft - (list.clientWidth - current.offsetWidth) / 2;
  }
  if (chapter.zoom !== undefined) zoomTo(chapter.zoom, { then: () => { ring(); reveal(ringed[0]); } });
  ring();
  reveal(ringed[0]);
}

/** The open chapter's button in the card's list. */
const item = () => document.querySelector(`#xr-chapter-list button[data-chapter="${shown}"]`);

/** The chapters' start button above the picture, the card's list and buttons, and the URL's
    chapter once drawn; ``go`` moves the player to a frame. */
export function wireChapters(go) {
  goTo = go;
  const list = $("xr-chapter-list");
  list.replaceChildren(...CHAPTERS.map((_, i) => {
    const li = el("li");
    const title = t(`xray.ch.${i + 1}.title`);
    const button = el("button", String(i + 1), "xr-chapter-item");
    button.type = "button";
    button.dataset.chapter = String(i + 1);
    button.title = title;
    button.setAttribute("aria-label", t("xray.ch.go", { n: i + 1, title }));
    button.addEventListener("click", () => showChapter(i + 1));
    li.append(button);
    return li;
  }));
  $("xr-chapters-start").addEventListener("click", () => showChapter(1));
  $("xr-chapter-prev").addEventListener("click", () => showChapter(shown - 1));
  $("xr-chapter-next").addEventListener("click", () => showChapter(shown === CHAPTERS.length ? 0 : shown + 1));
  $("xr-chapter-close").addEventListener("click", () => showChapter(0));
}

/** A new drawing: open the URL's chapter (or none). */
export function chapterFromURL() {
  const n = Number.parseInt(ITT.params().get("chapter") || "", 10);
  if (Number.isInteger(n) && n >= 1 && n <= CHAPTERS.length) showChapter(n);
  else { shown = 0; shownRow = null; $("xr-chapter").hidden = true; }
}

/** The chapter on screen, for the tests and the player (0: none). */
export const chapterShown = () => shown;

/** The row whose computing the open chapter explains (null: no chapter open). */
export const chapterRow = () => (shown ? shownRow : null);
