/* The palette (app/palette.py, carried by app.css's custom properties, read once) as
   ``ITT.palette``: the two colour scales as functions, so a canvas colours a number as the
   server's figures do (Plotly too interpolates linearly in RGB between the same evenly spaced
   stops). Loaded after common.js (its ITT global), before the page's own script. */
ITT.palette = (() => {
  let read = null;
  const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  const rgbOf = (hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  const stops = (prefix) => {
    const out = [];
    for (let i = 0; css(`--${prefix}-${i}`); i++) out.push(rgbOf(css(`--${prefix}-${i}`)));
    return out;
  };
  function scales() {
    read = read || { div: stops("div"), seq: stops("seq"), share: Number(css("--robust-share")) || 0.98 };
    return read;
  }
  /** [r, g, b] at u ∈ [0, 1] along evenly spaced stops. */
  function along(list, u) {
    const at = Math.max(0, Math.min(1, u)) * (list.length - 1);
    const i = Math.min(list.length - 2, Math.floor(at));
    const f = at - i;
    return list[i].map((c, k) => c + f * (list[i + 1][k] - c));
  }
  return {
    css,
    /** Signed value v on a ±m scale: blue (negative) – near-white (0) – red (positive). */
    diverging: (v, m) => along(scales().div, (v / (m || 1) + 1) / 2),
    /** ``diverging(v, m)`` written straight into an ImageData's bytes at ``px`` (alpha 255):
        the same arithmetic, without an array per value (a strip row paints thousands). */
    divergingInto(data, px, v, m) {
      const list = scales().div;
      const at = Math.max(0, Math.min(1, (v / (m || 1) + 1) / 2)) * (list.length - 1);
      const i = Math.min(list.length - 2, Math.floor(at));
      const f = at - i;
      const lo = list[i], hi = list[i + 1];
      data[px] = lo[0] + f * (hi[0] - lo[0]);
      data[px + 1] = lo[1] + f * (hi[1] - lo[1]);
      data[px + 2] = lo[2] + f * (hi[2] - lo[2]);
      data[px + 3] = 255;
    },
    /** A probability or attention weight p ∈ [0, 1]: white – dark purple. */
    sequential: (p) => along(scales().seq, p),
    rgb: ([r, g, b]) => `rgb(${Math.round(r)}, ${Math.round(g)}, ${Math.round(b)})`,
    /** ±m for rows of signed values (one per token): the median row's 98th percentile of
        |v| (app/palette.py's robust_scale, copied; tests/e2e/test_palette.py holds them equal). */
    robustScale(rows) {
      const share = scales().share;
      const perRow = [];
      for (const row of rows) {
        if (!row.length) continue;
        // the value at this index of |v| (float32) sorted ascending: the k-th largest, kept by
        // one pass over the row with the k largest so far (k is ~2 % of it), not a sort
        const index = Math.min(row.length - 1, Math.floor(row.length * share));
        const k = row.length - index;
        const top = new Float32Array(k).fill(-1); // descending; −1 is below every |v|
        for (let i = 0; i < row.length; i++) {
          const a = Math.fround(Math.abs(row[i]));
          if (!(a > top[k - 1])) continue;
          let j = k - 1;
          for (; j > 0 && top[j - 1] < a; j--) top[j] = top[j - 1];
          top[j] = a;
        }
        perRow.push(top[k - 1]);
      }
      if (!perRow.length) return 1;
      perRow.sort((a, b) => a - b);
      return perRow[Math.floor(perRow.length / 2)] || 1;
    },
  };
})();
