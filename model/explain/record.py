"""One recorded pass through the model, and the questions the pages ask of it.

``model/transformer.py`` writes what every module computed into a nested dict while it runs
(``encode(..., record=...)``, ``decode(..., record=...)``); this module is the only code that reads
that dict. Everything else asks a :class:`RecordedPass` typed questions: the stages of a side in
the order the data flows, a sublayer's input and output, the FFN's hidden units, an attention
head's Q, K, V and scores, the logits.

The layout, as the writer spells it (the same sublayer has the same name on both sides; each
Add & Norm is named after the sublayer whose output it adds):

    {"embedding": {"token", "position", "sum"},               (1, L, D) each
     "layers": [{"self_attention": {q, k, v, raw, scaled, masked, weights},   (1, H, L, ·)
                 "self_attention_add_norm": {residual, sublayer, sum, normed}, (1, L, D) each
                 "cross_attention": {...}, "cross_attention_add_norm": {...},  decoder only
                 "ffn": {"hidden"},                                            (1, L, d_ff)
                 "ffn_add_norm": {...}}, ...],
     "final": (1, T, D), "logits": (1, T, V)}                                  decoder only
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch
from torch import Tensor

from model.decoding import mask_special
from model.explain.trace import SAMPLE_DIMS, _round, add_norm_stats, embedding_data, ffn_stats, heads
from model.transformer import Transformer

if TYPE_CHECKING:
    from model.explain.trace import Trace

Side = Literal["encoder", "decoder"]
SUBLAYERS: dict[str, tuple[str, ...]] = {
    "encoder": ("self_attention", "ffn"),
    "decoder": ("self_attention", "cross_attention", "ffn"),
}
# What the trace (and so every page and the JSON API) calls each sublayer's Add & Norm: numbered
# in the order they come in a layer, as the module names of model/transformer.py do.
ADD_NORM_NAMES: dict[str, dict[str, str]] = {
    side: {sublayer: f"add_norm{i + 1}" for i, sublayer in enumerate(names)}
    for side, names in SUBLAYERS.items()
}
# the attention kinds of the detail view: name → (side, sublayer)
ATTENTION_KINDS: dict[str, tuple[Side, str]] = {
    "encoder": ("encoder", "self_attention"),
    "decoder_self": ("decoder", "self_attention"),
    "cross": ("decoder", "cross_attention"),
}


# What each sublayer is, as a page draws it (the kinds are the same on both sides), and what its
# attention reads: its own side's positions, or the encoder's memory
SUBLAYER_KINDS: dict[str, str] = {"self_attention": "attention", "cross_attention": "attention",
                                  "ffn": "feed_forward"}
ATTENDS: dict[str, str] = {"self_attention": "self", "cross_attention": "cross"}
EMBEDDING = "embedding"  # each side's first stage: the scaled token vectors + positional encoding
OUTPUT = "output"  # the decoder's output head: the linear layer over the vocabulary and softmax


def layout(side: Side, n_layers: int) -> list[dict]:
    """A side's stages in the order the data flows (:meth:`RecordedPass.stages`' order, so the
    i-th entry is the i-th stage), as plain data a page loops over; the decoder's list ends with
    its output head (no stage of its own). Each entry: ``name`` (the trace's), ``layer`` (None
    for the embedding and the output head) and ``kind`` — "embed", "attention", "add_norm",
    "feed_forward" or "logits"; an attention also says what it ``attends`` ("self" or "cross":
    the encoder's memory), whether it is ``masked`` (a position sees no later one) and the name
    of its ``weights`` (``ATTENTION_KINDS``); an Add & Norm names the sublayer it comes ``after``
    and its index among its layer's Add & Norms (``norm``)."""
    kinds = {sublayer: kind for kind, (where, sublayer) in ATTENTION_KINDS.items() if where == side}
    entries: list[dict] = [{"name": EMBEDDING, "layer": None, "kind": "embed"}]
    for layer in range(n_layers):
        for index, sublayer in enumerate(SUBLAYERS[side]):
            entry = {"name": sublayer, "layer": layer, "kind": SUBLAYER_KINDS[sublayer]}
            if sublayer in ATTENDS:
                entry.update(attends=ATTENDS[sublayer], weights=kinds[sublayer],
                             masked=side == "decoder" and ATTENDS[sublayer] == "self")
            entries += [entry, {"name": ADD_NORM_NAMES[side][sublayer], "layer": layer,
                                "kind": "add_norm", "after": sublayer, "norm": index}]
    if side == "decoder":
        entries.append({"name": OUTPUT, "layer": None, "kind": "logits"})
    return entries


def block_names() -> list[str]:
    """Every block a page can open, in the decoder's order (the encoder's are among them)."""
    return list(dict.fromkeys(entry["name"] for entry in layout("decoder", 1)))


def add_norm_key(sublayer: str) -> str:
    """The record key of the Add & Norm that follows ``sublayer`` (the writer uses it too)."""
    return f"{sublayer}_add_norm"


def stage_names(side: Side) -> list[str]:
    """A layer's stages in the order the data flows, by the trace's names."""
    return [name for sublayer in SUBLAYERS[side]
            for name in (sublayer, ADD_NORM_NAMES[side][sublayer])]


@dataclass
class RecordedPass:
    """What one encoder pass and one teacher-forced decoder pass over the same ids recorded."""

    encoder: dict
    decoder: dict

    @classmethod
    def run(cls, model: Transformer, source_ids: list[int], decoder_ids: list[int],
            grad: bool = False) -> RecordedPass:
        """Encode ``source_ids`` and decode ``decoder_ids`` teacher-forced, recording everything
        (with ``grad``, inside autograd, so gradients can be taken at any recorded tensor): the
        decoder as a trace replays it, every position in one pass."""
        encoder: dict = {}
        decoder: dict = {}
        with torch.enable_grad() if grad else torch.inference_mode():
            src = torch.tensor([source_ids])
            memory = model.encode(src, record=encoder)
            model.decode(torch.tensor([decoder_ids]), memory, src, record=decoder)
        return cls(encoder, decoder)

    def _side(self, side: Side) -> dict:
        return self.encoder if side == "encoder" else self.decoder

    def n_layers(self, side: Side) -> int:
        return len(self._side(side)["layers"])

    # -- vectors ---------------------------------------------------------------------------------

    def embedding(self, side: Side, part: str = "sum") -> Tensor:
        """(L, D): the scaled token vectors ("token"), the positional encoding ("position") or
        their sum, the first layer's input."""
        return self._side(side)["embedding"][part][0]

    def attention(self, side: Side, layer: int, sublayer: str = "self_attention") -> dict:
        """One attention sublayer's record: q, k, v, raw, scaled, masked, weights (1, H, ·, ·)."""
        return self._side(side)["layers"][layer][sublayer]

    def head_outputs(self, side: Side, layer: int, sublayer: str) -> Tensor:
        """(H, L, K): each head's softmax(QKᵀ/√d_k)·V, the slices W_O reads side by side."""
        record = self.attention(side, layer, sublayer)
        return (record["weights"] @ record["v"])[0]

    def add_norm(self, side: Side, layer: int, sublayer: str) -> dict:
        """The Add & Norm after ``sublayer``: residual, sublayer, sum, normed (1, L, D) each."""
        return self._side(side)["layers"][layer][add_norm_key(sublayer)]

    def ffn_hidden(self, side: Side, layer: int) -> Tensor:
        """(L, d_ff): the FFN's hidden units after the activation."""
        return self._side(side)["layers"][layer]["ffn"]["hidden"][0]

    def sublayer_output(self, side: Side, layer: int, sublayer: str) -> Tensor:
        """(L, D): what ``sublayer`` adds to the residual stream."""
        return self.add_norm(side, layer, sublayer)["sublayer"][0]

    def sublayer_input(self, side: Side, layer: int, sublayer: str) -> Tensor:
        """(L, D): the residual stream a sublayer reads (the previous stage's output)."""
        names = SUBLAYERS[side]
        index = names.index(sublayer)
        if index > 0:
            return self.add_norm(side, layer, names[index - 1])["normed"][0]
        return self.layer_output(side, layer - 1) if layer > 0 else self.embedding(side)

    def layer_output(self, side: Side, layer: int) -> Tensor:
        """(L, D): what a layer hands to the next one."""
        return self.add_norm(side, layer, SUBLAYERS[side][-1])["normed"][0]

    def layer_outputs(self, side: Side) -> list[Tensor]:
        return [self.layer_output(side, layer) for layer in range(self.n_layers(side))]

    def stages(self, side: Side) -> list[tuple[str, int | None, Tensor]]:
        """(name, layer, (L, D) vectors) after every stage, in the order the data flows: the
        embedding, then per layer each sublayer's output and its Add & Norm's output."""
        out: list[tuple[str, int | None, Tensor]] = [(EMBEDDING, None, self.embedding(side))]
        for layer in range(self.n_layers(side)):
            for sublayer in SUBLAYERS[side]:
                out.append((sublayer, layer, self.sublayer_output(side, layer, sublayer)))
                out.append((ADD_NORM_NAMES[side][sublayer], layer,
                            self.add_norm(side, layer, sublayer)["normed"][0]))
        return out

    def block_records(self, side: Side, block: str, layer: int) -> tuple[str, dict]:
        """A trace name of a block ("add_norm2", "ffn", …) → (its sublayer, its record)."""
        for sublayer in SUBLAYERS[side]:
            if block == sublayer:
                return sublayer, self._side(side)["layers"][layer][sublayer]
            if block == ADD_NORM_NAMES[side][sublayer]:
                return sublayer, self.add_norm(side, layer, sublayer)
        raise KeyError(f"no block {block!r} in the {side}")

    @property
    def final(self) -> Tensor:
        """(T, D): the last decoder layer's output, which the output projection reads."""
        return self.decoder["final"][0]

    @property
    def logits(self) -> Tensor:
        """(T, V): the next-token logits at every position, <pad>/<bos> masked as decoding masks them."""
        return mask_special(self.unmasked_logits)

    @property
    def unmasked_logits(self) -> Tensor:
        """(T, V): the output projection's logits as they are (what training's loss reads)."""
        return self.decoder["logits"][0]

    # -- the trace's per-layer records, grouped for its statistics ------------------------------

    def records(self, side: Side, kind: str) -> list[dict]:
        """Every layer's records of one kind, layer by layer: "attention:<sublayer>",
        "add_norm:<sublayer>" or "ffn"."""
        layers = range(self.n_layers(side))
        if kind == "ffn":
            return [self._side(side)["layers"][layer]["ffn"] for layer in layers]
        what, sublayer = kind.split(":")
        if what == "attention":
            return [self.attention(side, layer, sublayer) for layer in layers]
        return [self.add_norm(side, layer, sublayer) for layer in layers]

    # -- plain data for the trace ---------------------------------------------------------------

    def layer_statistics(self, side: Side) -> list[dict]:
        """Per layer, by the trace's names: each attention's weights [head][query][key], each
        Add & Norm's statistics and the FFN's (``model/explain/trace.py``'s lists)."""
        sublayers = SUBLAYERS[side]
        n = self.n_layers(side)
        # every statistic is computed for all records of a pass at once (they all cover the same
        # positions): a few conversions per pass instead of a few per record
        norms = add_norm_stats([r for sub in sublayers for r in self.records(side, f"add_norm:{sub}")])
        columns: dict[str, list] = {}
        for index, sublayer in enumerate(sublayers):
            if sublayer == "ffn":
                columns["ffn"] = ffn_stats(self.records(side, "ffn"),
                                           self.records(side, "add_norm:ffn"))
            else:
                columns[sublayer] = heads(self.records(side, f"attention:{sublayer}"))
            columns[ADD_NORM_NAMES[side][sublayer]] = norms[index * n : (index + 1) * n]
        return [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]

    def embedding_data(self, side: Side) -> dict:
        """The token vectors, the positional encoding and their sum, rounded ([pos][d] each)."""
        return embedding_data(self._side(side)["embedding"])

    def attention_detail(self, kind: str, layer: int, head: int, query_tokens: list[str],
                         key_tokens: list[str]) -> dict:
        """Q, K, V and the raw / scaled / masked scores and weights behind one head's matrix.

        ``kind`` is "encoder", "decoder_self" or "cross" (``ATTENTION_KINDS``).
        """
        side, sublayer = ATTENTION_KINDS[kind]
        record = self.attention(side, layer, sublayer)
        masked = record["masked"][0, head].detach().float().numpy()
        return {
            "kind": kind,
            "layer": layer,
            "head": head,
            "d_k": int(record["q"].size(-1)),
            "query_tokens": query_tokens,
            "key_tokens": key_tokens,
            "q": _round(record["q"][0, head], 4),
            "k": _round(record["k"][0, head], 4),
            "v": _round(record["v"][0, head], 4),
            "raw": _round(record["raw"][0, head], 4),
            "scaled": _round(record["scaled"][0, head], 4),
            # -inf (blocked) becomes None so the data stays valid JSON
            "masked": [[None if math.isinf(x) else round(float(x), 4) for x in row] for row in masked],
            "weights": _round(record["weights"][0, head], 5),
            "output": _round(record["weights"][0, head] @ record["v"][0, head], 4),
        }

    def ffn_units(self, side: Side, top: int, dims: int = SAMPLE_DIMS) -> list[dict]:
        """Per layer and position: the ``top`` most active hidden units (index, value), and the
        first ``dims`` dimensions of the FFN's input x and output FFN(x), with both norms."""
        out = []
        for layer in range(self.n_layers(side)):
            hidden = self.ffn_hidden(side, layer)  # (positions, d_ff)
            values, units = torch.topk(hidden, k=min(top, hidden.size(-1)), dim=-1)
            x = self.sublayer_input(side, layer, "ffn")  # (positions, D)
            fx = self.sublayer_output(side, layer, "ffn")
            out.append({"top_units": units.tolist(), "top_values": _np_round(values, 3),
                        "input_sample": _np_round(x[:, :dims]),
                        "output_sample": _np_round(fx[:, :dims]),
                        "input_norm": _np_round(x.norm(dim=-1), 3),
                        "output_norm": _np_round(fx.norm(dim=-1), 3)})
        return out


def _np_round(values: Tensor, digits: int = 4) -> list:
    return np.round(values.detach().double().numpy(), digits).tolist()


def gradient_flow(model: Transformer, source_ids: list[int], decoder_ids: list[int],
                  labels: list[int]) -> list[dict]:
    """The gradient of Σ log p(label) — the training loss, negated — at every sublayer's
    Add & Norm, in data-flow order (encoder, then decoder). For x + F(x): ‖∂L/∂(x + F(x))‖ is what
    reaches x unchanged through the shortcut, and ∂L/∂x minus that is what comes back through the
    sublayer F. Weights are not touched (torch.autograd.grad)."""
    with torch.enable_grad():
        recorded = RecordedPass.run(model, source_ids, decoder_ids, grad=True)
        log_probs = torch.log_softmax(recorded.unmasked_logits[: len(labels)].float(), dim=-1)
        total = log_probs[torch.arange(len(labels)), torch.tensor(labels)].sum()
        places = [(side, layer, sublayer, recorded.add_norm(side, layer, sublayer))
                  for side, names in SUBLAYERS.items()
                  for layer in range(recorded.n_layers(side)) for sublayer in names]
        tensors = [t for *_, r in places for t in (r["residual"], r["sum"])]
        grads = torch.autograd.grad(total, tensors, allow_unused=True)
    rows = []
    for number, (side, layer, sublayer, _) in enumerate(places):
        at_x, at_sum = grads[2 * number], grads[2 * number + 1]
        at_x = torch.zeros_like(tensors[2 * number]) if at_x is None else at_x
        at_sum = torch.zeros_like(at_x) if at_sum is None else at_sum
        rows.append({"side": side, "layer": layer, "sublayer": sublayer,
                     "at_input": round(float(at_x.norm()), 5),
                     "shortcut": round(float(at_sum.norm()), 5),
                     "through_sublayer": round(float((at_x - at_sum).norm()), 5)})
    return rows


def ffn_units_of(trace: Trace, top: int) -> dict[str, list[dict]]:
    """``RecordedPass.ffn_units`` of both sides of a trace's own pass."""
    return {side: trace.recorded.ffn_units(side, top) for side in ("encoder", "decoder")}


def gradient_flow_of(translator, trace: Trace) -> list[dict]:
    """``gradient_flow`` of a trace's translation (labels: the characters it chose)."""
    return gradient_flow(translator.model, trace.source_ids, trace.decoder_ids,
                         [step.id for step in trace.steps])


# -- a trace's per-layer lists, typed: pages read a layer by stage, never by its record key --------


@dataclass(frozen=True)
class EncoderLayerLists:
    """One layer of ``Trace.encoder`` by stage: each sublayer's numbers, then its Add & Norm."""

    self_attention: list  # [head][S][S] attention weights
    after_self_attention: dict  # the Add & Norm after it: statistics per position
    ffn: dict  # active share, norms, most active units per position
    after_ffn: dict

    @property
    def add_norms(self) -> tuple[tuple[str, dict], ...]:
        """(sublayer, the Add & Norm after it), in the layer's order."""
        return (("self_attention", self.after_self_attention), ("ffn", self.after_ffn))


@dataclass(frozen=True)
class DecoderLayerLists:
    """One layer of ``Trace.decoder`` by stage: each sublayer's numbers, then its Add & Norm."""

    self_attention: list  # [head][T][T] masked attention weights
    after_self_attention: dict
    cross_attention: list  # [head][T][S]
    after_cross_attention: dict
    ffn: dict
    after_ffn: dict

    @property
    def add_norms(self) -> tuple[tuple[str, dict], ...]:
        """(sublayer, the Add & Norm after it), in the layer's order."""
        return (("self_attention", self.after_self_attention),
                ("cross_attention", self.after_cross_attention), ("ffn", self.after_ffn))


_LAYER_LISTS = {"encoder": EncoderLayerLists, "decoder": DecoderLayerLists}


def layer_lists(trace: Trace, side: Side) -> list[EncoderLayerLists] | list[DecoderLayerLists]:
    """Every layer of ``side``'s lists in the trace, typed (the keys are read here only)."""
    blocks = trace.encoder if side == "encoder" else trace.decoder
    keys = [(sublayer, sublayer) for sublayer in SUBLAYERS[side]]
    keys += [(f"after_{sublayer}", key) for sublayer, key in ADD_NORM_NAMES[side].items()]
    return [_LAYER_LISTS[side](**{name: block[key] for name, key in keys}) for block in blocks]
