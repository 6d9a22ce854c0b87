"""Beam search on the leaner step (issue 27): the tree, every node's score and every token are the
bits the step gave before it was trimmed.

The beam tree's scores are shown numbers (rounded to 4 decimals on the pages), summed from the lean
step's log-probabilities. ``LeanDecoder.step`` and ``reorder`` now skip the module calls, mask the
logits in place, share expanded cross-attention K/V and reorder into a spare buffer; ``Before``
below is the step and reorder as they were (commit 4d45d7f), driven by the same beam search. Both
must give identical floats, not close ones.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from bench.common import sentences
from model import decoding
from model.decoding import DecodingOptions, beam_batch, generate, pad
from model.lean import LeanDecoder, _enter
from model.transformer import BOS_ID, Transformer, TransformerConfig, mask_special

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


class Before(LeanDecoder):
    """The lean step and reorder as they were before issue 27, op for op."""

    def step(self, new_ids: Tensor) -> Tensor:
        position = self.length
        embedding = self.model.tgt_embedding
        y = (F.embedding(new_ids, embedding.tokens.weight) * embedding.scale
             + embedding.positions[position])
        batch, heads, d_head = y.size(0), self.heads, self.d_head
        end = position + 1
        for index, (weights, (cross_keys, cross_values)) in enumerate(
            zip(self.weights.layers, self.cross, strict=True)
        ):
            _enter(weights.layer)
            norm1, norm2, norm3 = weights.norms
            qkv = weights.qkv(y).view(batch, 3, heads, d_head)
            self.kv[index, :, :, :, position] = qkv[:, 1:].transpose(0, 1)
            keys, values = self.kv[index, :, :, :, :end].unbind(0)
            attended = F.scaled_dot_product_attention(qkv[:, 0, :, None], keys, values)
            y = norm1(y + weights.out(attended.view(batch, self.d_model)))
            if cross_keys.size(0) != batch:
                cross_keys = cross_keys.expand(batch, -1, -1, -1)
                cross_values = cross_values.expand(batch, -1, -1, -1)
            crossed = F.scaled_dot_product_attention(
                weights.cross_q(y).view(batch, heads, 1, d_head), cross_keys, cross_values,
                attn_mask=self.src_mask,
            ).view(batch, self.d_model)
            y = norm2(y + weights.cross_out(crossed))
            y = norm3(y + weights.ffn2(weights.activate(weights.ffn1(y))))
        self.length = end
        return mask_special(self.weights.output(y))

    def reorder(self, indices: Tensor) -> None:
        kv = self.kv.new_empty((*self.kv.shape[:2], len(indices), *self.kv.shape[3:]))
        kv[:, :, :, :, : self.length] = self.kv[:, :, indices, :, : self.length]
        self.kv = kv
        if self.cross[0][0].size(0) > 1:
            self.cross = [(keys[indices], values[indices]) for keys, values in self.cross]
            if self.src_mask is not None:
                self.src_mask = self.src_mask[indices]


def exactly(result) -> tuple:
    """Everything a decode returns, floats as they are (no tolerance)."""
    return (result.tokens, result.finished, result.scores,
            [(n.step, n.token_id, n.parent, n.score, n.finished, n.selected)
             for n in result.beam_nodes])


def before_generate(model, src, options, **kwargs):
    original = decoding.step_decoder
    decoding.step_decoder = lambda m, s, memory, use_cache, max_len: Before(
        m, s, memory, capacity=max_len + 1)
    try:
        return generate(model, src, options, **kwargs)
    finally:
        decoding.step_decoder = original


@pytest.fixture(params=["ours", "marian-like"])
def model(request):
    torch.manual_seed(11)
    if request.param == "ours":
        return Transformer(CONFIG).eval()
    return Transformer(replace(CONFIG, activation="swish", position_layout="halves")).eval()


@pytest.mark.parametrize("options", OPTIONS, ids=["beam4", "beam2", "beam8", "beam4-lp0-max7"])
def test_tiny_models_beam_trees_are_bit_identical(model, options):
    for source in ([5, 9, 12, 7, 2], [11, 4, 2], [6] * 9 + [2], [20, 21, 22, 23, 24, 25, 2]):
        src = torch.tensor([source])
        assert exactly(generate(model, src, options)) == exactly(
            before_generate(model, src, options)), source
    forced = generate(model, torch.tensor([[5, 9, 2]]), OPTIONS[0], forced_prefix=[7, 8])
    assert exactly(forced) == exactly(
        before_generate(model, torch.tensor([[5, 9, 2]]), OPTIONS[0], forced_prefix=[7, 8]))


def test_reorder_into_the_spare_buffer_keeps_every_row(model):
    """Rows grow, repeat, shrink and grow again; each keeps its own keys and values."""
    src = torch.tensor([[5, 9, 12, 7, 2]])
    with torch.inference_mode():
        memory = model.encode(src)
        new, old = LeanDecoder(model, src, memory, capacity=8), Before(model, src, memory, capacity=8)
        for tokens, rows in (([BOS_ID], [0, 0, 0]), ([4, 7, 9], [2, 0]), ([5, 6], [1, 1, 0, 1]),
                             ([3, 8, 9, 10], [3])):
            assert torch.equal(new.step(torch.tensor(tokens)), old.step(torch.tensor(tokens)))
            new.reorder(torch.tensor(rows))
            old.reorder(torch.tensor(rows))
            assert torch.equal(new.kv[:, :, :, :, : new.length], old.kv[:, :, :, :, : old.length])
        assert torch.equal(new.step(torch.tensor([4])), old.step(torch.tensor([4])))


def test_batched_beam_search_still_equals_one_sentence_at_a_time(model):
    """``beam_batch`` (rows of several sentences, each with its own source) reorders too."""
    sources = [[5, 9, 12, 7, 2], [11, 4, 2], [6, 8, 2]]
    alone = [generate(model, torch.tensor([s]), DecodingOptions(strategy="beam", max_len=12)).tokens
             for s in sources]
    assert beam_batch(model, pad(sources), 4, max_len=12) == alone


@pytest.mark.parametrize("options", OPTIONS[:2], ids=["beam4", "beam2"])
def test_shipped_checkpoint_beam_trees_are_bit_identical(shipped_translator, options):
    """60 real sentences of 5–40 words: every node's score is the same float as before."""
    model = shipped_translator.model
    texts = (sentences(5, 15, offset=77) + sentences(10, 25, offset=4242)
             + sentences(20, 15, offset=9) + sentences(40, 5, offset=5))
    for text in texts:
        src = torch.tensor([shipped_translator.source_ids(text)])
        assert exactly(generate(model, src, options)) == exactly(
            before_generate(model, src, options)), text
