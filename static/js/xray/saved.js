/* Keeping what you see: the x-ray as a file that opens again here without the model running, the
   whole trace as JSON for a notebook, and opening a saved file (picker or drag-and-drop).

   A saved x-ray is JSON: the request, the model line and the packed /api/xray/view and
   /api/xray/heads answers exactly as they came (base64), so the reopened picture is drawn from the
   very bytes the model produced, any head included; the /api/xray/strips answer (the decoder's
   strips) the same way. (Files saved before the heads, or the decoder's strips, went apart carry
   them inside the view and have no "heads", or no "strips".)
   Opening a block, turning a sampling knob or forcing a character afterwards asks the running
   model; the banner says so, and says when the running model is not the one that made the file. */

import { S } from "./state.js";
import { $, SIZES, t } from "./dom.js";
import { CAPS, check, decodeHeads, decodeStrips, decodeView } from "./data.js";
import { loadHeads } from "./overlay.js";
import { loadStrips } from "./rows.js";

export const FORMAT = "inside-the-transformer/xray-view";
const VERSION = 1;
const MAX_FILE_BYTES = 32 * 1024 * 1024; // the longest sentence's view is ~1 MB

function modelLine() {
  const line = document.getElementById("model-line");
  return line ? line.textContent.trim() : "";
}

function base64(buffer) {
  const bytes = new Uint8Array(buffer);
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(text);
}

function unbase64(text) {
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes.buffer;
}

/** A file name from the sentence's first words (letters and digits only). */
function fileName(kind) {
  const words = (S.req.text.match(/[A-Za-z0-9]+/g) || ["sentence"]).slice(0, 6).join("-").toLowerCase();
  return `${kind}-${words}.json`;
}

function download(name, text) {
  const url = URL.createObjectURL(new Blob([text], { type: "application/json" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 0);
}

/** The x-ray on screen as a file that opens again on this page (every head's attention and the
    decoder's strips in it, asked for first when they have not come yet). */
export async function saveView() {
  if (!S.view) return;
  const view = S.view;
  await Promise.all([loadHeads(), loadStrips()]);
  if (S.view !== view) return;
  download(fileName("xray"), JSON.stringify({
    format: FORMAT, version: VERSION, saved: new Date().toISOString(), model: modelLine(),
    request: S.req, view: base64(S.view), ...(S.heads ? { heads: base64(S.heads) } : {}),
    ...(S.strips ? { strips: base64(S.strips) } : {}),
  }));
}

/** The whole trace of this request as JSON (/api/trace: every layer, head and step). */
export async function saveTrace() {
  if (!S.req) return;
  const trace = await ITT.api("/api/trace", S.req);
  download(fileName("trace"), JSON.stringify({ model: modelLine(), request: S.req, trace }, null, 1));
}

/** The URL query that describes ``request`` (the inverse of ITT.requestFromURL). */
function queryOf(request) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(request)) {
    if (name === "forced_prefix") for (const token of value) query.append("forced", String(token));
    else if (value !== null && value !== undefined) query.set(name, String(value));
  }
  return query;
}

/** The sentence box and the decoding form say what ``request`` is (a file's, or the URL's after
    a what-if or the decoding switch changed it without a page load). */
export function showRequest(request) {
  const box = document.getElementById("text");
  if (box) box.value = request.text;
  const form = document.getElementById("xr-options");
  for (const [name, value] of Object.entries({ text: request.text, strategy: request.strategy || "greedy",
    beam_size: request.beam_size, max_len: request.max_len })) {
    const field = form ? form.elements.namedItem(name) : null;
    if (field && value !== undefined && value !== null) field.value = String(value);
  }
}

/* A saved request's fields as the server's schema limits them (app/schemas.py: TraceRequest):
   [kind, least, most] for numbers, the strategies for strategy; any other field is refused. */
const REQUEST = {
  temperature: ["number", 0.05, 5], top_k: ["integer", 1, 1000], top_p: ["number", 1e-9, 1],
  beam_size: ["integer", 1, 8], max_len: ["integer", 1, CAPS.steps], seed: ["integer", 0, 2 ** 31 - 1],
};
const STRATEGIES = ["greedy", "sample", "beam"];

/** A saved request is one the page could have sent: the sentence, known settings within their
    limits, a forced prefix of at most 128 short tokens (else a BadView). */
function checkRequest(request) {
  check(typeof request.text === "string" && request.text.length >= 1 && request.text.length <= CAPS.textChars, "request.text");
  for (const [name, value] of Object.entries(request)) {
    if (name === "text" || value === null || value === undefined) continue;
    if (name === "strategy") check(STRATEGIES.includes(value), "request.strategy");
    else if (name === "forced_prefix") {
      check(Array.isArray(value) && value.length <= CAPS.steps
        && value.every((token) => typeof token === "string" && token.length >= 1 && token.length <= 8), "request.forced_prefix");
    } else {
      check(Object.hasOwn(REQUEST, name), `request.${name}: not a setting`);
      const [kind, least, most] = REQUEST[name];
      check(typeof value === "number" && Number.isFinite(value) && value >= least && value <= most
        && (kind === "number" || Number.isInteger(value)), `request.${name}`);
    }
  }
}

/** A saved file's text → { request, buffer, saved, model }, or an Error saying what is wrong. */
export function readSaved(text) {
  let data;
  try {
    data = JSON.parse(text);
  } catch {
    throw new Error(t("xray.file.not_json"));
  }
  if (!data || data.format !== FORMAT || typeof data.view !== "string"
      || typeof data.request !== "object" || data.request === null || typeof data.request.text !== "string") {
    throw new Error(t("xray.file.not_xray"));
  }
  if (data.version !== VERSION) throw new Error(t("xray.file.version", { v: String(data.version).slice(0, 20) }));
  for (const part of [data.heads, data.strips]) {
    if (part !== undefined && typeof part !== "string") throw new Error(t("xray.file.not_xray"));
  }
  try {
    checkRequest(data.request);
  } catch (error) {
    console.warn("saved x-ray refused:", error.message);
    throw new Error(t("xray.file.not_xray"));
  }
  let buffer;
  let heads = null;
  let strips = null;
  try {
    buffer = unbase64(data.view);
    if (data.heads) heads = unbase64(data.heads);
    if (data.strips) strips = unbase64(data.strips);
  } catch {
    throw new Error(t("xray.file.not_xray"));
  }
  return { request: data.request, buffer, heads, strips, saved: String(data.saved || "").slice(0, 40), model: String(data.model || "").slice(0, 300) };
}

/** Wire the buttons, the file picker and dropping a file on the page; ``show(buffer, request)``
    draws a view (main.js's, the same as after a download). */
export function wireFiles(show) {
  const status = $("xr-file-status");

  async function open(file) {
    ITT.clearError();
    try {
      if (file.size > MAX_FILE_BYTES) throw new Error(t("xray.file.too_big", { mb: MAX_FILE_BYTES >> 20 }));
      const saved = readSaved(await file.text());
      try { // a damaged or crafted view fails here, before anything on screen changes
        const { trace, xr } = decodeView(saved.buffer, SIZES.layout);
        if (saved.heads) decodeHeads(saved.heads, trace);
        if (saved.strips) decodeStrips(saved.strips, xr);
        const request = saved.request;
        check((request.forced_prefix || []).length <= trace.steps.length,
          "the request is not the view's");
      } catch (error) {
        console.warn("saved x-ray refused:", error.message);
        throw new Error(t("xray.file.not_xray"));
      }
      ITT.setURL(queryOf(saved.request), true);
      showRequest(saved.request);
      await show(saved.buffer, saved.request, saved.heads, saved.strips);
      const same = !saved.model || saved.model === modelLine();
      status.textContent = t("xray.file.opened", { name: file.name, saved: saved.saved.slice(0, 16).replace("T", " ") })
        + (same ? "" : ` ${t("xray.file.other_model", { model: saved.model })}`);
      status.hidden = false;
      document.body.dataset.xraySource = "file";
    } catch (error) {
      ITT.showError(error instanceof Error && error.message ? error.message : t("xray.file.not_xray"));
    }
  }

  $("xr-save").addEventListener("click", () => saveView().catch((error) => ITT.showError(error.message)));
  $("xr-save-trace").addEventListener("click", () => saveTrace().catch((error) => ITT.showError(error.message)));
  $("xr-open").addEventListener("change", (event) => {
    const [file] = event.target.files;
    if (file) open(file);
    event.target.value = "";
  });
  document.addEventListener("dragover", (event) => {
    if ([...event.dataTransfer.types].includes("Files")) event.preventDefault();
  });
  document.addEventListener("drop", (event) => {
    const [file] = event.dataTransfer.files;
    if (!file) return;
    event.preventDefault();
    open(file);
  });
}

/** A view drawn from the model (not a file): the banner goes. */
export function fromModel() {
  const status = $("xr-file-status");
  status.hidden = true;
  status.textContent = "";
  delete document.body.dataset.xraySource;
}
