"""The decode step without the lesson: the same model, the same arithmetic, nothing recorded.

``model/transformer.py`` writes attention out step by step (raw, scaled, masked scores, weights)
and can record every intermediate, because the pages explain exactly that. Decoding does not
need any of it: it needs the next token's logits, fast. ``LeanDecoder`` computes them from the
same weights with fewer, larger operations:

- Q, K and V of the masked self-attention come from one fused projection;
- keys and values are written into a KV cache allocated once for the whole translation (no
  ``torch.cat`` per step), and the cross-attention's K and V are projected from the encoder
  output once;
- attention is PyTorch's fused ``scaled_dot_product_attention`` (softmax(QKᵀ/√d_k)·V in one call).

It has the interface of ``IncrementalDecoder`` (``step`` and ``reorder``), so greedy decoding,
sampling, forcing and beam search run on it unchanged. The numbers the pages show still come from
the written-out model (``Translator.trace`` replays the chosen tokens through it); the tests check
that both paths choose the same tokens and give the same logits to 1e-5.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.transformer import NEVER_GENERATED, PAD_ID, Transformer, padding_mask


class _Projection:
    """One or several ``nn.Linear`` fused into one product, laid out for the few rows a step has.

    One row (greedy, sampling): ``addmm(bias, x, Wᵀ)`` with Wᵀ contiguous streams the weights in
    the order the CPU reads fastest. Several rows (beam search, the uncached race): oneDNN's
    blocked weight layout (4 rows took about half the time of the plain layout in a cold-cache
    measurement, where the plain layout took ~4× its one-row time). Either gives ``linear(x)`` to
    float rounding.
    """

    def __init__(self, *linears: nn.Linear):
        weight = torch.cat([linear.weight for linear in linears])
        self.bias = torch.cat([linear.bias for linear in linears])
        self.transposed = weight.t().contiguous()
        self.blocked = _blocked(weight)

    def __call__(self, x: Tensor) -> Tensor:
        if x.size(0) > 1 and self.blocked is not None:
            return _LINEAR_POINTWISE(x, self.blocked, self.bias, "none", [], "")
        return torch.addmm(self.bias, x, self.transposed)


# oneDNN's product on the blocked layout, its one overload named (no overload resolution per call)
_LINEAR_POINTWISE = (torch.ops.mkldnn._linear_pointwise.default
                     if torch.backends.mkldnn.is_available() else None)


def _blocked(weight: Tensor) -> Tensor | None:
    """``weight`` in oneDNN's layout for a few rows at a time, where this PyTorch build has it."""
    if not torch.backends.mkldnn.is_available():
        return None
    try:
        return torch.ops.mkldnn._reorder_linear_weight(weight, 4)
    except (AttributeError, RuntimeError):
        return None


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
    """The decoder's weights rearranged for steps of a few rows, built once per model and rebuilt
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


def _enter(layer: nn.Module) -> None:
    """Run ``layer``'s forward pre-hooks as if it were called. The lean step skips the module call,
    not what hangs on it: the server's engine checks there whether the request was cancelled."""
    for hook in layer._forward_pre_hooks.values():
        hook(layer, ())


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
class _Cache:
    """One decoder layer's cache, as the /kv-cache page reads it."""

    keys: Tensor  # (B, H, capacity, d_head): the self-attention KV cache, filled up to ``length``
    values: Tensor
    cross_keys: Tensor  # (B_src, H, S, d_head): projected once from the encoder output
    cross_values: Tensor


class LeanDecoder:
    """Feeds the decoder one token at a time with a preallocated KV cache; records nothing."""

    def __init__(self, model: Transformer, src_ids: Tensor, memory: Tensor, capacity: int):
        config = model.config
        self.model = model
        self.weights = _weights(model)
        self.heads, self.d_head, self.d_model = config.n_heads, config.d_head, config.d_model
        self.memory = memory
        self.capacity = capacity
        self.length = 0  # positions already in the cache
        # no padding in the source (one sentence, or beams of it): no mask to apply at all
        self.src_mask = None if bool((src_ids != PAD_ID).all()) else padding_mask(src_ids)
        # every layer's self-attention keys [:, 0] and values [:, 1] in one tensor, so that beam
        # search reorders them all in one copy: (layers, 2, B, H, capacity, d_head)
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

    @property
    def caches(self) -> list[_Cache]:
        """Every layer's cache (views, not copies)."""
        return [_Cache(self.kv[index, 0], self.kv[index, 1], keys, values)
                for index, (keys, values) in enumerate(self.cross)]

    def _heads(self, x: Tensor) -> Tensor:
        """(B, L, D) → (B, H, L, d_head)."""
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

    def step(self, new_ids: Tensor) -> Tensor:
        """Append ``new_ids`` (B,) and return the logits for the next position (B, V)."""
        position = self.length
        if position >= self.capacity:
            raise ValueError(f"the KV cache holds {self.capacity} positions")
        embedding = self.model.tgt_embedding
        y = (F.embedding(new_ids, embedding.tokens.weight) * embedding.scale
             + embedding.positions[position])  # (B, D): one new position per row
        batch, heads, d_head, d_model = y.size(0), self.heads, self.d_head, self.d_model
        end = position + 1
        for weights, kv, (cross_keys, cross_values) in zip(
            self.weights.layers, self.kv, self._cross_for(batch), strict=True
        ):
            _enter(weights.layer)
            norm1, norm2, norm3 = weights.norms
            qkv = weights.qkv(y).view(batch, 3, heads, d_head)
            kv.select(3, position).copy_(qkv[:, 1:].transpose(0, 1))  # K and V: (2, B, H, d_head)
            keys, values = kv.narrow(3, 0, end).unbind(0)
            attended = F.scaled_dot_product_attention(qkv.select(1, 0).unsqueeze(2), keys, values)
            y = _layer_norm(y + weights.out(attended.view(batch, d_model)), norm1)
            crossed = F.scaled_dot_product_attention(
                weights.cross_q(y).view(batch, heads, 1, d_head), cross_keys, cross_values,
                attn_mask=self.src_mask,
            ).view(batch, d_model)
            y = _layer_norm(y + weights.cross_out(crossed), norm2)
            y = _layer_norm(y + weights.ffn2(weights.activate(weights.ffn1(y))), norm3)
        self.length = end
        # the fresh logits masked in place: the values mask_special gives, without a copy
        return self.weights.output(y).index_fill_(-1, self.weights.never_generated, float("-inf"))

    def step_without_cache(self, prefix: Tensor) -> Tensor:
        """The next position's logits (B, V) for the whole ``prefix`` (B, T), recomputing every
        position's keys and values (the cross-attention's too) as a decoder without a KV cache
        must: the same lean arithmetic as ``step``, so the /kv-cache race compares the cache alone.
        """
        embedding = self.model.tgt_embedding
        length = prefix.size(1)
        y = F.embedding(prefix, embedding.tokens.weight) * embedding.scale + embedding.positions[:length]
        batch, rows = prefix.size(0), prefix.numel()
        y = y.reshape(rows, self.d_model)  # every position of every row: one matrix
        for weights in self.weights.layers:
            _enter(weights.layer)
            norm1, norm2, norm3 = weights.norms
            cross = weights.layer.cross_attention
            q, k, v = (weights.qkv(y).view(batch, length, 3, self.heads, self.d_head)
                       .permute(2, 0, 3, 1, 4))
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = norm1(y + weights.out(attended.transpose(1, 2).reshape(rows, self.d_model)))
            crossed = F.scaled_dot_product_attention(
                self._heads(weights.cross_q(y).view(batch, length, self.d_model)),
                self._heads(cross.w_k(self.memory)), self._heads(cross.w_v(self.memory)),
                attn_mask=self.src_mask,
            )
            y = norm2(y + weights.cross_out(crossed.transpose(1, 2).reshape(rows, self.d_model)))
            y = norm3(y + weights.ffn2(weights.activate(weights.ffn1(y))))
        last = y.view(batch, length, self.d_model)[:, -1]
        return self.weights.output(last).index_fill_(-1, self.weights.never_generated, float("-inf"))

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


def _layer_norm(x: Tensor, norm: nn.LayerNorm) -> Tensor:
    """``norm(x)`` without the module call (the same ``torch.layer_norm``)."""
    return torch.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
