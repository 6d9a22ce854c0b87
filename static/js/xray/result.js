/* The translation, above the player (issue 26, item 5). Beam search with 4 beams scored higher
   than greedy decoding on the held-out test sets, so it is the translation shown first; the
   player below steps through greedy decoding by default (the simplest to follow), and its
   translation is the second line, marked when it is the same. When the player runs beam 4
   itself, the second line is greedy decoding's. Both come in the one view (``alternative``,
   app/pages/xray.py), so a saved x-ray shows them too; a file saved before carries only the
   player's. Text only through textContent. */

import { S } from "./state.js";
import { $, el, t } from "./dom.js";

/** The player's decoding in words: its strategy, its beam size, whether a prefix was forced. */
function playerLabel(req) {
  const strategy = req.strategy || "greedy";
  const size = Number(req.beam_size ?? 4);
  const label = strategy === "beam" ? t("xray.result.beam", { n: size })
    : t(strategy === "sample" ? "xray.result.sample" : "xray.result.greedy");
  return req.forced_prefix && req.forced_prefix.length ? t("xray.result.forced", { label }) : label;
}

/** One line: what decoding made it, whether the player steps through it, the Chinese. */
function line(label, translation, finished, { player = false, first = false, same = false } = {}) {
  const row = el("p", null, first ? "xr-result-line xr-result-first" : "xr-result-line");
  row.dataset.role = player ? "player" : "other";
  const name = player ? el("span", t("xray.result.player", { label }), "xr-result-label xr-result-player")
    : el("span", label, "xr-result-label");
  const text = el("span", translation + (finished ? "" : "…"), "xr-result-text");
  text.lang = "zh-CN";
  row.append(name, text);
  if (!finished) row.append(" ", el("span", t("xray.result.cut"), "xr-result-note"));
  if (same) row.append(" ", el("span", t("xray.result.same"), "xr-result-note"));
  return row;
}

/** Draw the box for the trace on screen and the view's ``alternative`` (null in older files). */
export function drawResult() {
  const box = $("xr-result");
  const lines = $("xr-result-lines");
  if (!S.trace || !S.req) { box.hidden = true; return; }
  const mine = { label: playerLabel(S.req), text: S.trace.translation, finished: S.trace.finished };
  const other = S.alternative;
  const rows = [];
  if (!other) {
    rows.push(line(mine.label, mine.text, mine.finished, { player: true, first: true }));
  } else {
    const otherLabel = other.strategy === "beam" ? t("xray.result.beam", { n: other.beam_size })
      : t("xray.result.greedy");
    const same = other.translation === mine.text && other.finished === mine.finished;
    if (other.strategy === "beam") { // beam 4 first, the player's second
      rows.push(line(otherLabel, other.translation, other.finished, { first: true }));
      rows.push(line(mine.label, mine.text, mine.finished, { player: true, same }));
    } else { // the player runs beam 4: it is first, greedy second
      rows.push(line(mine.label, mine.text, mine.finished, { player: true, first: true }));
      rows.push(line(otherLabel, other.translation, other.finished, { same }));
    }
  }
  lines.replaceChildren(...rows);
  box.hidden = false;
}
