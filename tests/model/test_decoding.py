"""Decoding strategies and the KV cache on a tiny random model."""

import pytest
import torch

from model.decoding import (
    LENGTH_PENALTY,
    Decoder,
    DecodingOptions,
    filter_distribution,
    generate,
    length_penalty,
    mask_special,
    rank_hypotheses,
)
from model.transformer import BOS_ID, Transformer, TransformerConfig

CONFIG = TransformerConfig(
    src_vocab_size=30, tgt_vocab_size=25, d_model=32, n_heads=4,
    n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0,
)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(1)
    return Transformer(CONFIG).eval()


SOURCES = [torch.tensor([[5, 9, 12, 7, 2]]), torch.tensor([[11, 4, 2]]), torch.tensor([[6] * 9 + [2]])]


@pytest.mark.parametrize("src", SOURCES)
def test_kv_cache_matches_full_recomputation(model, src):
    with torch.inference_mode():
        memory = model.encode(src)
        decoder = Decoder(model, src, memory, capacity=12)
        prefix = [BOS_ID]
        for _ in range(12):
            cached = decoder.step(torch.tensor([prefix[-1]]))[0]
            full = model.decode(torch.tensor([prefix]), memory, src)[0, -1]
            torch.testing.assert_close(
                torch.softmax(cached, -1), torch.softmax(mask_special(full), -1), atol=1e-5, rtol=0
            )
            prefix.append(int(full.argmax()))
    for strategy in ("greedy", "beam", "sample"):
        with_cache = generate(model, src, DecodingOptions(strategy=strategy, max_len=15, seed=3))
        without = generate(
            model, src, DecodingOptions(strategy=strategy, max_len=15, seed=3, use_cache=False)
        )
        assert with_cache.tokens == without.tokens


@pytest.mark.parametrize("src", SOURCES)
def test_beam_one_and_top_k_one_equal_greedy(model, src):
    greedy = generate(model, src, DecodingOptions(max_len=15)).tokens
    beam1 = generate(model, src, DecodingOptions(strategy="beam", beam_size=1, max_len=15)).tokens
    top1 = generate(model, src, DecodingOptions(strategy="sample", top_k=1, seed=7, max_len=15))
    assert beam1 == greedy
    assert top1.tokens == greedy


def test_beam_search_records_a_tree(model):
    result = generate(model, SOURCES[0], DecodingOptions(strategy="beam", beam_size=4, max_len=8))
    nodes = result.beam_nodes
    assert nodes[0].parent == -1
    assert all(0 <= n.parent < i for i, n in enumerate(nodes) if i > 0)
    selected = [n for n in nodes if n.selected]
    assert [n.token_id for n in selected[1:] if n.token_id != 2] == result.tokens


@pytest.mark.parametrize("src", SOURCES)
@pytest.mark.parametrize("alpha", [LENGTH_PENALTY, 0.0, 1.0])
def test_beam_search_ranks_its_hypotheses_with_the_one_length_penalty(model, src, alpha):
    """The hypotheses come ranked, best first: the ended ones (the open ones when none ended),
    each log p / length_penalty(length); the first is the chosen translation."""
    options = DecodingOptions(strategy="beam", beam_size=3, max_len=8, length_penalty=alpha)
    result = generate(model, src, options)
    nodes, ranked = result.beam_nodes, result.hypotheses
    assert [h.score for h in ranked] == sorted((h.score for h in ranked), reverse=True)
    ended = [i for i, n in enumerate(nodes) if n.finished]
    assert sorted(h.node for h in ranked) == (ended if result.finished else sorted(h.node for h in ranked))
    for h in ranked:
        node = nodes[h.node]
        assert h.length == node.step - node.finished and h.log_prob == node.score
        assert h.penalty == length_penalty(h.length, alpha) and h.score == h.log_prob / h.penalty
    assert nodes[ranked[0].node].selected and DecodingOptions().length_penalty == LENGTH_PENALTY
    assert rank_hypotheses(nodes, alpha) == ranked  # the tree alone gives the same ranking


def test_top_p_keeps_smallest_set_reaching_p():
    logits = torch.log(torch.tensor([0.5, 0.25, 0.15, 0.1]))
    kept = filter_distribution(logits, top_p=0.7)
    assert (kept > 0).tolist() == [True, True, False, False]  # 0.5 < 0.7 ≤ 0.75
    torch.testing.assert_close(kept.sum(), torch.tensor(1.0))
    assert (filter_distribution(logits, top_p=0.75) > 0).sum() == 2
    assert (filter_distribution(logits, top_p=0.76) > 0).sum() == 3
    assert (filter_distribution(logits, top_p=1.0) > 0).sum() == 4
    assert (filter_distribution(logits, top_k=3) > 0).tolist() == [True, True, True, False]


def test_temperature_sharpens_and_flattens():
    logits = torch.tensor([2.0, 1.0, 0.0])
    cold, warm = filter_distribution(logits, 0.5), filter_distribution(logits, 2.0)
    assert cold[0] > torch.softmax(logits, -1)[0] > warm[0]


def test_seed_fixes_a_sample(model):
    options = DecodingOptions(strategy="sample", temperature=1.5, seed=42, max_len=15)
    runs = {tuple(generate(model, SOURCES[0], options).tokens) for _ in range(3)}
    assert len(runs) == 1
    others = {
        tuple(generate(model, SOURCES[0], DecodingOptions(
            strategy="sample", temperature=1.5, seed=s, max_len=15)).tokens)
        for s in range(8)
    }
    assert len(others) > 1, "different seeds should give different samples at T=1.5"


def test_forced_prefix_is_kept(model):
    result = generate(model, SOURCES[0], DecodingOptions(max_len=10), forced_prefix=[7, 8])
    assert result.tokens[:2] == [7, 8]


@pytest.mark.parametrize(
    "bad",
    [dict(strategy="nope"), dict(temperature=0), dict(top_p=0), dict(top_p=1.5), dict(top_k=0),
     dict(beam_size=9), dict(max_len=0)],
)
def test_options_are_validated(bad):
    with pytest.raises(ValueError):
        DecodingOptions(**bad)


@pytest.mark.parametrize(
    "bad",
    [dict(temperature=0.01), dict(top_k=1001), dict(top_k=2.5), dict(seed=-1), dict(seed=2**31),
     dict(max_len=257), dict(beam_size=True)],
)
def test_every_option_is_checked_against_its_declared_limit(bad):
    from model.decoding import LIMITS

    (name, value), = bad.items()
    assert not LIMITS[name].allows(value)
    with pytest.raises(ValueError, match=name):
        DecodingOptions(**bad)


def test_the_cache_key_keeps_only_what_the_strategy_reads():
    from model.decoding import STRATEGIES, STRATEGY_OPTIONS

    assert set(STRATEGY_OPTIONS) == set(STRATEGIES)
    greedy = DecodingOptions(max_len=20)
    # options greedy decoding does not read change nothing
    assert greedy.cache_key() == DecodingOptions(max_len=20, temperature=2, top_k=5, top_p=0.5,
                                                 beam_size=2, seed=9).cache_key()
    assert greedy.cache_key() != DecodingOptions(max_len=21).cache_key()
    sample = DecodingOptions(strategy="sample", max_len=20)
    assert sample.cache_key() == DecodingOptions(strategy="sample", max_len=20, seed=0,
                                                 beam_size=2).cache_key()  # unseeded draws seed 0
    for name, value in (("temperature", 0.5), ("top_k", 5), ("top_p", 0.5), ("seed", 3)):
        assert "sample" in [s for s in STRATEGIES if name in DecodingOptions.reads(s)]
        assert sample.cache_key() != DecodingOptions(strategy="sample", max_len=20,
                                                     **{name: value}).cache_key()
    beam = DecodingOptions(strategy="beam", max_len=20)
    assert beam.cache_key() == DecodingOptions(strategy="beam", max_len=20, top_k=3).cache_key()
    assert beam.cache_key() != DecodingOptions(strategy="beam", max_len=20, beam_size=2).cache_key()
    assert len({greedy.cache_key(), sample.cache_key(), beam.cache_key()}) == 3


def test_the_contract_the_pages_read_is_the_options_own():
    import json

    from model.decoding import LIMITS, STRATEGIES

    contract = json.loads(json.dumps(DecodingOptions.contract()))  # plain JSON, as in a page
    assert contract["strategies"] == list(STRATEGIES) and contract["default"] == "greedy"
    assert contract["reads"]["sample"] == ["temperature", "top_k", "top_p", "seed", "max_len"]
    assert contract["reads"]["beam"] == ["beam_size", "max_len"]
    assert contract["reads"]["greedy"] == ["max_len"]
    for name, option in contract["options"].items():
        limit = LIMITS[name]
        assert (option["min"], option["max"], option["optional"]) == (
            limit.minimum, limit.maximum, limit.optional)
        assert option["default"] == getattr(DecodingOptions(), name)
