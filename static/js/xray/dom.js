/* What every part of the picture shares: the page's configuration and strings, element builders,
   the palette's colour scales (ITT.palette, static/js/palette.js). ITT is common.js's global;
   both classic scripts run before this module. */

export const t = ITT.t;
export const cfg = ITT.pageData.config; // d_model, n_heads, layer counts, d_ff, activation, tie_output
export const SIZES = JSON.parse(document.getElementById("xr-sizes").textContent); // vocabulary sizes
const SVG = "http://www.w3.org/2000/svg";

export const $ = (id) => document.getElementById(id);
export const fixed = (x, d = 2) => (x === null || x === undefined ? "−∞" : Number(x).toFixed(d));
export const el = (tag, text, cls) => ITT.element(tag, text, cls);

export function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Diverging colour for value v on a ±m scale: the palette's (blue negative, red positive). */
export const colour = ITT.palette.diverging;
/** The same colour written into ImageData bytes at ``px`` (for canvases that paint thousands). */
export const colourInto = ITT.palette.divergingInto;

/** ±m for a row of strips: the median token's 98th percentile of |v| (outlier tokens saturate). */
export const scaleOf = ITT.palette.robustScale;

export function argmax(values, skip) {
  let best = -1;
  for (let i = 0; i < values.length; i++) {
    if (i === skip) continue;
    if (best < 0 || values[i] > values[best]) best = i;
  }
  return best;
}

/** A table cell with a probability bar, or the reason the token was cut ("k" or "p"). */
export function barCell(p, isNew, cutBy) {
  const td = el("td");
  const bar = el("div", null, isNew ? "xr-bar xr-new" : "xr-bar");
  const fill = el("span");
  fill.style.width = `${(p * 100).toFixed(2)}%`;
  const label = cutBy ? t(cutBy === "k" ? "xray.cut_k" : "xray.cut_p") : fixed(p, 4);
  bar.append(fill, el("b", label));
  td.append(bar);
  return td;
}
