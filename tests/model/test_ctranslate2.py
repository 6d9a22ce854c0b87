"""bench.engine's yardstick: our weights converted to CTranslate2 must be the same model, or its
timings compare nothing. On the tiny checkpoint both decoders give the same greedy tokens."""

from __future__ import annotations

import pytest
import torch

from bench.engine import ct2_decode
from model.adapters.ct2 import convert
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
    from model.adapters.ct2 import load
    from model.adapters.marian import MarianTranslator

    marian = MarianTranslator.load(tiny_marian)
    assert marian.config.activation != "relu"
    engine = load(marian, "float32")
    options = DecodingOptions(max_len=12)
    for text in ["The cat sits on the mat.", "Where is the station?", "We are students."]:
        src = torch.tensor([marian.source_ids(text)])
        assert ct2_decode(engine, marian, text, options) == generate(marian.model, src, options).tokens


def test_the_engine_floor_runs_the_passes_whose_numbers_the_trace_shows(shipped_translator):
    """bench.engine's ``floor`` (draft, encoder, one replay, nothing recorded) is a lower bound of a
    drafted trace only if it computes what the trace shows: where the draft is right, its logits
    give every probability of the trace's steps."""
    from bench.engine import floor
    from model.decoding import mask_special

    drafter = shipped_translator.drafter()
    assert drafter is not None
    options = DecodingOptions()
    checked = 0
    for text in ["The cat sits on the mat.", "We will meet at the station tomorrow.",
                 "She bought three books for her brother.", "I like tea very much."]:
        src = torch.tensor([shipped_translator.source_ids(text)])
        trace = shipped_translator.trace(text, options)
        if drafter.propose(src[0].tolist(), [], options.max_len) != trace.target_ids or not trace.finished:
            continue  # the floor assumes a right draft
        probs = torch.softmax(mask_special(floor(shipped_translator, drafter, src, options)[0]), dim=-1)
        assert [round(probs[i, step.id].item(), 6) for i, step in enumerate(trace.steps)] == [
            step.prob for step in trace.steps]
        checked += 1
    assert checked >= 2
