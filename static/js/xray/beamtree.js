/* Beam search as a lineage tree: every hypothesis of every step, the chosen path in orange, and
   the ended hypotheses ranked by their length-penalised score (the ranking is beam.js's). */

import { S } from "./state.js";
import { $, el, fixed, svg, t } from "./dom.js";
import { beamHypotheses } from "./beam.js";

export function drawBeam() {
  const box = $("xr-beam");
  const nodes = S.trace.beam || [];
  if (!nodes.length) { box.hidden = true; return; }
  box.hidden = false;
  const alpha = S.xr.length_penalty;
  $("xr-beam-help").textContent = t("xray.beam_help", { k: S.trace.options.beam_size, a: alpha });
  const byStep = new Map();
  for (const node of nodes) {
    if (!byStep.has(node.step)) byStep.set(node.step, []);
    byStep.get(node.step).push(node);
  }
  const widest = Math.max(...[...byStep.values()].map((list) => list.length));
  const colW = 64;
  const rowH = 46;
  const width = Math.max(widest * colW, 200);
  const steps = Math.max(...nodes.map((n) => n.step)) + 1;
  const height = steps * rowH + 10;
  const pos = new Map();
  const order = new Map();
  for (const step of [...byStep.keys()].sort((a, b) => a - b)) {
    const list = byStep.get(step);
    list.sort((a, b) => (order.get(a.parent) ?? 0) - (order.get(b.parent) ?? 0) || b.score - a.score);
    list.forEach((node, i) => order.set(node.id, i));
  }
  for (const [step, list] of byStep) {
    const offset = (width - list.length * colW) / 2;
    list.forEach((node, i) => pos.set(node.id, [offset + (i + 0.5) * colW, 18 + step * rowH]));
  }
  const root = $("xr-beam-svg");
  root.setAttribute("viewBox", `0 0 ${width} ${height}`);
  root.style.maxWidth = `${width * 1.4}px`;
  const parts = [];
  for (const node of nodes) {
    if (node.parent < 0) continue;
    const [x1, y1] = pos.get(node.parent);
    const [x2, y2] = pos.get(node.id);
    parts.push(svg("line", { x1, y1: y1 + 12, x2, y2: y2 - 14, stroke: node.selected ? "#e69f00" : "#9aa3ae",
      "stroke-width": node.selected ? 3 : 1.2 }));
  }
  for (const node of nodes) {
    const [x, y] = pos.get(node.id);
    const g = svg("g", { class: "xr-beam-node", "data-id": node.id });
    g.append(svg("rect", { x: x - 28, y: y - 14, width: 56, height: 26, rx: 5,
      fill: node.selected ? "#fff1d6" : "#fff", stroke: node.finished ? "#009e73" : "#8a93a0",
      "stroke-width": node.finished ? 2.4 : 1 }));
    g.append(svg("text", { x, y: y - 1, "text-anchor": "middle", "font-size": 12 }, node.token));
    g.append(svg("text", { x, y: y + 10, "text-anchor": "middle", "font-size": 9, fill: "#555" },
      node.parent < 0 ? "0" : fixed(node.score, 2)));
    g.append(svg("title", {}, `${node.token} · log p ${fixed(node.score, 3)}`));
    parts.push(g);
  }
  root.replaceChildren(...parts);
  $("xr-no-end").hidden = nodes.some((n) => n.finished);
  $("xr-finished").replaceChildren(...beamHypotheses(nodes, alpha).map((h) => {
    const li = el("li", `${h.tokens.join("") || "∅"} — ${t("xray.score", { s: fixed(h.node.score, 3), lp: fixed(h.penalty, 3), n: fixed(h.score, 3) })}`
      + (h.node.selected ? ` · ${t("xray.winner")}` : ""), h.node.selected ? "xr-winner" : null);
    li.dataset.node = h.node.id;
    return li;
  }));
}
