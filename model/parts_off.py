"""Switching parts of the model off (ablation): an argument of one pass, never state on a module.

``Transformer.encode`` and ``decode`` (``model/transformer.py``, with or without a KV cache)
take an ``ablation=``; each layer asks it what it computes differently
(:meth:`Ablation.layer`, a :class:`LayerOff` or None). ``model/explain/ablation.py`` builds them for
the /ablation page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import Tensor

Head = tuple[str, str, int, int]  # (side, sublayer, layer, head): ("decoder", "cross_attention", 0, 1)
Sublayer = tuple[str, str, int]  # (side, sublayer, layer); sublayer as the layers name their modules
ATTENTION_SUBLAYERS = {"encoder": ("self_attention",),
                       "decoder": ("self_attention", "cross_attention")}
ABLATION_MODES = ("zero", "mean")


@dataclass(frozen=True)
class LayerOff:
    """What one layer computes differently under an :class:`Ablation`, by sublayer name."""

    heads: dict[str, tuple[Tensor, Tensor | float]]  # keep (B or 1, H, 1, 1), fill (1, H, 1, K) or 0
    outputs: dict[str, Tensor | float]  # what a sublayer adds instead of its output: (D,) or 0

    def output(self, sublayer: str, output: Tensor) -> Tensor:
        if sublayer not in self.outputs:
            return output
        return torch.zeros_like(output) + self.outputs[sublayer]


@dataclass(frozen=True, eq=False)
class Ablation:
    """Parts of the model switched off for one ``encode`` / ``decode`` pass.

    - A head off: its slice of the concatenated heads (what W_O reads) holds 0 (``mode="zero"``) or
      ``head_means[side, sublayer, layer][head]`` (``mode="mean"``) instead of softmax(QKᵀ/√d_k)·V.
    - A sublayer off: it adds 0 (or ``sublayer_means[...]``) to the residual stream instead of its
      output. The residual and the LayerNorm after it stay — LayerNorm(x + 0) — because in this
      post-norm model that LayerNorm is on the path every vector takes, not part of the sublayer.
    - Positions off on a side ("encoder", "decoder"): its embedding is the scaled token vectors
      alone, with no positional encoding added.

    ``rows`` switches one more head off in each row of a batch (None: none), so that one batched
    teacher-forced pass scores every head (beam search, which reorders rows, must not use it).
    """

    heads: frozenset[Head] = frozenset()
    sublayers: frozenset[Sublayer] = frozenset()
    positions: frozenset[str] = frozenset()
    mode: str = "zero"
    head_means: Mapping[Sublayer, Tensor] = field(default_factory=dict)  # (H, K) per attention
    sublayer_means: Mapping[Sublayer, Tensor] = field(default_factory=dict)  # (D,) per sublayer
    rows: tuple[Head | None, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in ABLATION_MODES:
            raise ValueError(f"mode must be one of {ABLATION_MODES}")

    def layer(self, side: str, layer: int, n_heads: int) -> LayerOff | None:
        """What ``layer`` of ``side`` computes differently (None: nothing)."""
        heads = {}
        for sublayer in ATTENTION_SUBLAYERS[side]:
            where = (side, sublayer, layer)
            keep = torch.ones(max(1, len(self.rows)), n_heads, 1, 1, dtype=torch.bool)
            for part in self.heads:
                if part[:3] == where:
                    keep[:, part[3]] = False
            for row, part in enumerate(self.rows):
                if part is not None and part[:3] == where:
                    keep[row, part[3]] = False
            if not bool(keep.all()):
                fill = self._fill(self.head_means, where)
                heads[sublayer] = (keep, fill if isinstance(fill, float) else fill[None, :, None, :])
        outputs = {sublayer: self._fill(self.sublayer_means, (side, sublayer, layer))
                   for sublayer in (*ATTENTION_SUBLAYERS[side], "ffn")
                   if (side, sublayer, layer) in self.sublayers}
        return LayerOff(heads, outputs) if heads or outputs else None

    def _fill(self, means: Mapping[Sublayer, Tensor], where: Sublayer) -> Tensor | float:
        if self.mode == "zero":
            return 0.0
        if where not in means:
            raise ValueError(f"mode 'mean' needs the mean of {where} (model/explain/ablation.py)")
        return means[where]
