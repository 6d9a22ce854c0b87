/* Decoding the /api/xray payload: int8 strips and base64 float32 logits (no page access). */

/** int8 codes (base64) and a scale → one Float32Array per position: code / 127 × scale. */
export function decodeStrip(stage) {
  const bytes = Uint8Array.from(atob(stage.codes), (c) => c.charCodeAt(0));
  const codes = new Int8Array(bytes.buffer);
  const [length, d] = stage.shape;
  const factor = stage.scale / 127;
  const rows = [];
  for (let i = 0; i < length; i++) {
    const row = new Float32Array(d);
    for (let j = 0; j < d; j++) row[j] = codes[i * d + j] * factor;
    rows.push(row);
  }
  return rows;
}

/** steps × vocabulary float32 (little-endian, base64) → one Float32Array per step (−∞ where
    the model may never produce the token). */
export function decodeLogits(block) {
  const bytes = Uint8Array.from(atob(block.float32), (c) => c.charCodeAt(0));
  const [steps, vocab] = block.shape;
  let all;
  if (new Uint8Array(new Uint16Array([1]).buffer)[0] === 1) {
    all = new Float32Array(bytes.buffer); // this machine is little-endian too: no copy
  } else {
    const view = new DataView(bytes.buffer);
    all = Float32Array.from({ length: steps * vocab }, (_, i) => view.getFloat32(i * 4, true));
  }
  return Array.from({ length: steps }, (_, i) => all.subarray(i * vocab, (i + 1) * vocab));
}

/** The payload as the page uses it: strips as arrays of vectors, logits as Float32Arrays. */
export function decodeXray(xr) {
  for (const side of ["encoder", "decoder"]) xr[side].values = xr[side].values.map(decodeStrip);
  xr.logits = decodeLogits(xr.logits);
  return xr;
}
