"""The learning-rate schedule of "Attention Is All You Need": linear warmup, then 1/√step decay."""

from __future__ import annotations


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """lr = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5): rise, then decay as 1/√step."""
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
