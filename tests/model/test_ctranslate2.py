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


def test_the_converted_model_never_writes_pad_or_bos_without_suppressing_them(tiny_checkpoint):
    """The draft asks no suppress_sequences (its per-step cost was most of a long draft's time):
    the converted model's output bias keeps <pad> and <bos> from ever winning, even where our
    weights would rank them first."""
    from model.adapters.ct2 import NEVER_LOGIT, Drafter, ctranslate2_spec
    from model.transformer import NEVER_GENERATED
    from model.translator import Translator

    favoured = Translator.load(tiny_checkpoint)  # a copy of its own: its weights are changed
    with torch.no_grad():
        favoured.model.output.bias[list(NEVER_GENERATED)] = 1e4  # they would win every step
    assert all(ctranslate2_spec(favoured).decoder.projection.bias[i] == NEVER_LOGIT
               for i in NEVER_GENERATED)
    drafter = Drafter(favoured)
    for text in ["the cat sits on the mat", "a dog runs"]:
        for attempt in (0, 1):  # the int8 copy and the float32 one
            tokens = drafter.propose(favoured.source_ids(text), [], 12, attempt=attempt)
            assert tokens, text
            assert not set(tokens) & set(NEVER_GENERATED), (text, attempt, tokens)
