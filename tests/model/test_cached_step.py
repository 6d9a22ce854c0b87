"""Decoding with the KV cache (model/kv.py) against decoding without it.

Both run the one implementation of the layers (``model/transformer.py``): with the cache a step
feeds the new position only, without it the whole prefix. These tests pin that the two agree: the
same logits to 1e-5 at every step (with parts switched off too), the same tokens under every
strategy on the shipped checkpoint, a whole prefix fed to an empty cache recording exactly what the
uncached pass records, and ``should_stop`` stopping decoding before the next step. And that the
model uses PyTorch's public API only.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from bench.common import sentences
from model import decoding
from model.decoding import Decoder, DecodingOptions, Stopped, generate, greedy_batch
from model.kv import KVCache
from model.parts_off import Ablation
from model.transformer import BOS_ID, PAD_ID, Transformer, TransformerConfig

CONFIG = TransformerConfig(
    src_vocab_size=30, tgt_vocab_size=25, d_model=32, n_heads=4,
    n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0,
)


@pytest.fixture(params=["ours", "marian-like"])
def model(request):
    """Our architecture, and the options a converted Marian model uses (SiLU, [sin…, cos…])."""
    torch.manual_seed(3)
    if request.param == "ours":
        return Transformer(CONFIG).eval()
    return Transformer(replace(CONFIG, activation="swish", position_layout="halves")).eval()


def written_out_generate(model, src, options, **kwargs):
    """``generate`` without the KV cache: the decoder re-run over the whole prefix at every step."""
    return generate(model, src, replace(options, use_cache=False), **kwargs)


@pytest.mark.parametrize("source", [[5, 9, 12, 7, 2], [11, 4, 2], [6] * 9 + [2]])
def test_every_step_gives_the_written_out_logits(model, source):
    src = torch.tensor([source])
    with torch.inference_mode():
        memory = model.encode(src)
        with_cache = Decoder(model, src, memory, capacity=16)
        written = Decoder(model, src, memory, capacity=16, use_cache=False)
        token = torch.tensor([BOS_ID])
        for _ in range(16):
            expected = written.step(token)
            torch.testing.assert_close(with_cache.step(token), expected, atol=1e-5, rtol=0)
            token = expected.argmax(-1)
        with pytest.raises(ValueError, match="holds 16 positions"):
            with_cache.step(token)


def test_beam_reorder_keeps_each_rows_cache(model):
    """Rows duplicated, dropped and swapped by beam search keep their own keys and values."""
    src = torch.tensor([[5, 9, 12, 7, 2]])
    with torch.inference_mode():
        memory = model.encode(src)
        with_cache = Decoder(model, src, memory, capacity=8)
        written = Decoder(model, src, memory, capacity=8, use_cache=False)
        for decoder in (with_cache, written):
            decoder.step(torch.tensor([BOS_ID]))
            decoder.reorder(torch.tensor([0, 0, 0]))
            decoder.step(torch.tensor([4, 7, 9]))
            decoder.reorder(torch.tensor([2, 0]))
        torch.testing.assert_close(with_cache.step(torch.tensor([5, 6])),
                                   written.step(torch.tensor([5, 6])), atol=1e-5, rtol=0)


def test_padded_batch_matches_one_sentence_at_a_time(model):
    sources = [[5, 9, 12, 7, 2], [11, 4, 2], [6, 8, 2]]
    width = max(map(len, sources))
    batch = torch.tensor([s + [PAD_ID] * (width - len(s)) for s in sources])
    alone = [generate(model, torch.tensor([s]), DecodingOptions(max_len=10)).tokens for s in sources]
    assert greedy_batch(model, batch, max_len=10) == alone


@pytest.mark.parametrize("options", [
    DecodingOptions(),
    DecodingOptions(strategy="beam", beam_size=4),
    DecodingOptions(strategy="sample", temperature=1.3, seed=5),
    DecodingOptions(strategy="sample", top_p=0.9, top_k=40, seed=1),
], ids=["greedy", "beam4", "sample-t1.3", "sample-top-p"])
def test_shipped_checkpoint_chooses_the_same_tokens(shipped_translator, options):
    """On real sentences, decoding with the cache picks exactly the tokens decoding without it picks, and
    the log-probabilities of the chosen tokens agree to 1e-4."""
    model = shipped_translator.model
    for text in sentences(10, 8, offset=300) + sentences(20, 2, offset=9):
        src = torch.tensor([shipped_translator.source_ids(text)])
        with_cache = generate(model, src, options)
        written = written_out_generate(model, src, options)
        assert with_cache.tokens == written.tokens, text
        assert with_cache.scores == pytest.approx(written.scores, abs=1e-4)


def test_a_cached_step_gives_the_whole_prefix_logits(model):
    """The /kv-cache race's two runs: the cache's next-position logits are the whole prefix's."""
    src = torch.tensor([[5, 9, 12, 7, 2]])
    with torch.inference_mode():
        memory = model.encode(src)
        with_cache = Decoder(model, src, memory, capacity=10)
        prefix = [BOS_ID]
        for _ in range(10):
            cached = with_cache.step(torch.tensor([prefix[-1]]))
            full = model.decode(torch.tensor([prefix]), memory, src)[:, -1]
            torch.testing.assert_close(cached, decoding.mask_special(full), atol=1e-5, rtol=0)
            prefix.append(int(cached.argmax()))


@pytest.mark.parametrize("options", [DecodingOptions(max_len=10),
                                     DecodingOptions(strategy="beam", max_len=10),
                                     DecodingOptions(max_len=10, use_cache=False)],
                         ids=["greedy", "beam", "uncached"])
def test_should_stop_stops_before_the_next_step(model, options):
    """Decoding asks ``should_stop`` before every step; once it answers True no layer runs again
    and ``Stopped`` is raised (how the server stops a request nobody waits for)."""
    src = torch.tensor([[5, 9, 12, 7, 2]])
    asked, ran = [], []
    handle = model.decoder_layers[0].register_forward_pre_hook(lambda module, args: ran.append(1))
    try:
        def should_stop() -> bool:
            asked.append(len(ran))
            return len(asked) == 4

        with pytest.raises(Stopped):
            generate(model, src, options, should_stop=should_stop)
    finally:
        handle.remove()
    assert len(asked) == 4 and len(ran) == 3  # three steps ran, the fourth was never started
    assert generate(model, src, options, should_stop=lambda: False).tokens == generate(
        model, src, options).tokens


ABLATIONS = [
    Ablation(heads=frozenset({("decoder", "self_attention", 0, 1), ("decoder", "cross_attention", 1, 3)})),
    Ablation(sublayers=frozenset({("decoder", "ffn", 1), ("decoder", "cross_attention", 0)})),
    Ablation(positions=frozenset({"decoder"})),
    Ablation(heads=frozenset({("decoder", "cross_attention", 0, 2)}), mode="mean",
             head_means={("decoder", "cross_attention", 0): torch.linspace(-1, 1, 32).view(4, 8)}),
]


@pytest.mark.parametrize("ablation", ABLATIONS, ids=["heads", "sublayers", "positions", "mean"])
def test_parts_switched_off_give_the_written_out_logits(model, ablation):
    """Ablation runs on the same decoder: heads, sublayers and positions off, at every step,
    cached as uncached ``Transformer.decode`` computes them."""
    src = torch.tensor([[5, 9, 12, 7, 2]])
    with torch.inference_mode():
        memory = model.encode(src, ablation=ablation)
        with_cache = Decoder(model, src, memory, capacity=10, ablation=ablation)
        written = Decoder(model, src, memory, capacity=10, ablation=ablation, use_cache=False)
        prefix = [BOS_ID]
        for _ in range(10):
            expected = written.step(torch.tensor([prefix[-1]]))
            torch.testing.assert_close(with_cache.step(torch.tensor([prefix[-1]])), expected,
                                       atol=1e-5, rtol=0)
            prefix.append(int(expected.argmax()))
    for options in (DecodingOptions(max_len=10), DecodingOptions(strategy="beam", max_len=10)):
        assert (generate(model, src, options, ablation=ablation).tokens
                == written_out_generate(model, src, options, ablation=ablation).tokens)


def _flat(record, name=""):
    """A nested record as {path: tensor}, in the order it was written."""
    if isinstance(record, dict):
        return {path: t for key, value in record.items() for path, t in _flat(value, f"{name}/{key}").items()}
    if isinstance(record, list):
        return {path: t for i, value in enumerate(record) for path, t in _flat(value, f"{name}/{i}").items()}
    return {name: record}


@pytest.mark.parametrize("ablation", [None, *ABLATIONS],
                         ids=["plain", "heads", "sublayers", "positions", "mean"])
def test_a_recorded_cached_pass_records_what_the_uncached_pass_records(model, ablation):
    """One code path: a whole translation fed to an empty cache with ``record=`` records every
    tensor the uncached ``Transformer.decode(record=)`` records, in the same layout, equal to the
    last bit (not close), with the same logits."""
    src = torch.tensor([[5, 9, 12, 7, 2]])
    ids = torch.tensor([[BOS_ID, 4, 7, 9, 11, 6, 3]])
    with torch.inference_mode():
        memory = model.encode(src, ablation=ablation)
        expected: dict = {}
        logits = model.decode(ids, memory, src, record=expected, ablation=ablation)
        recorded: dict = {}
        with_cache = KVCache(model, src, capacity=ids.size(1))
        assert torch.equal(model.decode(ids, memory, src, record=recorded, ablation=ablation,
                                        cache=with_cache), logits)
    expected, recorded = _flat(expected), _flat(recorded)
    assert list(recorded) == list(expected)
    for path, tensor in expected.items():
        assert recorded[path].shape == tensor.shape, path
        assert torch.equal(recorded[path], tensor), path
    # and it filled the cache as stepping one position at a time does
    with torch.inference_mode():
        stepped = KVCache(model, src, capacity=ids.size(1))
        for position in range(ids.size(1)):
            model.decode(ids[:, position : position + 1], memory, src, ablation=ablation, cache=stepped)
        torch.testing.assert_close(stepped.kv, with_cache.kv, atol=1e-5, rtol=0)
        with pytest.raises(ValueError, match="holds 7 positions"):
            model.decode(ids[:, :1], memory, src, cache=stepped)


def test_no_private_pytorch_api():
    """The model and the app use PyTorch's public API only (no ``torch.ops``, ``torch._C`` or a
    module's private hook tables)."""
    root = Path(__file__).resolve().parents[2]
    private = re.compile(r"torch\.ops\.|_forward_pre_hooks|torch\._C")
    found = [f"{path.relative_to(root)}:{number}"
             for folder in ("model", "app") for path in sorted((root / folder).rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if private.search(line)]
    assert found == []
