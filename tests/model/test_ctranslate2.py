"""bench.engine's yardstick: our weights converted to CTranslate2 must be the same model, or its
timings compare nothing. On the tiny checkpoint both decoders give the same greedy tokens. And
CTranslate2 is a yardstick only: nothing the app runs imports it, and the runtime lock lacks it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import torch

from model.decoding import DecodingOptions, generate

ROOT = Path(__file__).resolve().parents[2]


def test_the_runtime_needs_no_ctranslate2():
    """Only bench/ imports CTranslate2; the app's dependencies and its lock do not name it."""
    importing = re.compile(r"^\s*(import|from)\s+ctranslate2\b|model\.adapters\.ct2|bench\.ct2", re.M)
    found = [str(path.relative_to(ROOT)) for folder in ("model", "app")
             for path in sorted((ROOT / folder).rglob("*.py"))
             if importing.search(path.read_text(encoding="utf-8"))]
    assert found == []
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert not [d for d in project["dependencies"] if d.lower().startswith("ctranslate2")]
    lock = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    assert not re.search(r"^ctranslate2==", lock, re.M)
    assert re.search(r"^ctranslate2==", (ROOT / "requirements-dev.lock").read_text(encoding="utf-8"),
                     re.M), "the yardstick stays in the dev lock"


def _ctranslate2():
    return pytest.importorskip("ctranslate2")


def test_converted_weights_translate_like_ours(tiny_translator, tmp_path):
    from bench.ct2 import convert
    from bench.engine import ct2_decode

    engine = _ctranslate2().Translator(str(convert(tiny_translator, tmp_path / "ct2")), device="cpu",
                                    compute_type="float32", intra_threads=1)
    options = DecodingOptions(max_len=12)
    texts = ["the cat sits on the mat", "a dog runs", "I like tea very much", "where is the station"]
    for text in texts:
        src = torch.tensor([tiny_translator.source_ids(text)])
        ours = generate(tiny_translator.model, src, options).tokens
        assert ct2_decode(engine, tiny_translator, text, options) == ours, text


def test_a_marian_model_converts_with_its_own_activation_and_scaling(tiny_marian):
    """SiLU FFNs and Marian's position table: the converted copy still decodes like ours, so a
    Marian model loaded with --model can be timed against it too."""
    _ctranslate2()
    from bench.ct2 import load
    from bench.engine import ct2_decode
    from model.adapters.marian import MarianTranslator

    marian = MarianTranslator.load(tiny_marian)
    assert marian.config.activation != "relu"
    engine = load(marian, "float32")
    options = DecodingOptions(max_len=12)
    for text in ["The cat sits on the mat.", "Where is the station?", "We are students."]:
        src = torch.tensor([marian.source_ids(text)])
        assert ct2_decode(engine, marian, text, options) == generate(marian.model, src, options).tokens
