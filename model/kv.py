"""The KV cache: what the decoder keeps between decoding steps so that a step computes only the
new position.

A decoder position's self-attention reads the keys and values of every position before it; they
do not change once computed (the decoder is causal), so decoding keeps them instead of
recomputing the whole prefix at every step. The cross-attention's keys and values come from the
encoder output alone: projected once, on the first step, and read at every later one.

``Transformer.decode(…, cache=KVCache(…))`` (``model/transformer.py``) runs the layers written
there over the new positions: this module computes nothing of the model, it only stores. The
self-attention keys and values of every layer live in one buffer allocated once for the whole
translation (no ``torch.cat`` per step), so that beam search reorders them all in one copy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from model.transformer import PAD_ID, Transformer, padding_mask

# Shapes: B rows (hypotheses), T new positions per row, H heads, K head dim,
# C cache capacity, S source length

Project = Callable[[], tuple[Tensor, Tensor]]  # the attention's own K and V projection (B, H, ·, K)


@dataclass
class LayerCache:
    """One decoder layer's cache, as the /kv-cache page reads it."""

    keys: Tensor  # (B, H, C, K): the self-attention KV cache, filled up to ``length``
    values: Tensor
    cross_keys: Tensor | None  # (B_src, H, S, K): projected once from the encoder output
    cross_values: Tensor | None


class AttentionCache:
    """One attention sublayer's part of a :class:`KVCache` (what ``MultiHeadAttention`` is given)."""

    def __init__(self, owner: KVCache, layer: int, cross: bool):
        self.owner, self.layer, self.cross = owner, layer, cross

    def keys_values(self, project: Project) -> tuple[Tensor, Tensor]:
        """The keys and values to attend to (B, H, ·, K). Cross-attention: the encoder output's,
        projected on the first call only. Self-attention: ``project()`` gives the new positions'
        keys and values, which go into the cache after those already there; all of them are
        returned (views of the cache, not copies)."""
        owner = self.owner
        if self.cross:
            pair = owner.cross[self.layer]
            if pair is None:
                pair = owner.cross[self.layer] = project()
            return pair
        keys, values = project()
        start, new = owner.length, keys.size(2)
        if start + new > owner.capacity:
            raise ValueError(f"the KV cache holds {owner.capacity} positions")
        if start == 0:  # the first positions: attend to them as computed, which keeps autograd's
            owner.kv[self.layer, 0].narrow(2, 0, new).copy_(keys)  # graph clear of the buffer
            owner.kv[self.layer, 1].narrow(2, 0, new).copy_(values)
            return keys, values
        cached = owner.kv[self.layer]  # (2, B, H, C, K)
        cached[0].narrow(2, start, new).copy_(keys)
        cached[1].narrow(2, start, new).copy_(values)
        return cached[0].narrow(2, 0, start + new), cached[1].narrow(2, 0, start + new)


class KVCache:
    """Every decoder layer's keys and values so far, for the rows of one decoding (a sentence, its
    beam's hypotheses, or a batch of sentences), up to ``capacity`` positions."""

    def __init__(self, model: Transformer, src_ids: Tensor, capacity: int):
        config = model.config
        n_layers = len(model.decoder_layers)
        self.capacity = capacity
        self.length = 0  # positions already in the cache
        # every layer's self-attention keys [:, 0] and values [:, 1] in one tensor:
        # (layers, 2, B, H, C, K); a second buffer of that layout is made by the first reorder
        weight = model.output.weight
        self.kv = self._buffer = torch.empty(
            (n_layers, 2, src_ids.size(0), config.n_heads, capacity, config.d_head),
            dtype=weight.dtype, device=weight.device)
        self._spare: Tensor | None = None
        # the cross-attention's keys and values, one pair per layer, for the source batch as it is
        # (one sentence's hypotheses all read the same ones: attention broadcasts over the rows)
        self.cross: list[tuple[Tensor, Tensor] | None] = [None] * n_layers
        # no padding in the source (one sentence, or beams of it): no mask to apply at all
        self.src_mask = None if bool((src_ids != PAD_ID).all()) else padding_mask(src_ids)

    def layer(self, index: int) -> tuple[AttentionCache, AttentionCache]:
        """Decoder layer ``index``'s part: (self-attention, cross-attention). Made for each call,
        not kept: a cache holding parts that hold the cache is a cycle, its buffers freed late."""
        return AttentionCache(self, index, cross=False), AttentionCache(self, index, cross=True)

    def self_mask(self, new: int) -> Tensor | None:
        """(T, length + T): new position t may attend to positions 0…length + t, not later ones
        (None for one new position: it may attend to all)."""
        if new == 1:
            return None
        return torch.ones(new, self.length + new, dtype=torch.bool,
                          device=self.kv.device).tril(self.length)

    def advance(self, new: int) -> None:
        """``new`` positions were written by every layer: the next ones go after them."""
        self.length += new

    @property
    def caches(self) -> list[LayerCache]:
        """Every layer's cache (views, not copies)."""
        return [LayerCache(self.kv[index, 0], self.kv[index, 1], *(pair or (None, None)))
                for index, pair in enumerate(self.cross)]

    def reorder(self, indices: Tensor) -> None:
        """Keep only the rows at ``indices`` (beam search): rows may repeat or vanish.

        The kept rows' filled positions are gathered into the spare buffer, which then becomes the
        cache (the old one the spare): two buffers for a whole search, none allocated per step. So a
        view of ``kv`` or ``caches`` taken before the previous reorder is overwritten by this one.
        When every row stays where it is, nothing moves.
        """
        rows = len(indices)
        if rows <= self.kv.size(2) and indices.tolist() == list(range(rows)):
            self.kv = self.kv[:, :, :rows]
        else:
            spare = self._spare
            if spare is None or spare.size(2) < rows:
                spare = self.kv.new_empty((*self.kv.shape[:2], rows, *self.kv.shape[3:]))
            kept = spare[:, :, :rows]
            torch.index_select(self.kv[:, :, :, :, : self.length], 2, indices,
                               out=kept[:, :, :, :, : self.length])
            self._spare, self._buffer, self.kv = self._buffer, spare, kept
        # one source per row (a batch of sentences): the rows move with their source
        self.cross = [pair if pair is None or pair[0].size(0) == 1
                      else (pair[0][indices], pair[1][indices]) for pair in self.cross]
        if self.src_mask is not None and self.src_mask.size(0) > 1:
            self.src_mask = self.src_mask[indices]
