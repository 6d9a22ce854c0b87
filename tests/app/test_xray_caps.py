"""The browser's copy of the limits a saved x-ray is checked against (static/js/xray/data.js's
CAPS, saved.js's REQUEST) equals the originals in Python (issue 59, item 2; STYLE 13)."""

from __future__ import annotations

import re
from pathlib import Path

from app.pages.attention import AttentionDetailRequest
from app.schemas import MAX_FORCED, MAX_SEED, MAX_TEXT_CHARS, MIN_TEMPERATURE, TraceRequest
from model.tokenizer import MAX_SOURCE_TOKENS

XRAY = Path(__file__).resolve().parents[2] / "static" / "js" / "xray"


def caps() -> dict[str, str]:
    block = re.search(r"export const CAPS = \{(.*?)\};", (XRAY / "data.js").read_text(), re.S).group(1)
    return dict(re.findall(r"(\w+): ([^,]+)", block))


def limit(model, field: str, kind: str):
    return next(getattr(m, kind) for m in model.model_fields[field].metadata if hasattr(m, kind))


def test_caps_are_the_servers_limits():
    found = caps()
    assert int(found["positions"]) == MAX_SOURCE_TOKENS + 1  # and <eos>
    assert int(found["steps"]) == MAX_FORCED == limit(TraceRequest, "max_len", "le")
    assert int(found["textChars"]) == MAX_TEXT_CHARS
    assert int(found["layers"]) == limit(AttentionDetailRequest, "layer", "le") + 1
    assert int(found["heads"]) == limit(AttentionDetailRequest, "head", "le") + 1


def test_a_saved_requests_settings_are_the_schemas():
    text = (XRAY / "saved.js").read_text()
    block = re.search(r"const REQUEST = \{(.*?)\};", text, re.S).group(1)
    found = {name: (kind, least, most) for name, kind, least, most
             in re.findall(r'(\w+): \["(\w+)", ([^,]+), ([^\]]+)\]', block)}
    assert set(found) == {"temperature", "top_k", "top_p", "beam_size", "max_len", "seed"}
    assert float(found["temperature"][1]) == MIN_TEMPERATURE
    assert float(found["temperature"][2]) == limit(TraceRequest, "temperature", "le")
    assert int(found["top_k"][2]) == limit(TraceRequest, "top_k", "le")
    assert int(found["beam_size"][2]) == limit(TraceRequest, "beam_size", "le")
    assert found["max_len"][2] == "CAPS.steps"
    assert found["seed"][2] == "2 ** 31 - 1" and MAX_SEED == 2**31 - 1
