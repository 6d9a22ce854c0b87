"""What one translation looked like inside: plain Python data, no tensors.

``Translator.trace`` turns the tensors recorded during one encoder pass and one decoder pass into
lists and numbers that the web pages and the JSON API read directly, with the functions here. The
decoder pass is the teacher-forced replay of the tokens the decoding strategy chose: because the
decoder is causal, position t of that pass sees exactly what decoding step t saw, so its attention
rows, Add & Norm statistics and probabilities are the ones computed while decoding (a test checks
this against the KV-cached step-by-step decoder).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from model.transformer import BOS_ID

if TYPE_CHECKING:
    from model.explain.record import RecordedPass

SAMPLE_DIMS = 16  # how many dimensions of a vector the pages show as raw numbers
TOP_CANDIDATES = 10


def _round(values: Any, digits: int = 5) -> Any:
    """Tensor/ndarray → nested lists of rounded floats (plain JSON-ready data)."""
    array = values.detach().float().numpy() if isinstance(values, Tensor) else np.asarray(values)
    return np.round(array.astype(np.float64), digits).tolist()


@dataclass
class Candidate:
    token: str
    id: int
    prob: float  # the model's probability (softmax of the logits, temperature 1)
    sample_prob: float  # probability under the strategy's distribution (temperature, top-k, top-p)


@dataclass
class Step:
    position: int
    token: str  # the token chosen at this step (<eos> ends the translation)
    id: int
    prob: float
    log_prob: float
    entropy: float  # of the model's distribution, in nats
    forced: bool  # True when the user fixed this token (forced prefix)
    top: list[Candidate]


@dataclass
class BeamNodeInfo:
    id: int
    step: int
    token: str
    parent: int
    score: float
    finished: bool
    selected: bool


@dataclass
class HypothesisInfo:
    """One hypothesis beam search ranked (``Trace.hypotheses``, best first), in shown numbers: the
    log-probability rounded as the tree's nodes are, and score = that shown log p / penalty, so
    dividing the shown numbers gives the shown score."""

    node: int  # its last node in ``Trace.beam``
    length: int  # tokens, <eos> not counted
    log_prob: float
    penalty: float
    score: float


def shown_hypotheses(ranked: list, beam: list[BeamNodeInfo]) -> list[HypothesisInfo]:
    """Beam search's ranking (``model.decoding.Hypothesis``, best first) in the numbers a page shows."""
    return [HypothesisInfo(node=h.node, length=h.length, log_prob=beam[h.node].score,
                           penalty=round(h.penalty, 4), score=round(beam[h.node].score / h.penalty, 4))
            for h in ranked]


@dataclass
class Trace:
    text: str
    options: dict
    source_tokens: list[str]
    source_ids: list[int]
    target_tokens: list[str]  # the translation, one character per token, no specials
    target_ids: list[int]
    decoder_input: list[str]  # <bos> followed by the translation: the decoder's T positions
    translation: str
    finished: bool
    steps: list[Step]
    beam: list[BeamNodeInfo] = field(default_factory=list)
    hypotheses: list[HypothesisInfo] = field(default_factory=list)  # beam search's ranking
    model_ms: float = 0.0
    # the recorded pass every number was read from (tensors: model/explain/record.py answers
    # questions about it), and what the pages derived from it since (``Engine.derived``)
    recorded: RecordedPass | None = field(default=None, repr=False)
    derived: dict = field(default_factory=dict, repr=False)
    # the lists below, each built from ``recorded`` the first time it is read (a copy made by
    # ``dataclasses.replace`` shares them): a page that reads none of them, the x-ray's, never
    # pays for rounding every attention weight into a list
    lists: dict = field(default_factory=dict, repr=False)

    @property
    def embeddings(self) -> dict:
        """{"encoder"|"decoder": {"token", "position", "sum": [pos][d]}}."""
        return self._list("embeddings")

    @property
    def encoder(self) -> list[dict]:
        """Per layer: self_attention [head][S][S], add_norm1/2, ffn."""
        return self._list("encoder")

    @property
    def decoder(self) -> list[dict]:
        """Per layer: self_attention [head][T][T], cross_attention [head][T][S], add_norm1/2/3, ffn."""
        return self._list("decoder")

    @property
    def projection(self) -> dict:
        """2-D PCA of the source token vectors at the input and after each layer."""
        return self._list("projection")

    def list_items(self) -> int:
        """About how many numbers the lists hold once built: every attention weight, three
        vectors per position of each side's embeddings, and ~60 numbers per position of every
        Add & Norm and FFN (their statistics and samples)."""
        recorded = self.recorded
        items = 0
        for side, sublayers in (("encoder", ("self_attention",)),
                                ("decoder", ("self_attention", "cross_attention"))):
            positions, width = recorded.embedding(side).shape
            items += 3 * positions * width + 60 * positions * 4 * recorded.n_layers(side)
            for sublayer in sublayers:
                items += sum(r["weights"].numel() for r in recorded.records(side, f"attention:{sublayer}"))
        return items

    def _list(self, name: str):
        value = self.lists.get(name)
        if value is None:  # two threads may both build it: the same numbers either way
            value = self.lists[name] = _LISTS[name](self)
        return value

    def to_dict(self) -> dict:
        """JSON-ready data. The big nested lists are shared, not copied (``asdict`` would deep-copy
        every float of every attention matrix, which costs more than running the model)."""
        data = {}
        for name in _FIELDS_IN_ORDER:  # the order /api/trace has always had
            data[name] = getattr(self, name)
        data["steps"] = asdict_list(self.steps)
        data["beam"] = asdict_list(self.beam)
        return data

    def attention_detail(self, kind: str, layer: int, head: int) -> dict:
        """Q, K, V and the raw / scaled / masked scores and weights behind one head's matrix.

        ``kind`` is "encoder", "decoder_self" or "cross".
        """
        query_tokens = self.source_tokens if kind == "encoder" else self.decoder_rows
        key_tokens = self.decoder_input if kind == "decoder_self" else self.source_tokens
        return self.recorded.attention_detail(kind, layer, head, query_tokens, key_tokens)

    @property
    def decoder_rows(self) -> list[str]:
        """A label for each decoder position as a row of a figure: what it reads → what it
        produces ("<bos> → 猫": the row that reads <bos> is the one that chooses 猫)."""
        produced = [step.token for step in self.steps]
        return [f"{read} → {produced[i]}" if i < len(produced) else read
                for i, read in enumerate(self.decoder_input)]

    @property
    def decoder_ids(self) -> list[int]:
        """The decoder's input at every position: <bos>, then each character chosen before it."""
        return [BOS_ID, *self.target_ids][: len(self.decoder_input)]


def _rounded_rows(digits: int, **rows: Tensor) -> dict:
    """Several same-shaped tensors rounded in one conversion (the values are those of rounding each
    alone; one numpy call instead of one per tensor is what makes it cheaper)."""
    values = _round(torch.stack(list(rows.values())), digits)
    return dict(zip(rows, values, strict=True))


ADD_NORM_VECTORS = ("residual", "sublayer", "sum", "normed")


def add_norm_stats(records: list[dict]) -> list[dict]:
    """Per record and position: size of the residual stream before and after LayerNorm, plus samples."""
    # records: Add & Norm records of one pass, all covering the same T positions.
    # (4, R, T, D): vector-major, so "sum" and "normed" of every record are one contiguous block.
    # Each statistic is one call for all records: the reductions run row by row over the last
    # dimension, so every row gets the bits it gets when its record is reduced alone
    # (tests/model/test_trace_lists.py checks)
    vectors = torch.stack([record[name][0] for name in ADD_NORM_VECTORS for record in records])
    vectors = vectors.unflatten(0, (len(ADD_NORM_VECTORS), len(records)))
    norms = _round(vectors.norm(dim=-1), 3)  # [4][R][T]
    moments = _round(torch.stack([vectors[2:].mean(dim=-1),
                                  vectors[2:].std(dim=-1, unbiased=False)]), 4)  # [2][2][R][T]
    samples = _round(vectors[2:, :, :, :SAMPLE_DIMS], 3)  # [2][R][T][SAMPLE_DIMS]
    return [
        {
            "residual_norm": norms[0][r], "sublayer_norm": norms[1][r],
            "sum_norm": norms[2][r], "normed_norm": norms[3][r],
            "sum_mean": moments[0][0][r], "sum_std": moments[1][0][r],
            "normed_mean": moments[0][1][r], "normed_std": moments[1][1][r],
            "sum_sample": samples[0][r], "normed_sample": samples[1][r],
        }
        for r in range(len(records))
    ]


def add_norm_sizes(records: list[dict], names: tuple[str, ...]) -> np.ndarray:
    """The sizes ``add_norm_stats`` gives as ``<name>_norm`` (3 decimals, the same bits: rows are
    reduced one by one), [name][record][position], for only the vectors ``names`` asks for."""
    vectors = torch.stack([record[name][0] for name in names for record in records])
    vectors = vectors.unflatten(0, (len(names), len(records)))
    return np.round(vectors.norm(dim=-1).double().numpy(), 3)


def active_shares(records: list[dict]) -> np.ndarray:
    """``ffn_stats``' active_share (4 decimals), [record][position]."""
    hidden = torch.stack([record["hidden"][0] for record in records])
    return np.round((hidden > 0).float().mean(dim=-1).double().numpy(), 4)


def ffn_stats(records: list[dict], output_records: list[dict]) -> list[dict]:
    """Per record and position: how many hidden ReLU units fire, how strongly, and which fire most."""
    # records: FFN records of one pass; output_records: the Add & Norm records their outputs went to.
    # (R, T, d_ff) and (R, T, D): one call per statistic for all layers of a pass, row by row as above
    hidden = torch.stack([record["hidden"][0] for record in records])
    outputs = torch.stack([record["sublayer"][0] for record in output_records])
    top = torch.topk(hidden, k=min(5, hidden.size(-1)), dim=-1)
    active_share = _round((hidden > 0).float().mean(dim=-1), 4)  # [R][T]
    norms = _round(torch.stack([hidden.norm(dim=-1), outputs.norm(dim=-1)]), 3)  # [2][R][T]
    top_units = top.indices.tolist()
    top_values = _round(top.values, 3)  # [R][T][5]
    samples = _round(hidden[..., :SAMPLE_DIMS * 2], 3)  # [R][T][2 * SAMPLE_DIMS]
    return [
        {
            "d_ff": int(hidden.size(-1)),
            "active_share": active_share[r],
            "hidden_norm": norms[0][r], "output_norm": norms[1][r],
            "top_units": top_units[r],
            "top_values": top_values[r],
            "hidden_sample": samples[r],
        }
        for r in range(len(records))
    ]


def heads(records: list[dict]) -> list:
    """Every attention record's weights, [record][head][query][key], in one conversion."""
    return _round(torch.stack([record["weights"][0] for record in records]), 5)


def head_codes(records: list[dict]) -> np.ndarray:
    """The numbers of ``heads(records)`` as integers: weight × 10⁵, [record][head][query][key].

    ``heads`` rounds to 5 decimals as ``rint(w × 10⁵) / 10⁵``; these are the integers of that
    rounding, so ``code / 100000`` is the very float ``heads`` gives (the x-ray sends these)."""
    weights = torch.stack([record["weights"][0] for record in records]).detach().float().numpy()
    return np.rint(weights.astype(np.float64) * 1e5).astype(np.uint32)


def embedding_data(record: dict) -> dict:
    return _rounded_rows(4, **{name: record[name][0] for name in ("token", "position", "sum")})


def pca_2d(states: list[Tensor]) -> list[list[list[float]]]:
    """Project every layer's token vectors onto the top two principal axes of all of them."""
    # states: (S, D) each, all over the same S source positions, so the points split evenly
    stacked = torch.cat(states, dim=0).double()
    centred = stacked - stacked.mean(dim=0, keepdim=True)
    _, _, vh = torch.linalg.svd(centred, full_matrices=False)
    axes = vh[:2].T
    points = (centred @ axes).float()  # (len(states) * S, 2)
    return _round(points.unflatten(0, (len(states), -1)), 4)


def entropy_per_row(probs: Tensor) -> list[float]:
    """The entropy of every row of (T, V) probabilities, in nats."""
    return (-(probs * probs.clamp_min(1e-12).log()).sum(dim=-1)).tolist()


def asdict_list(items) -> list[dict]:
    return [asdict(item) for item in items]


def _projection(trace: Trace) -> dict:
    recorded = trace.recorded
    states = [recorded.embedding("encoder"), *recorded.layer_outputs("encoder")]
    return {"tokens": trace.source_tokens,
            "labels": ["input"] + [f"layer {i + 1}" for i in range(len(states) - 1)],
            "points": pca_2d(states)}


_FIELDS_IN_ORDER = ("text", "options", "source_tokens", "source_ids", "target_tokens", "target_ids",
                    "decoder_input", "translation", "finished", "embeddings", "encoder", "decoder",
                    "steps", "projection", "beam", "model_ms")
_LISTS = {
    "embeddings": lambda trace: {side: trace.recorded.embedding_data(side)
                                 for side in ("encoder", "decoder")},
    "encoder": lambda trace: trace.recorded.layer_statistics("encoder"),
    "decoder": lambda trace: trace.recorded.layer_statistics("decoder"),
    "projection": _projection,
}
