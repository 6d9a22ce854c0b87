"""The x-ray's strips survive their packing exactly (issue 27). ``/api/xray/view`` sends each Add &
Norm strip as its codes minus a guess (LayerNorm of the two strips before it); static/js/xray/data.js,
run in node, must undo that to the very codes ``/api/xray`` sent (``bench.xray_payload.old_answer``
computes them with torch now the route is gone) — so every colour and every
hovered value (code / 127 × its position's scale, printed to 3 decimals) is what it was. On the
shipped checkpoint and on a Marian model (``--model``), short and long sentences, beam and a
forced prefix. The rounding error is unchanged: each value within half a code step of the
model's (tests/app/test_xray.py)."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app import xray
from app.main import create_app
from app.settings import Settings
from bench.common import sentences
from bench.xray_payload import old_answer

pytestmark = pytest.mark.e2e
NODE = "/usr/bin/node"
DATA_JS = Path(__file__).resolve().parents[2] / "static" / "js" / "xray" / "data.js"

# Reads a list of [view, decoder strips or null] (base64) on stdin; prints each side's strips as
# decoded, one list of float32 values per stage (positions × d_model, row-major), and whether the
# view alone had the decoder's.
RUNNER = """
import { decodeStrips, decodeView } from "%(data)s";
const bytes = (text) => {
  const b = Buffer.from(text, "base64");
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.length);
};
const chunks = [];
process.stdin.on("data", (c) => chunks.push(c));
process.stdin.on("end", () => {
  const out = JSON.parse(Buffer.concat(chunks).toString()).map(([view, strips]) => {
    const { xr } = decodeView(bytes(view));
    const alone = xr.decoder.values !== null;
    if (strips) decodeStrips(bytes(strips), xr);
    const side = (s) => xr[s].values.map((rows) => rows.flatMap((row) => Array.from(row)));
    return { encoder: side("encoder"), decoder: side("decoder"), alone };
  });
  process.stdout.write(JSON.stringify(out));
});
"""


def decoded_in_node(views: list[tuple[bytes, bytes | None]]) -> list[dict]:
    def text(body):
        return base64.b64encode(body).decode() if body is not None else None

    done = subprocess.run([NODE, "--input-type=module", "-e", RUNNER % {"data": DATA_JS.as_uri()}],
                          input=json.dumps([[text(view), text(strips)] for view, strips in views]),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def expected(old: dict, side: str) -> list[list[float]]:
    """The old /api/xray's strips as data.js has always decoded them: float32(code × (scale / 127))."""
    out = []
    for stage in old[side]["values"]:
        codes = np.frombuffer(base64.b64decode(stage["codes"]), np.int8).reshape(stage["shape"])
        factor = np.asarray(stage["scales"], dtype=np.float32).astype(np.float64)[:, None] / 127
        out.append((codes * factor).astype(np.float32).astype(np.float64).ravel().tolist())
    return out


def check(client: TestClient, bodies: list[dict]) -> int:
    views = [(client.post("/api/xray/view", json=body).content,
              client.post("/api/xray/strips", json=body).content) for body in bodies]
    compared = 0
    for body, view, got in zip(bodies, views, decoded_in_node(views), strict=True):
        header, arrays = xray.unpack_all(*view)
        assert set(header["norm_prediction"]) == {"encoder", "decoder"}, "Add & Norms as corrections"
        assert not got["alone"]  # the view itself leaves the decoder's strips out
        old = old_answer(client, body)  # what /api/xray answered: torch's codes
        codes = xray.strip_codes(header, arrays)
        for side in ("encoder", "decoder"):
            assert got[side] == expected(old, side), (body, side)
            plain = np.stack([np.frombuffer(base64.b64decode(s["codes"]), np.int8).reshape(s["shape"])
                              for s in old[side]["values"]])
            assert np.array_equal(codes[side], plain), (body, side)  # Python's decoder too
            compared += plain.size
    return compared


def test_the_browser_decodes_every_strip_code_exactly_on_the_shipped_model(shipped_translator):
    bodies = [{"text": text, **options}
              for text in (*sentences(5, 2, offset=31_000), *sentences(40, 1, offset=31_100),
                           "The cat sits on the mat.")
              for options in ({}, {"strategy": "beam", "beam_size": 4}, {"forced_prefix": ["我"]})]
    with TestClient(create_app(Settings(access_log=False), translator=shipped_translator)) as client:
        assert check(client, bodies) > 1_000_000


def test_the_browser_decodes_every_strip_code_exactly_on_a_marian_model(tiny_marian):
    bodies = [{"text": text} for text in ("The cat sits on the mat.", *sentences(20, 2, offset=31_200))]
    with TestClient(create_app(Settings(model=str(tiny_marian), access_log=False))) as client:
        assert check(client, bodies) > 0


def test_a_view_packed_before_the_corrections_still_decodes(shipped_translator):
    """Saved x-rays hold the packed answer as it came: one without corrections decodes as before."""
    translator = shipped_translator
    trace = translator.trace("Where is the station?")
    vocabulary = translator.chinese.vocabulary
    plain = (xray.view(trace, vocabulary), xray.decoder_strips_view(trace))  # no model: plain codes
    coded = (xray.view(trace, vocabulary, norms=translator.norm_parameters()),
             xray.decoder_strips_view(trace, translator.norm_parameters()))
    assert "norm_prediction" not in xray.unpack(plain[0])[0]
    first, second = decoded_in_node([plain, coded])
    assert first == second
    assert len(gzip.compress(coded[0])) < len(gzip.compress(plain[0]))  # smaller as sent
    assert len(gzip.compress(coded[1])) < len(gzip.compress(plain[1]))


def test_a_view_saved_with_the_decoder_strips_inside_still_decodes(shipped_translator):
    """Until the decoder's strips went apart, a saved x-ray's view held them: such a view (both
    answers' arrays packed in one) decodes to the same strips without a second answer."""
    translator = shipped_translator
    trace = translator.trace("Where is the station?")
    view = xray.view(trace, translator.chinese.vocabulary, norms=translator.norm_parameters())
    strips = xray.decoder_strips_view(trace, translator.norm_parameters())
    header, arrays = xray.unpack_all(view, strips)
    header.pop("arrays")
    header.pop("strip_ranges")
    whole = xray.pack(header, arrays)
    apart, together = decoded_in_node([(view, strips), (whole, None)])
    assert together["alone"] and not apart["alone"]
    assert together["decoder"] == apart["decoder"] and together["encoder"] == apart["encoder"]
