"""Learning-rate schedules: the paper's (linear warmup, then 1/√step decay), or the same warmup
followed by a straight line down to zero at the run's last step (for a run of a known length)."""

from __future__ import annotations


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """lr = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5): rise, then decay as 1/√step."""
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def learning_rate(step: int, d_model: int, warmup: int, factor: float = 1.0,
                  total: int | None = None, end: float = 0.0) -> float:
    """The rate of step `step` (from 1). Without `total`, `noam_lr`; with it, the same warmup to the
    same peak, then a straight line down to `end` · peak at step `total` (and that after it): zero
    by default, or where a longer schedule split into stages would be at this stage's end."""
    if not total or step <= warmup:
        return noam_lr(step, d_model, warmup, factor)
    peak = noam_lr(warmup, d_model, warmup, factor)
    left = max(0.0, (total - step) / max(1, total - warmup))
    return peak * (end + (1.0 - end) * left)


def run_total_steps(settings: dict) -> int | None:
    """The last step of a run that decayed linearly (history.json's settings), else None."""
    return settings.get("lr_total_steps") if settings.get("decay") == "linear" else None
