/* The picture's one visual vocabulary: how each drawing shows a number. The drawing code asks
   these functions for its colours and sizes (rows.js a vector's values and its size, overlay.js
   an attention weight and a probability), and the legend draws its samples with the same
   functions, so the key cannot say one thing while the picture draws another. Every colour is
   the palette's (app/palette.py through app.css, read by ITT.palette). */

import { el, svg, t } from "./dom.js";

const palette = ITT.palette;

/** A vector's entries, one cell each: blue below 0, near-white at 0, red above, on the row's ±m. */
export const valueInto = palette.divergingInto;

/** A vector drawn as its size (its lane too narrow for its entries): a bar as tall as its
    root-mean-square value is of the row's largest, in muted ink on a hairline. */
export function sizeBar(size, largest, height) {
  return { h: Math.max(1.5, (size / (largest || 1)) * height), fill: palette.css("--muted"), base: palette.css("--line") };
}

/** An attention weight w ∈ [0, 1] as a line from key to query: on the weights' own scale (the
    sequential one of the block's heatmap: the larger, the darker purple) from its first quarter
    on, so that a light weight still shows on white, and thicker as w grows; strength ∈ (0, 1]
    fades an older query's lines. ``head`` (a number) draws one head of many in its own colour
    instead, its weight as the line's thickness and opacity. */
export function weightStroke(w, strength = 1, head = null) {
  if (head === null) return { stroke: palette.rgb(palette.sequential(0.25 + 0.75 * w)), width: 0.6 + 3.6 * w, opacity: strength };
  return { stroke: headColour(head), width: 0.6 + 2.9 * w, opacity: strength * (0.2 + 0.8 * w) };
}

/** The lightest weight a line is drawn for (lighter ones would be invisible noise). */
export const WEIGHT_FLOOR = 0.03;

/** Head h's colour when every head's lines are drawn at once (a kind, not an amount). */
export function headColour(h) {
  let count = 0;
  while (palette.css(`--cat-${count}`)) count++;
  return palette.css(`--cat-${h % Math.max(count, 1)}`);
}

/** A probability p as a bar's length out of ``full`` px: the model's grey, the chosen token's orange. */
export function probabilityBar(p, full, chosen) {
  return { width: Math.max(1, full * p), fill: palette.css(chosen ? "--chosen" : "--dist-model") };
}

/** One legend entry per drawing: its sample, drawn by the functions above, and its words. */
const ENTRIES = {
  values() {
    const cells = [-1, -0.75, -0.5, -0.25, 0, 0.25, 0.5, 0.75, 1].map((v, i) => svg("rect", {
      x: 1 + i * 6, y: 2, width: 6, height: 10, fill: palette.rgb(palette.diverging(v, 1)) }));
    const frame = svg("rect", { x: 0.5, y: 1.5, width: 55, height: 11, fill: "none", stroke: palette.css("--line") });
    return [el("span", "−m", "xr-key-num"), sample(56, [...cells, frame]), el("span", "+m", "xr-key-num")];
  },
  size() {
    const bars = [0.35, 0.7, 1].map((s, i) => {
      const bar = sizeBar(s, 1, 12);
      return svg("rect", { x: 2 + i * 8, y: 13 - bar.h, width: 5, height: bar.h, fill: bar.fill });
    });
    return sample(28, [svg("rect", { x: 0, y: 13, width: 28, height: 1, fill: sizeBar(1, 1, 1).base }), ...bars]);
  },
  weight() {
    return sample(40, [0.1, 0.5, 0.9].map((w, i) => {
      const s = weightStroke(w);
      return svg("line", { x1: 4 + i * 13, y1: 13, x2: 10 + i * 13, y2: 1, stroke: s.stroke,
        "stroke-width": s.width.toFixed(2), "stroke-opacity": s.opacity.toFixed(3) });
    }));
  },
  heads(count) {
    return sample(8 * count + 2, Array.from({ length: count }, (_, h) => {
      const s = weightStroke(0.9, 1, h);
      return svg("line", { x1: 2 + h * 8, y1: 13, x2: 6 + h * 8, y2: 1, stroke: s.stroke, "stroke-width": s.width.toFixed(2) });
    }));
  },
  probability() {
    const model = probabilityBar(0.6, 30, false);
    const chosen = probabilityBar(0.9, 30, true);
    return sample(32, [svg("rect", { x: 0, y: 1, width: chosen.width, height: 5, fill: chosen.fill }),
      svg("rect", { x: 0, y: 8, width: model.width, height: 5, fill: model.fill })]);
  },
};

function sample(width, parts) {
  const box = svg("svg", { width, height: 14, viewBox: `0 0 ${width} 14`, "aria-hidden": "true", class: "xr-key-sample" });
  box.append(...parts);
  return box;
}

/** The legend for what is drawn now: ``drawn`` names the encodings on screen (values, size,
    weight, heads, probability); ``long`` gives each its full sentence, else its short label. */
export function legend(drawn, { long = false, heads = 0 } = {}) {
  const list = el("ul", null, long ? "xr-key xr-key-long" : "xr-key");
  for (const name of ["values", "size", "weight", "heads", "probability"]) {
    if (!drawn.has(name)) continue;
    const item = el("li", null, "xr-key-item");
    item.dataset.encoding = name;
    const drawing = el("span", null, "xr-key-drawing");
    drawing.append(...[ENTRIES[name](heads)].flat());
    item.append(drawing, el("span", t(`xray.key.${name}${long ? "_long" : ""}`, { h: heads })));
    list.append(item);
  }
  return list;
}
