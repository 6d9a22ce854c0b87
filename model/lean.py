"""The cached decoder step: one new position per row, its keys and values kept in one KV cache.

``model/transformer.py`` writes attention out step by step (raw, scaled, masked scores, weights)
and can record every intermediate, because the pages explain exactly that; its ``decode`` runs the
whole target prefix at once. Decoding one token at a time needs none of that, only the next
token's logits, fast. ``CachedDecoder`` is the one decoder that does it, for every strategy
(greedy, sampling, beam search, forcing, parts switched off, the /kv-cache race): the same weights,
the same sublayers, computed with fewer, larger public PyTorch operations:

- Q, K and V of the masked self-attention come from one fused product, every product is
  ``addmm(bias, x, Wᵀ)`` on a transposed copy of the weights made once per model (the layout
  a CPU streams fastest for the one to few rows a step has);
- keys and values are written into one KV cache allocated once for the whole translation (no
  ``torch.cat`` per step), and the cross-attention's K and V are projected from the encoder
  output once;
- attention is PyTorch's fused ``scaled_dot_product_attention`` (softmax(QKᵀ/√d_k)·V in one call).

Each layer's step runs through that layer's module call (``DecoderLayer(…, cached=step)``), so
what hangs on the layer, such as the server's cancellation hook, runs at every step. The numbers
the pages show still come from the written-out model (``Translator.trace`` replays the chosen
tokens through it); the tests check that both give the same tokens and logits to 1e-5.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.transformer import NEVER_GENERATED, PAD_ID, Ablation, LayerOff, Transformer, padding_mask

# Shapes: B rows (hypotheses), H heads, K head dim, D d_model, C cache capacity, S source length


class _Projection:
    """One or several ``nn.Linear`` fused into one product ``addmm(bias, x, Wᵀ)``, Wᵀ contiguous:
    for one to a few rows it streams the weights in the order the CPU reads fastest (about half
    the time of ``F.linear`` on this model's one-row products). Gives ``linear(x)`` to rounding."""

    def __init__(self, *linears: nn.Linear):
        self.bias = torch.cat([linear.bias for linear in linears])
        self.transposed = torch.cat([linear.weight for linear in linears]).t().contiguous()

    def __call__(self, x: Tensor) -> Tensor:
        return torch.addmm(self.bias, x, self.transposed)


@dataclass
class _LayerWeights:
    layer: nn.Module  # the DecoderLayer these weights come from
    qkv: _Projection  # masked self-attention: W_q, W_k, W_v side by side
    out: _Projection  # its W_o
    cross_q: _Projection
    cross_out: _Projection
    ffn1: _Projection
    activate: Callable[[Tensor], Tensor]  # the FFN's non-linearity (ReLU here, SiLU in Marian)
    ffn2: _Projection
    norms: tuple[nn.LayerNorm, nn.LayerNorm, nn.LayerNorm]


class _Weights:
    """The decoder's weights laid out for steps of a few rows, built once per model and rebuilt
    when a parameter changes (training updates them in place, which bumps their version counters)."""

    def __init__(self, model: Transformer):
        self.parameters = list(model.parameters())  # walking the modules for them takes ~0.8 ms
        self.versions = _versions(self.parameters)
        self.layers = []
        for layer in model.decoder_layers:
            own, cross, ffn = layer.self_attention, layer.cross_attention, layer.ffn
            self.layers.append(_LayerWeights(
                layer=layer, qkv=_Projection(own.w_q, own.w_k, own.w_v), out=_Projection(own.w_o),
                cross_q=_Projection(cross.w_q), cross_out=_Projection(cross.w_o),
                ffn1=_Projection(ffn.linear1), activate=ffn.activate, ffn2=_Projection(ffn.linear2),
                norms=(layer.add_norm1.norm, layer.add_norm2.norm, layer.add_norm3.norm),
            ))
        self.output = _Projection(model.output)
        self.never_generated = torch.tensor(NEVER_GENERATED)  # ids whose logit decoding sets to -inf


def _versions(parameters: list[nn.Parameter]) -> list[int]:
    return [parameter._version for parameter in parameters]


_WEIGHTS: weakref.WeakKeyDictionary[Transformer, _Weights] = weakref.WeakKeyDictionary()


@torch.inference_mode()
def _weights(model: Transformer) -> _Weights:
    weights = _WEIGHTS.get(model)
    if weights is None or weights.versions != _versions(weights.parameters):
        weights = _WEIGHTS[model] = _Weights(model)
    return weights


@dataclass
class LayerCache:
    """One decoder layer's cache, as the /kv-cache page reads it."""

    keys: Tensor  # (B, H, C, K): the self-attention KV cache, filled up to ``length``
    values: Tensor
    cross_keys: Tensor  # (B_src, H, S, K): projected once from the encoder output
    cross_values: Tensor


class CachedDecoder:
    """Feeds the decoder one token per row at a time with a preallocated KV cache; records nothing.

    ``ablation`` switches the decoder's parts off at every step, as ``Transformer.decode`` does
    (the encoder's part is in ``memory`` already).
    """

    def __init__(self, model: Transformer, src_ids: Tensor, memory: Tensor, capacity: int,
                 ablation: Ablation | None = None):
        config = model.config
        self.model = model
        self.weights = _weights(model)
        self.heads, self.d_head, self.d_model = config.n_heads, config.d_head, config.d_model
        self.memory = memory
        self.capacity = capacity
        self.length = 0  # positions already in the cache
        self.offs: list[LayerOff | None] = [
            None if ablation is None else ablation.layer("decoder", index, config.n_heads)
            for index in range(len(model.decoder_layers))
        ]
        self.positions = ablation is None or "decoder" not in ablation.positions
        # no padding in the source (one sentence, or beams of it): no mask to apply at all
        self.src_mask = None if bool((src_ids != PAD_ID).all()) else padding_mask(src_ids)
        # every layer's self-attention keys [:, 0] and values [:, 1] in one tensor, so that beam
        # search reorders them all in one copy: (layers, 2, B, H, C, K)
        self.kv = self._buffer = memory.new_empty(
            (len(model.decoder_layers), 2, src_ids.size(0), self.heads, capacity, self.d_head)
        )
        # a second buffer of the same layout that beam search's reorder fills and then swaps in
        # (``self.kv`` is always the first B rows of one of the two)
        self._spare: Tensor | None = None
        # the cross-attention's keys and values, one pair per layer, for the source batch as it is:
        # the hypotheses of one sentence (beam search) all read the same ones
        self.cross = [
            (self._heads(layer.cross_attention.w_k(memory)),
             self._heads(layer.cross_attention.w_v(memory)))
            for layer in model.decoder_layers
        ]
        self._expanded: dict[int, list[tuple[Tensor, Tensor]]] = {}  # self.cross for B rows
        self._steps = [partial(self._layer_step, index) for index in range(len(self.cross))]
        self._rows_cross = self.cross  # the cross K/V of the step in progress

    @property
    def caches(self) -> list[LayerCache]:
        """Every layer's cache (views, not copies)."""
        return [LayerCache(self.kv[index, 0], self.kv[index, 1], keys, values)
                for index, (keys, values) in enumerate(self.cross)]

    def _heads(self, x: Tensor) -> Tensor:
        """(B, L, D) → (B, H, L, K)."""
        return x.view(x.size(0), x.size(1), self.heads, self.d_head).transpose(1, 2)

    def _cross_for(self, batch: int) -> list[tuple[Tensor, Tensor]]:
        """Every layer's cross-attention K and V for ``batch`` rows: the hypotheses of one sentence
        share its K and V (expanded views, made once per row count, not copies)."""
        if self.cross[0][0].size(0) == batch:
            return self.cross
        expanded = self._expanded.get(batch)
        if expanded is None:
            expanded = self._expanded[batch] = [
                (keys.expand(batch, -1, -1, -1), values.expand(batch, -1, -1, -1))
                for keys, values in self.cross
            ]
        return expanded

    def _embed(self, ids: Tensor, start: int) -> Tensor:
        """Scaled token vectors plus positions ``start``… for ids (B,) or (B, T)."""
        embedding = self.model.tgt_embedding
        y = F.embedding(ids, embedding.tokens.weight) * embedding.scale
        if not self.positions:
            return y
        if ids.dim() == 1:
            return y + embedding.positions[start]
        return y + embedding.positions[start : start + ids.size(1)]

    def _logits(self, y: Tensor) -> Tensor:
        """The output projection, <pad> and <bos> masked in place (what ``mask_special`` gives)."""
        return self.weights.output(y).index_fill_(-1, self.weights.never_generated, float("-inf"))

    def step(self, new_ids: Tensor) -> Tensor:
        """Append ``new_ids`` (B,) and return the logits for the next position (B, V)."""
        if self.length >= self.capacity:
            raise ValueError(f"the KV cache holds {self.capacity} positions")
        y = self._embed(new_ids, self.length)  # (B, D): one new position per row
        self._rows_cross = self._cross_for(y.size(0))
        for layer, step, off in zip(self.model.decoder_layers, self._steps, self.offs, strict=True):
            y = layer(y, None, None, None, off=off, cached=step)
        self.length += 1
        return self._logits(y)

    def _layer_step(self, index: int, y: Tensor, off: LayerOff | None) -> Tensor:
        """Decoder layer ``index`` for one new position per row (B, D), through the KV cache."""
        weights, kv = self.weights.layers[index], self.kv[index]  # kv: (2, B, H, C, K)
        cross_keys, cross_values = self._rows_cross[index]
        batch, heads, d_head, d_model = y.size(0), self.heads, self.d_head, self.d_model
        position = self.length
        norm1, norm2, norm3 = weights.norms
        qkv = weights.qkv(y).view(batch, 3, heads, d_head)
        kv.select(3, position).copy_(qkv[:, 1:].transpose(0, 1))  # K and V: (2, B, H, K)
        keys, values = kv.narrow(3, 0, position + 1).unbind(0)
        attended = F.scaled_dot_product_attention(qkv.select(1, 0).unsqueeze(2), keys, values)
        attended = _heads_off(off, "self_attention", attended)  # (B, H, 1, K)
        y = _layer_norm(y + _output(off, "self_attention", weights.out(attended.view(batch, d_model))),
                        norm1)
        crossed = F.scaled_dot_product_attention(
            weights.cross_q(y).view(batch, heads, 1, d_head), cross_keys, cross_values,
            attn_mask=self.src_mask,
        )
        crossed = _heads_off(off, "cross_attention", crossed).view(batch, d_model)
        y = _layer_norm(y + _output(off, "cross_attention", weights.cross_out(crossed)), norm2)
        ffn = weights.ffn2(weights.activate(weights.ffn1(y)))
        return _layer_norm(y + _output(off, "ffn", ffn), norm3)

    def step_without_cache(self, prefix: Tensor) -> Tensor:
        """The next position's logits (B, V) for the whole ``prefix`` (B, T), recomputing every
        position's keys and values (the cross-attention's too) as a decoder without a KV cache
        must: the same arithmetic as ``step``, so the /kv-cache race compares the cache alone.
        """
        batch, length = prefix.shape
        y = self._embed(prefix, 0).reshape(batch * length, self.d_model)  # every position: one matrix
        for index, (layer, off) in enumerate(zip(self.model.decoder_layers, self.offs, strict=True)):
            y = layer(y, None, None, None, off=off,
                      cached=partial(self._layer_without_cache, index, batch, length))
        return self._logits(y.view(batch, length, self.d_model)[:, -1])

    def _layer_without_cache(self, index: int, batch: int, length: int, y: Tensor,
                             off: LayerOff | None) -> Tensor:
        """Decoder layer ``index`` over every position (B·T, D), keys and values recomputed."""
        weights = self.weights.layers[index]
        cross = weights.layer.cross_attention
        norm1, norm2, norm3 = weights.norms
        rows, d_model = y.size(0), self.d_model
        q, k, v = (weights.qkv(y).view(batch, length, 3, self.heads, self.d_head)
                   .permute(2, 0, 3, 1, 4))  # each (B, H, T, K)
        attended = _heads_off(off, "self_attention",
                              F.scaled_dot_product_attention(q, k, v, is_causal=True))
        y = norm1(y + _output(off, "self_attention",
                              weights.out(attended.transpose(1, 2).reshape(rows, d_model))))
        crossed = F.scaled_dot_product_attention(
            self._heads(weights.cross_q(y).view(batch, length, d_model)),
            self._heads(cross.w_k(self.memory)), self._heads(cross.w_v(self.memory)),
            attn_mask=self.src_mask,
        )
        crossed = _heads_off(off, "cross_attention", crossed).transpose(1, 2).reshape(rows, d_model)
        y = norm2(y + _output(off, "cross_attention", weights.cross_out(crossed)))
        return norm3(y + _output(off, "ffn", weights.ffn2(weights.activate(weights.ffn1(y)))))

    def reorder(self, indices: Tensor) -> None:
        """Keep only the hypotheses at ``indices`` (beam search): rows may repeat or vanish.

        The kept rows' filled positions are gathered into the spare buffer, which then becomes the
        cache (the old one the spare): two buffers for a whole search, none allocated per step. So a
        view of ``kv`` or ``caches`` taken before the previous reorder is overwritten by this one.
        """
        rows = len(indices)
        spare = self._spare
        if spare is None or spare.size(2) < rows:
            spare = self.kv.new_empty((*self.kv.shape[:2], rows, *self.kv.shape[3:]))
        kept = spare[:, :, :rows]
        kept[:, :, :, :, : self.length] = torch.index_select(
            self.kv[:, :, :, :, : self.length], 2, indices
        )
        self._spare, self._buffer, self.kv = self._buffer, spare, kept
        if self.cross[0][0].size(0) > 1:  # one source per row: the rows move with their source
            self.cross = [(keys[indices], values[indices]) for keys, values in self.cross]
            self._expanded.clear()
            if self.src_mask is not None:
                self.src_mask = self.src_mask[indices]


def _heads_off(off: LayerOff | None, sublayer: str, heads: Tensor) -> Tensor:
    """``heads`` (B, H, T, K) with the heads ``off`` switches off replaced by their fill."""
    if off is None or sublayer not in off.heads:
        return heads
    keep, fill = off.heads[sublayer]
    return torch.where(keep, heads, fill)


def _output(off: LayerOff | None, sublayer: str, output: Tensor) -> Tensor:
    return output if off is None else off.output(sublayer, output)


def _layer_norm(x: Tensor, norm: nn.LayerNorm) -> Tensor:
    """``norm(x)`` without the module call (the same ``torch.layer_norm``)."""
    return torch.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
