"""The cached decoder step: new positions per row, their keys and values kept in one KV cache.

``model/transformer.py`` is the model as the documents draw it; its ``decode`` runs the whole
target prefix at once and serves training. ``CachedDecoder`` is the one decoder step for
everything that decodes: greedy, sampling, beam search, forcing, parts switched off, the
/kv-cache race, and the recorded replay a trace shows. It runs the same sublayers on the same
weights, in one of two ways:

- **decoding** (nothing recorded): fewer, larger public PyTorch operations. Q, K and V of the
  masked self-attention come from one fused product, every product is ``addmm(bias, x, Wᵀ)`` on a
  transposed copy of the weights made once per model (the layout a CPU streams fastest for the
  one to few rows a step has; <pad> and <bos> are -inf in the output's bias, so their logits come
  out -inf with no second pass), and attention is PyTorch's fused ``scaled_dot_product_attention``;
- **recording** (``step(…, record=)``, the replay of a chosen translation): each product is the
  layer's own ``nn.Linear`` and attention is ``model/transformer.py``'s written-out
  softmax(QKᵀ/√d_k)·V, so the record holds exactly what ``Transformer.decode(record=)`` would
  (tensor for tensor: ``tests/model/test_lean.py``), in the layout ``model/explain/record.py`` reads.

Either way keys and values are written into one KV cache allocated once for the whole
translation (no ``torch.cat`` per step), and the cross-attention's K and V are projected from the
encoder output once. Each layer's step runs through that layer's module call
(``DecoderLayer(…, cached=step)``), so what hangs on the layer, such as the server's cancellation
hook, runs at every step.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.parts_off import Ablation, LayerOff
from model.transformer import (
    NEVER_GENERATED,
    PAD_ID,
    Transformer,
    padding_mask,
    scaled_dot_product_attention,
)

# Shapes: B rows (hypotheses), T new positions per row, H heads, K head dim, D d_model,
# C cache capacity, S source length, V vocabulary


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
    layer: nn.Module  # the DecoderLayer these weights come from (recording calls its own modules)
    qkv: _Projection  # masked self-attention: W_q, W_k, W_v side by side
    out: _Projection  # its W_o
    cross_q: _Projection
    cross_out: _Projection
    ffn1: _Projection
    activate: Callable[[Tensor], Tensor]  # the FFN's non-linearity (ReLU here, SiLU in Marian)
    ffn2: _Projection
    norms: tuple[tuple, tuple, tuple]  # each Add & Norm's torch.layer_norm arguments after x


class _Weights:
    """The decoder's weights laid out for steps of a few rows, built once per model and rebuilt
    when a parameter changes (training updates them in place, which bumps their version counters)."""

    def __init__(self, model: Transformer):
        self.parameters = list(model.parameters())  # walking the modules for them takes ~0.8 ms
        self.versions = _versions(self.parameters)
        self.layers = []
        for layer in model.decoder_layers:
            own, cross, ffn = layer.self_attention, layer.cross_attention, layer.ffn
            norms = (layer.add_norm1.norm, layer.add_norm2.norm, layer.add_norm3.norm)
            self.layers.append(_LayerWeights(
                layer=layer, qkv=_Projection(own.w_q, own.w_k, own.w_v), out=_Projection(own.w_o),
                cross_q=_Projection(cross.w_q), cross_out=_Projection(cross.w_o),
                ffn1=_Projection(ffn.linear1), activate=ffn.activate, ffn2=_Projection(ffn.linear2),
                norms=tuple((n.normalized_shape, n.weight, n.bias, n.eps) for n in norms),
            ))
        self.output = _Projection(model.output)
        # what mask_special does to the logits, done by the bias: -inf + any finite sum is -inf
        self.output.bias[list(NEVER_GENERATED)] = float("-inf")


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
    """Feeds the decoder new tokens per row with a preallocated KV cache.

    ``ablation`` switches the decoder's parts off at every step, as ``Transformer.decode`` does
    (the encoder's part is in ``memory`` already).
    """

    def __init__(self, model: Transformer, src_ids: Tensor, memory: Tensor, capacity: int,
                 ablation: Ablation | None = None):
        config = model.config
        self.model = model
        self.weights = _weights(model)
        self.heads, self.d_head, self.d_model = config.n_heads, config.d_head, config.d_model
        self.src_ids, self.memory, self.ablation = src_ids, memory, ablation
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
        # each layer's module and what is switched off in it; and the embedding
        # (module attributes looked up once, not at every step)
        layers = list(model.decoder_layers)
        self._layers = list(zip(layers, self.offs, strict=True))
        embedding = model.tgt_embedding
        self._token_weight, self._scale = embedding.tokens.weight, embedding.scale
        self._positions = embedding.positions
        # the step in progress: its rows' cross K/V, its shape (B, T) and what it records
        self._rows_cross = self.cross
        self._shape = (src_ids.size(0), 1)
        self._record: list[dict] | None = None

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

    def step(self, new_ids: Tensor, record: dict | None = None) -> Tensor:
        """Append ``new_ids`` (B,) or (B, T) and return the logits for the position after each
        (B, V) or (B, T, V), <pad> and <bos> at -inf. ``record`` (a dict) receives what
        ``Transformer.decode(record=)`` records, computed exactly as it computes it."""
        rows = new_ids.size(0)
        single = new_ids.dim() == 1  # one new position per row
        new = 1 if single else new_ids.size(1)
        start = self.length
        if start + new > self.capacity:
            raise ValueError(f"the KV cache holds {self.capacity} positions")
        token = F.embedding(new_ids, self._token_weight) * self._scale
        position = self._positions[start] if single else self._positions[start : start + new]
        y = token + position if self.positions else token  # (B, D) or (B, T, D)
        if record is not None:
            position = position if self.positions else torch.zeros_like(position)
            record["embedding"] = {"token": token, "position": position.expand_as(token), "sum": y}
            self._record = record.setdefault("layers", [{} for _ in self.cross])
        self._rows_cross = self._cross_for(rows)
        self._shape = (rows, new)
        # decoding: every new position a row of one matrix (B·T, D); recording: (B, T, D), as the
        # written-out decoder records them (and so that autograd reaches what is recorded)
        if record is None and not single:
            y = y.reshape(rows * new, self.d_model)
        try:
            for index, (layer, off) in enumerate(self._layers):  # the step made here, not kept:
                # a decoder holding its own bound methods is a cycle, its KV buffers freed late
                y = layer(y, None, None, None, off=off, cached=partial(self._layer_step, index))
        finally:
            self._record = None
        self.length += new
        if record is None:
            output = self.weights.output
            logits = torch.addmm(output.bias, y, output.transposed)
        else:
            record["final"] = y
            record["logits"] = self.model.output(y)
            logits = record["logits"].index_fill(-1, torch.tensor(NEVER_GENERATED), float("-inf"))
        if single:  # (B, V)
            return logits if record is None else logits.view(rows, -1)
        return logits.view(rows, new, -1)

    def _layer_step(self, index: int, y: Tensor, off: LayerOff | None) -> Tensor:
        """Decoder layer ``index`` for the step's new positions (B·T, D) through the KV cache, or
        (B, T, D) when recording (``_record_layer_step``). Decoding calls every operation here,
        none through a helper: on one to a few rows, a Python call costs a fair share of one."""
        if self._record is not None:
            return self._record_layer_step(index, y, off)
        weights, kv = self.weights.layers[index], self.kv[index]  # kv: (2, B, H, C, K)
        (batch, new), heads, d_head = self._shape, self.heads, self.d_head
        start, end = self.length, self.length + new
        norm1, norm2, norm3 = weights.norms
        # masked self-attention: Q, K and V in one product; the new keys and values go into the
        # cache, the queries attend to every position so far
        qkv = torch.addmm(weights.qkv.bias, y, weights.qkv.transposed).view(batch, new, 3, heads, d_head)
        kv.narrow(3, start, new).copy_(qkv[:, :, 1:].permute(2, 0, 3, 1, 4))  # (2, B, H, T, K)
        keys, values = kv.narrow(3, 0, end).unbind(0)
        mask = None if new == 1 else _later_blocked(start, new, y.device)  # a row sees its past
        attended = F.scaled_dot_product_attention(qkv[:, :, 0].transpose(1, 2), keys, values,
                                                  attn_mask=mask)  # (B, H, T, K)
        if off is not None:
            attended = _heads_off(off, "self_attention", attended)
        output = torch.addmm(weights.out.bias, attended.transpose(1, 2).reshape(y.shape),
                             weights.out.transposed)
        y = torch.layer_norm(y + (output if off is None else off.output("self_attention", output)),
                             *norm1)
        # cross-attention to the source, whose keys and values were projected once
        cross_keys, cross_values = self._rows_cross[index]
        query = torch.addmm(weights.cross_q.bias, y, weights.cross_q.transposed)
        crossed = F.scaled_dot_product_attention(
            query.view(batch, new, heads, d_head).transpose(1, 2), cross_keys, cross_values,
            attn_mask=self.src_mask)
        if off is not None:
            crossed = _heads_off(off, "cross_attention", crossed)
        output = torch.addmm(weights.cross_out.bias, crossed.transpose(1, 2).reshape(y.shape),
                             weights.cross_out.transposed)
        y = torch.layer_norm(y + (output if off is None else off.output("cross_attention", output)),
                             *norm2)
        # position-wise feed-forward
        hidden = weights.activate(torch.addmm(weights.ffn1.bias, y, weights.ffn1.transposed))
        output = torch.addmm(weights.ffn2.bias, hidden, weights.ffn2.transposed)
        return torch.layer_norm(y + (output if off is None else off.output("ffn", output)), *norm3)

    def _record_layer_step(self, index: int, y: Tensor, off: LayerOff | None) -> Tensor:
        """Decoder layer ``index`` for the step's new positions (B, T, D), each product the
        layer's own ``nn.Linear`` and attention written out, recorded as ``DecoderLayer`` records."""
        weights, kv, record = self.weights.layers[index], self.kv[index], self._record[index]
        layer = weights.layer
        new, start = self._shape[1], self.length
        norm1, norm2, norm3 = weights.norms
        own = layer.self_attention
        query, k, v = (self._rows(linear(y)) for linear in (own.w_q, own.w_k, own.w_v))
        kv[0].narrow(2, start, new).copy_(k)
        kv[1].narrow(2, start, new).copy_(v)
        # from an empty cache the keys are the ones just computed: attending to them, not to the
        # cache, keeps autograd's graph (gradient flow) clear of the buffer written in place
        keys, values = (k, v) if start == 0 else kv.narrow(3, 0, start + new).unbind(0)
        mask = None if new == 1 else _later_blocked(start, new, y.device)
        attended = scaled_dot_product_attention(query, keys, values, mask,
                                                _part(record, "self_attention"))[0]
        y = self._add_norm(y, self._merge(off, "self_attention", attended, y.shape, own.w_o),
                           off, "self_attention", norm1, record)
        cross_keys, cross_values = self._rows_cross[index]
        crossed = scaled_dot_product_attention(
            self._rows(layer.cross_attention.w_q(y)), cross_keys, cross_values, self.src_mask,
            _part(record, "cross_attention"))[0]
        y = self._add_norm(y, self._merge(off, "cross_attention", crossed, y.shape,
                                          layer.cross_attention.w_o),
                           off, "cross_attention", norm2, record)
        hidden = layer.ffn.activate(layer.ffn.linear1(y))
        _part(record, "ffn")["hidden"] = hidden
        return self._add_norm(y, layer.ffn.linear2(hidden), off, "ffn", norm3, record)

    def _rows(self, x: Tensor) -> Tensor:
        """(B·T, D) or (B, T, D) → (B, H, T, K) for the step in progress."""
        batch, new = self._shape
        return x.view(batch, new, self.heads, self.d_head).transpose(1, 2)

    def _merge(self, off: LayerOff | None, sublayer: str, heads: Tensor, shape: torch.Size,
               linear: nn.Linear) -> Tensor:
        """The heads (B, H, T, K), those ``off`` switches off replaced, concatenated and
        projected by W_O: ``shape``, the layer input's."""
        return linear(_heads_off(off, sublayer, heads).transpose(1, 2).reshape(shape))

    @staticmethod
    def _add_norm(y: Tensor, output: Tensor, off: LayerOff | None, sublayer: str, norm: tuple,
                  record: dict) -> Tensor:
        """LayerNorm(y + what the sublayer adds), recorded as ``AddNorm`` records it."""
        output = _output(off, sublayer, output)
        summed = y + output
        normed = torch.layer_norm(summed, *norm)
        _part(record, f"{sublayer}_add_norm").update(
            residual=y, sublayer=output, sum=summed, normed=normed)
        return normed

    def step_without_cache(self, prefix: Tensor) -> Tensor:
        """The next position's logits (B, V) for the whole ``prefix`` (B, T), recomputing every
        position's keys and values (the cross-attention's too) as a decoder without a KV cache
        must: the same step from an empty cache, so the /kv-cache race compares the cache alone.
        """
        fresh = CachedDecoder(self.model, self.src_ids, self.memory, prefix.size(1), self.ablation)
        return fresh.step(prefix)[:, -1]

    def reorder(self, indices: Tensor) -> None:
        """Keep only the hypotheses at ``indices`` (beam search): rows may repeat or vanish.

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
            # gathered straight into place (no intermediate tensor)
            torch.index_select(self.kv[:, :, :, :, : self.length], 2, indices,
                               out=kept[:, :, :, :, : self.length])
            self._spare, self._buffer, self.kv = self._buffer, spare, kept
        if self.cross[0][0].size(0) > 1:  # one source per row: the rows move with their source
            self.cross = [(keys[indices], values[indices]) for keys, values in self.cross]
            self._expanded.clear()
            if self.src_mask is not None:
                self.src_mask = self.src_mask[indices]


def _later_blocked(start: int, new: int, device: torch.device) -> Tensor:
    """(T, start + T): new position t may attend to positions 0…start + t (True), not later ones."""
    return torch.ones(new, start + new, dtype=torch.bool, device=device).tril(start)


def _part(record: dict | None, name: str) -> dict | None:
    """The sublayer ``name``'s entry in a layer's record (as ``DecoderLayer`` names them)."""
    return None if record is None else record.setdefault(name, {})


def _heads_off(off: LayerOff | None, sublayer: str, heads: Tensor) -> Tensor:
    """``heads`` (B, H, T, K) with the heads ``off`` switches off replaced by their fill."""
    if off is None or sublayer not in off.heads:
        return heads
    keep, fill = off.heads[sublayer]
    return torch.where(keep, heads, fill)


def _output(off: LayerOff | None, sublayer: str, output: Tensor) -> Tensor:
    return output if off is None else off.output(sublayer, output)
