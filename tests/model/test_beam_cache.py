"""Beam search with the KV cache: the tree and every token are those of decoding without it.

The beam tree's scores are shown numbers (rounded to 4 decimals on the pages), summed from the
cached steps' log-probabilities. Decoding without the cache (``use_cache=False``: the whole prefix
through ``Transformer.decode`` at every step) must build the same tree, node for node, with scores
equal to float rounding; the cache's reorder (into a spare buffer, one sentence's cross-attention
K/V shared by every row) must keep every row's own keys and values.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from bench.common import sentences
from model import decoding
from model.decoding import Decoder, DecodingOptions, beam_batch, generate, pad
from model.transformer import BOS_ID, EOS_ID, NEVER_GENERATED, Transformer, TransformerConfig

CONFIG = TransformerConfig(
    src_vocab_size=30, tgt_vocab_size=25, d_model=32, n_heads=4,
    n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0,
)
OPTIONS = [
    DecodingOptions(strategy="beam", beam_size=4),
    DecodingOptions(strategy="beam", beam_size=2),
    DecodingOptions(strategy="beam", beam_size=8),
    DecodingOptions(strategy="beam", beam_size=4, length_penalty=0.0, max_len=7),
]


def tree(result) -> tuple:
    """Everything a decode returns but the scores' last bits."""
    return (result.tokens, result.finished,
            [(n.step, n.token_id, n.parent, n.finished, n.selected) for n in result.beam_nodes])


def assert_same_search(cached, written) -> None:
    assert tree(cached) == tree(written)
    assert [n.score for n in cached.beam_nodes] == pytest.approx(
        [n.score for n in written.beam_nodes], abs=1e-4)


def written_out_generate(model, src, options, **kwargs):
    return generate(model, src, replace(options, use_cache=False), **kwargs)


@pytest.fixture(params=["ours", "marian-like"])
def model(request):
    torch.manual_seed(11)
    if request.param == "ours":
        return Transformer(CONFIG).eval()
    return Transformer(replace(CONFIG, activation="swish", position_layout="halves")).eval()


@pytest.mark.parametrize("options", OPTIONS, ids=["beam4", "beam2", "beam8", "beam4-lp0-max7"])
def test_tiny_models_beam_trees_are_the_written_out_ones(model, options):
    for source in ([5, 9, 12, 7, 2], [11, 4, 2], [6] * 9 + [2], [20, 21, 22, 23, 24, 25, 2]):
        src = torch.tensor([source])
        assert_same_search(generate(model, src, options), written_out_generate(model, src, options))
    src = torch.tensor([[5, 9, 2]])
    assert_same_search(generate(model, src, OPTIONS[0], forced_prefix=[7, 8]),
                       written_out_generate(model, src, OPTIONS[0], forced_prefix=[7, 8]))


def test_reorder_into_the_spare_buffer_keeps_every_row(model):
    """Rows grow, repeat, shrink and grow again; each keeps its own keys and values."""
    src = torch.tensor([[5, 9, 12, 7, 2]])
    with torch.inference_mode():
        memory = model.encode(src)
        cached = Decoder(model, src, memory, capacity=8)
        written = Decoder(model, src, memory, capacity=8, use_cache=False)
        for tokens, rows in (([BOS_ID], [0, 0, 0]), ([4, 7, 9], [2, 0]), ([5, 6], [1, 1, 0, 1]),
                             ([3, 8, 9, 10], [3])):
            torch.testing.assert_close(cached.step(torch.tensor(tokens)),
                                       written.step(torch.tensor(tokens)), atol=1e-5, rtol=0)
            cached.reorder(torch.tensor(rows))
            written.reorder(torch.tensor(rows))
        torch.testing.assert_close(cached.step(torch.tensor([4])), written.step(torch.tensor([4])),
                                   atol=1e-5, rtol=0)


def test_batched_beam_search_still_equals_one_sentence_at_a_time(model):
    """``beam_batch`` (rows of several sentences, each with its own source) reorders too."""
    sources = [[5, 9, 12, 7, 2], [11, 4, 2], [6, 8, 2]]
    alone = [generate(model, torch.tensor([s]), DecodingOptions(strategy="beam", max_len=12)).tokens
             for s in sources]
    assert beam_batch(model, pad(sources), 4, max_len=12) == alone


@pytest.mark.parametrize("options", OPTIONS[:2], ids=["beam4", "beam2"])
def test_shipped_checkpoint_beam_trees_are_the_written_out_ones(shipped_translator, options):
    """Real sentences of 5–20 words: the same tree node for node, scores to float rounding.
    (``bench/decoder_parity.py`` compares against the previous step on 240 sentences.)"""
    model = shipped_translator.model
    texts = sentences(5, 6, offset=77) + sentences(10, 8, offset=4242) + sentences(20, 4, offset=9)
    for text in texts:
        src = torch.tensor([shipped_translator.source_ids(text)])
        assert_same_search(generate(model, src, options), written_out_generate(model, src, options))


class _RandomLogits:
    """A decoder stand-in: random logits per row (<eos> never), one row far ahead at every
    other step, each returned block kept."""

    def __init__(self, vocab: int):
        self.vocab, self.returned = vocab, []
        self.generator = torch.Generator().manual_seed(5)

    def step(self, new_ids):
        logits = torch.randn(new_ids.size(0), self.vocab, generator=self.generator) * 3
        if len(self.returned) % 2:
            logits[-1] += 10.0  # every one of the best continuations comes from the last row
        logits[:, [EOS_ID, *NEVER_GENERATED]] = float("-inf")
        self.returned.append(logits)
        return logits.clone()

    def reorder(self, indices):
        pass


def test_each_step_keeps_the_best_continuations_over_all_rows(monkeypatch):
    """The search ranks each row's best continuations, then merges the rows: at every step the
    kept hypotheses must be the flat top ``beam_size`` of score + log p over all rows × vocabulary,
    also when all of them continue one row."""
    stub = _RandomLogits(vocab=50)
    monkeypatch.setattr(decoding, "Decoder", lambda *args, **kwargs: stub)
    options = DecodingOptions(strategy="beam", beam_size=4, max_len=6)
    with torch.inference_mode():
        nodes = decoding.beam_search(None, torch.tensor([[5, 9, 2]]), None, options)[0].beam_nodes
        previous = [0]  # the rows' nodes: the root, then each step's kept hypotheses in order
        for step, logits in enumerate(stub.returned, start=1):
            scores = torch.tensor([nodes[node].score for node in previous])
            flat = (scores[:, None] + torch.log_softmax(logits, dim=-1)).reshape(-1)
            best, where = torch.topk(flat, options.beam_size)
            expected = [(previous[index // stub.vocab], index % stub.vocab, score)
                        for score, index in zip(best.tolist(), where.tolist(), strict=True)]
            kept = [index for index, node in enumerate(nodes) if node.step == step]
            assert [(nodes[i].parent, nodes[i].token_id, nodes[i].score) for i in kept] == expected
            previous = kept
    assert len(stub.returned) == options.max_len
