"""Translator.trace / score / kv_cache_race on a tiny random checkpoint."""

import json

import pytest
import torch
import torch.nn.functional as F

from model.decoding import DecodingOptions, generate, mask_special
from model.kv import KVCache
from model.transformer import BOS_ID
from model.translator import CheckpointError, InputError, Translator

TEXT = "The cat sits on the mat."


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError, match="python -m model.training.train"):
        Translator.load(tmp_path)


@pytest.mark.parametrize(
    "options",
    [DecodingOptions(max_len=12), DecodingOptions(strategy="beam", beam_size=3, max_len=12),
     DecodingOptions(strategy="sample", temperature=0.8, top_p=0.9, seed=1, max_len=12)],
)
def test_trace_shapes_and_json(tiny_translator, options):
    trace = tiny_translator.trace(TEXT, options)
    config = tiny_translator.config
    S, T, H = len(trace.source_tokens), len(trace.decoder_input), config.n_heads
    assert len(trace.steps) == T
    assert len(trace.encoder) == config.n_encoder_layers
    for layer in trace.encoder:
        assert len(layer["self_attention"]) == H
        assert all(len(row) == S for head in layer["self_attention"] for row in head)
    for layer in trace.decoder:
        for head in layer["self_attention"]:
            assert len(head) == T and all(len(row) == T for row in head)
            assert all(head[i][j] == 0 for i in range(T) for j in range(i + 1, T))
        for head in layer["cross_attention"]:
            assert len(head) == T and all(len(row) == S for row in head)
            assert all(abs(sum(row) - 1) < 1e-3 for row in head)
    assert len(trace.embeddings["encoder"]["sum"]) == S
    assert len(trace.embeddings["encoder"]["sum"][0]) == config.d_model
    assert len(trace.projection["points"]) == config.n_encoder_layers + 1
    json.dumps(trace.to_dict())  # plain data only
    detail = trace.attention_detail("decoder_self", 0, 1)
    assert detail["masked"][0][1] is None  # blocked future position
    assert len(detail["q"]) == T and len(detail["q"][0]) == config.d_head


STRATEGIES = [
    DecodingOptions(max_len=8),
    DecodingOptions(strategy="beam", beam_size=3, max_len=8),
    DecodingOptions(strategy="sample", temperature=1.5, top_k=20, seed=7, max_len=8),
    DecodingOptions(strategy="sample", temperature=0.7, top_p=0.8, seed=2, max_len=8),
]


@pytest.mark.parametrize("options", STRATEGIES, ids=["greedy", "beam", "sample-top-k", "sample-top-p"])
def test_trace_rows_equal_the_step_by_step_decoder(tiny_translator, options):
    """For every strategy, the trace records the tokens decoding chose (an independent call to
    ``generate`` with the same options), and every number it shows of the decoder (each step's
    probabilities and candidates, attention rows, Add & Norm sizes) is, to its shown digits, what
    decoding computed at that step: the KV-cached decoder fed one token at a time, recorded."""
    trace = tiny_translator.trace(TEXT, options)
    model = tiny_translator.model
    src = torch.tensor([trace.source_ids])
    with torch.inference_mode():
        decoded = generate(model, src, options)
    assert trace.target_ids == decoded.tokens and trace.finished == decoded.finished
    if options.strategy == "beam":
        chosen = [node for node in trace.beam if node.selected and node.parent >= 0]
        assert [node.token for node in chosen][: len(trace.target_tokens)] == trace.target_tokens
    if options.strategy == "sample":  # each sampled token was allowed by top-k / top-p
        for step in trace.steps:
            allowed = {c.token: c.sample_prob for c in step.top}
            assert step.token not in allowed or allowed[step.token] > 0
    with torch.inference_mode():
        memory = model.encode(src)
        cache = KVCache(model, src, capacity=len(trace.decoder_input))
        for t, token in enumerate(trace.decoder_ids):
            record = {}  # decoding's step t: one new position, the cache holding the ones before
            logits = model.decode(torch.tensor([[token]]), memory, src, record=record, cache=cache)
            probs = torch.softmax(mask_special(logits[0, -1]), -1)
            step = trace.steps[t]
            assert abs(float(probs[step.id]) - step.prob) < 2e-6
            top = torch.topk(probs, len(step.top))
            assert top.indices.tolist() == [candidate.id for candidate in step.top]
            if options.strategy == "greedy":
                assert int(probs.argmax()) == step.id  # the replay's choice is the step's own
            for layer, recorded in enumerate(record["layers"]):
                shown = trace.decoder[layer]
                row = recorded["self_attention"]["weights"][0, :, 0].tolist()
                for head in range(len(row)):
                    assert row[head] == pytest.approx(shown["self_attention"][head][t][: t + 1],
                                                      abs=2e-5)
                cross = recorded["cross_attention"]["weights"][0, :, 0].tolist()
                for head in range(len(cross)):
                    assert cross[head] == pytest.approx(shown["cross_attention"][head][t], abs=2e-5)
                normed = recorded["ffn_add_norm"]["normed"][0, 0]
                assert float(normed.norm()) == pytest.approx(shown["add_norm3"]["normed_norm"][t],
                                                             abs=2e-3)


def test_forced_prefix(tiny_translator):
    trace = tiny_translator.trace(TEXT, DecodingOptions(max_len=6), forced_prefix=["狗", "在"])
    assert trace.target_tokens[:2] == ["狗", "在"]
    assert [s.forced for s in trace.steps[:3]] == [True, True, False]
    with pytest.raises(InputError) as error:
        tiny_translator.trace(TEXT, forced_prefix=["鱼"])
    assert error.value.field == "forced_prefix"


def test_too_many_source_tokens(tiny_translator):
    with pytest.raises(InputError, match="128"):
        tiny_translator.trace("cat " * 140)


def test_score_equals_torch_cross_entropy(tiny_translator):
    score = tiny_translator.score(TEXT, "猫坐在垫子上。")
    assert score.decoder_input[0] == "<bos>" and score.labels[-1] == "<eos>"
    assert score.decoder_input[1:] == score.labels[:-1]
    model, chinese = tiny_translator.model, tiny_translator.chinese
    src = torch.tensor([tiny_translator.english.encode(TEXT)])
    ref = chinese.encode("猫坐在垫子上。")
    with torch.no_grad():
        logits = model(src, torch.tensor([[BOS_ID, *ref]]))[0]
    labels = torch.tensor([*ref, 2])
    assert score.loss == pytest.approx(float(F.cross_entropy(logits, labels)), abs=1e-4)
    assert score.smoothed_loss == pytest.approx(
        float(F.cross_entropy(logits, labels, label_smoothing=0.1)), abs=1e-4)
    assert score.grad_norm > 0
    assert score.clipped_grad_norm == pytest.approx(min(score.grad_norm, 1.0), abs=1e-4)
    assert all(p.grad is None for p in model.parameters()), "scoring never leaves gradients"


def test_kv_cache_race_is_identical(tiny_translator):
    race = tiny_translator.kv_cache_race(TEXT, steps=10)
    assert race["identical"] is True
    assert race["cached_positions"] == [1] * 10
    assert race["uncached_positions"] == list(range(1, 11))
    assert len(race["tokens"]) == 10


@pytest.mark.parametrize("options", [DecodingOptions(), DecodingOptions(strategy="beam", beam_size=3),
                                     DecodingOptions(strategy="sample", seed=4, top_k=5),
                                     DecodingOptions(max_len=3)], ids=["greedy", "beam", "sample", "cut"])
def test_translate_is_the_trace_without_the_recording(tiny_translator, options):
    """translate() skips the recording, not the arithmetic: the same tokens and step numbers."""
    for text in ("the cat sits on the mat", "a dog runs", "I like tea very much"):
        translation = tiny_translator.translate(text, options)
        trace = tiny_translator.trace(text, options)
        assert translation.translation == trace.translation
        assert translation.target_tokens == trace.target_tokens
        assert translation.source_tokens == trace.source_tokens
        assert translation.steps == trace.steps
