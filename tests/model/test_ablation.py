"""Switching parts off is the model's own computation (model.parts_off.Ablation,
model/explain/ablation.py), on the tiny random model and on the tiny Hugging Face Marian model.

Each ablation is checked against a second, independent way to get it: a copy of the model whose
weights are changed so that it computes the ablated function (a head's columns of W_O zeroed, a
sublayer's output projection zeroed, the position table zeroed), or a separate plain forward pass.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from model.decoding import DecodingOptions, generate
from model.explain import ablation as ab
from model.parts_off import Ablation
from model.transformer import mask_special
from model.translator import InputError

TEXT = "He gave her a flower because she was sad."
TOL = dict(atol=2e-5, rtol=1e-4)


@pytest.fixture(scope="module", params=["ours", "marian"])
def translator(request, tiny_translator):
    if request.param == "ours":
        return tiny_translator
    marian = request.getfixturevalue("tiny_marian")
    from model.adapters.marian import MarianTranslator

    return MarianTranslator.load(marian)


@pytest.fixture(scope="module")
def trace(translator):
    return translator.trace(TEXT)


def ids(trace) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor([trace.source_ids]), torch.tensor([trace.decoder_ids])


def logits(model, trace, ablation=None) -> torch.Tensor:
    src, tgt = ids(trace)
    with torch.inference_mode():
        return model(src, tgt, ablation=ablation)


def attention_module(model, kind: str, layer: int):
    side, sublayer = ab.KINDS[kind]
    layers = model.encoder_layers if side == "encoder" else model.decoder_layers
    return getattr(layers[layer], sublayer)


def sequence_log_prob(model, trace, ablation=None) -> torch.Tensor:
    """Per step log p(the trace's character), from one plain forward pass."""
    log_probs = torch.log_softmax(mask_special(logits(model, trace, ablation)[0]), dim=-1)
    labels = torch.tensor([step.id for step in trace.steps])
    return log_probs[torch.arange(len(labels)), labels]


def test_no_ablation_changes_nothing(translator, trace):
    model = translator.model
    assert torch.equal(logits(model, trace), logits(model, trace, Ablation()))


@pytest.mark.parametrize("kind", ["enc", "dec", "cross"])
def test_a_head_off_is_its_slice_zeroed_before_w_o(translator, trace, kind):
    """Zero mode: the same as a model whose W_O never reads that head's slice; mean mode: the same
    as a model whose W_O reads the head's sentence mean in its place (moved into the bias)."""
    model = translator.model
    d_head = model.config.d_head
    layer, head = 1, model.config.n_heads - 1
    part = ab.parse_part(f"{kind}.{layer + 1}.{head + 1}", model.config)
    columns = slice(head * d_head, (head + 1) * d_head)
    for mode in ("zero", "mean"):
        switched = ab.ablation([part], mode, trace.recorded)
        edited = copy.deepcopy(model)
        w_o = attention_module(edited, kind, layer).w_o
        with torch.no_grad():
            if mode == "mean":
                mean = switched.head_means[part.key[:3]][head]  # (K,)
                w_o.bias += w_o.weight[:, columns] @ mean
            w_o.weight[:, columns] = 0
        expected = logits(edited, trace)
        torch.testing.assert_close(logits(model, trace, switched), expected, **TOL)
        assert not torch.allclose(logits(model, trace), expected, atol=1e-4)


def test_a_head_mean_is_its_output_averaged_over_the_sentence(translator, trace):
    """The mean a head writes in mean mode is its softmax(QKᵀ/√d_k)·V averaged over the positions of
    the recorded pass (computed here from Q, K and V by hand)."""
    recorded = trace.recorded
    record = recorded.attention("decoder", 0, "cross_attention")
    q, k, v = record["q"][0], record["k"][0], record["v"][0]
    by_hand = (torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1) @ v).mean(1)
    head_means, _ = ab.sentence_means(recorded)
    torch.testing.assert_close(head_means[("decoder", "cross_attention", 0)], by_hand, **TOL)


@pytest.mark.parametrize("name", ["enc.1", "encffn.2", "dec.2", "cross.1", "decffn.1"])
def test_a_sublayer_off_is_skipped_with_the_residual_kept(translator, trace, name):
    """A model whose sublayer outputs exactly zero (its last projection zeroed) computes the same;
    the recorded Add & Norm is LayerNorm(residual + 0)."""
    model = translator.model
    part = ab.parse_part(name, model.config)
    edited = copy.deepcopy(model)
    layers = edited.encoder_layers if part.side == "encoder" else edited.decoder_layers
    module = getattr(layers[part.layer], part.sublayer)
    last = module.linear2 if part.sublayer == "ffn" else module.w_o
    with torch.no_grad():
        last.weight.zero_()
        last.bias.zero_()
    switched = ab.ablation([part])
    torch.testing.assert_close(logits(model, trace, switched), logits(edited, trace), **TOL)

    src, tgt = ids(trace)
    record: dict = {}
    with torch.inference_mode():
        if part.side == "encoder":
            model.encode(src, record=record, ablation=switched)
        else:
            model.decode(tgt, model.encode(src), src, record=record, ablation=switched)
    norm_record = record["layers"][part.layer][f"{part.sublayer}_add_norm"]
    assert torch.count_nonzero(norm_record["sublayer"]) == 0
    order = ("self_attention", "ffn") if part.side == "encoder" else \
        ("self_attention", "cross_attention", "ffn")
    norm = getattr(layers[part.layer], f"add_norm{order.index(part.sublayer) + 1}").norm
    with torch.inference_mode():
        torch.testing.assert_close(norm_record["normed"], norm(norm_record["residual"]), **TOL)


def test_positions_off_is_the_embedding_without_the_position_term(translator, trace):
    model = translator.model
    edited = copy.deepcopy(model)
    edited.src_embedding.positions.zero_()
    edited.tgt_embedding.positions.zero_()
    switched = ab.ablation(ab.parse_parts(["pos.enc", "pos.dec"], model.config))
    torch.testing.assert_close(logits(model, trace, switched), logits(edited, trace), **TOL)


def test_without_positions_a_shuffled_sentence_encodes_to_a_permutation(translator, trace):
    """Measured by word_order and checked here directly: encoder(shuffled)[i] = encoder(original)
    [source[i]] without positional encoding, and not with it; the translations then agree."""
    model = translator.model
    result = ab.word_order(translator, trace, seed=3)
    source = result["source"]
    assert sorted(source) == list(range(len(trace.source_ids))) and source != sorted(source)
    shuffled = torch.tensor([[trace.source_ids[p] for p in source]])
    src = torch.tensor([trace.source_ids])
    off = Ablation(positions=frozenset({"encoder"}))
    with torch.inference_mode():
        torch.testing.assert_close(model.encode(shuffled, ablation=off)[0],
                                   model.encode(src, ablation=off)[0, source], **TOL)
        assert not torch.allclose(model.encode(shuffled)[0], model.encode(src)[0, source], atol=1e-3)
    assert result["without_positions"]["max_difference"] < 1e-4
    assert result["with_positions"]["max_difference"] > 1e-2
    assert result["without_positions"]["same_translation"]
    assert result["with_positions"]["translation"] == trace.translation
    assert sorted(result["shuffled_words"]) == sorted(result["words"])


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_head_importance_is_the_log_prob_difference_of_a_plain_forward_pass(translator, trace, mode):
    """Every head's Δ log p(translation) from the batched scoring equals log p with that head off
    minus log p with nothing off, each from its own plain forward pass; per step too."""
    model = translator.model
    result = ab.head_importance(translator, trace, mode)
    heads = ab.all_heads(model.config)
    assert [entry["name"] for entry in result["heads"]] == [head.name for head in heads]
    assert len(heads) == model.config.n_heads * (model.config.n_encoder_layers
                                                 + 2 * model.config.n_decoder_layers)
    clean = sequence_log_prob(model, trace)
    assert result["log_prob"] == pytest.approx(float(clean.sum()), abs=1e-4)
    for entry, head in zip(result["heads"], heads, strict=True):
        alone = sequence_log_prob(model, trace, ab.ablation([head], mode, trace.recorded))
        assert entry["delta"] == pytest.approx(float(alone.sum() - clean.sum()), abs=2e-4), head.name
        assert entry["delta_steps"] == pytest.approx((alone.exp() - clean.exp()).tolist(), abs=1e-4)
    ranked = sorted(result["heads"], key=lambda e: -abs(e["delta"]))
    assert result["top"] == [e["name"] for e in ranked[: ab.TOP_HEADS]]


def test_head_importance_in_several_passes_gives_the_same_numbers(translator, trace, monkeypatch):
    whole = ab.head_importance(translator, trace)
    monkeypatch.setattr(ab, "LOGIT_BUDGET", 1)  # one row per pass
    split = ab.head_importance(translator, trace)
    assert split["passes"] == 1 + split["rows"] > whole["passes"]
    for a, b in zip(whole["heads"], split["heads"], strict=True):
        assert a["delta"] == pytest.approx(b["delta"], abs=1e-4)


def test_retranslation_is_the_ablated_models_own_decoding(translator, trace):
    """Re-translating with a head off gives the tokens the lean decoder gives for a copy of the
    model that lacks that head (W_O columns zeroed), and the teacher-forced probabilities of a
    plain forward pass; the original's probabilities with every part are the trace's."""
    model = translator.model
    part = ab.parse_part("cross.1.1", model.config)
    edited = copy.deepcopy(model)
    d_head = model.config.d_head
    with torch.no_grad():
        attention_module(edited, "cross", 0).w_o.weight[:, :d_head] = 0
    result = ab.retranslate(translator, trace, [part])
    src = torch.tensor([trace.source_ids])
    expected = generate(edited, src, DecodingOptions(**trace.options))
    assert result["ablated"]["translation"] == translator.chinese.decode(expected.tokens)
    assert result["original"]["prob_with"] == [step.prob for step in trace.steps]
    without = sequence_log_prob(model, trace, ab.ablation([part])).exp().tolist()
    assert result["original"]["prob_without"] == pytest.approx(without, abs=1e-5)
    assert result["same"] == (expected.tokens == trace.target_ids)
    # the characters as the translation writes them: joined, they are the translation
    for part in ("original", "ablated"):
        shown = result[part]["shown"]
        assert len(shown) == len(result[part]["tokens"])
        written = [s for s, t in zip(shown, result[part]["tokens"], strict=True)
                   if t not in ("<eos>", "</s>", "<unk>")]
        if "<unk>" not in result[part]["tokens"] and translator.about["kind"] != "marian":
            assert "".join(written) == result[part]["translation"]


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_cached_ablated_decoding_equals_full_recomputation(translator, strategy):
    model = translator.model
    src = torch.tensor([translator.source_ids(TEXT)])
    switched = ab.ablation(ab.parse_parts(["dec.1.2", "cross.2", "pos.enc"], model.config))
    runs = [generate(model, src, DecodingOptions(strategy=strategy, max_len=20, use_cache=cached),
                     ablation=switched).tokens for cached in (True, False)]
    assert runs[0] == runs[1]


def test_parts_are_named_and_checked(tiny_translator):
    config = tiny_translator.config  # 2 + 2 layers, 4 heads
    parts = ab.parse_parts(["cross.2.4", "pos.enc", "enc.1", "cross.2.4", "decffn.2"], config)
    assert [p.name for p in parts] == ["pos.enc", "enc.1", "cross.2.4", "decffn.2"]
    assert parts[2].key == ("decoder", "cross_attention", 1, 3)
    for bad, words in (("cross.3.1", "layers 1 to 2"), ("enc.1.5", "heads 1 to 4"),
                       ("enc.0", "layers 1 to 2"), ("ffn.1", "is not a part"),
                       ("encffn.1.1", "is not a part")):
        with pytest.raises(InputError, match=words):
            ab.parse_part(bad, config)
    with pytest.raises(InputError, match=f"at most {ab.MAX_PARTS} parts"):
        ab.parse_parts(["enc.1"] * (ab.MAX_PARTS + 1), config)
    with pytest.raises(ValueError, match="mode"):
        Ablation(mode="half")


def test_word_spans_keep_pieces_together():
    assert ab.word_spans(["the", "cat", "si", "##ts", ".", "<eos>"], [5, 6, 7, 8, 9, 2]) == \
        [(0, 1), (1, 2), (2, 4), (4, 5)]
    assert ab.word_spans(["▁The", "▁c", "at", "▁sits", ".", "</s>"], [5, 6, 7, 8, 9, 2]) == \
        [(0, 1), (1, 3), (3, 5)]
