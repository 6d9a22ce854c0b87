"""bench.engine's yardstick: our weights converted to CTranslate2 must be the same model, or its
timings compare nothing. On the tiny checkpoint both decoders give the same greedy tokens."""

from __future__ import annotations

import pytest
import torch

from bench.engine import ct2_decode
from model.ct2 import convert
from model.decoding import DecodingOptions, generate

ctranslate2 = pytest.importorskip("ctranslate2")


def test_converted_weights_translate_like_ours(tiny_translator, tmp_path):
    engine = ctranslate2.Translator(str(convert(tiny_translator, tmp_path / "ct2")), device="cpu",
                                    compute_type="float32", intra_threads=1)
    options = DecodingOptions(max_len=12)
    texts = ["the cat sits on the mat", "a dog runs", "I like tea very much", "where is the station"]
    for text in texts:
        src = torch.tensor([tiny_translator.source_ids(text)])
        ours = generate(tiny_translator.model, src, options).tokens
        assert ct2_decode(engine, tiny_translator, text, options) == ours, text


def test_a_marian_model_converts_with_its_own_activation_and_scaling(tiny_marian):
    """SiLU FFNs and Marian's position table: the converted copy still decodes like ours, so a
    Marian model loaded with --model gets useful drafts too."""
    from model.ct2 import load
    from model.marian import MarianTranslator

    marian = MarianTranslator.load(tiny_marian)
    assert marian.config.activation != "relu"
    engine = load(marian, "float32")
    options = DecodingOptions(max_len=12)
    for text in ["The cat sits on the mat.", "Where is the station?", "We are students."]:
        src = torch.tensor([marian.source_ids(text)])
        assert ct2_decode(engine, marian, text, options) == generate(marian.model, src, options).tokens
