"""The trace's lists are built in few conversions; these pin them to the one-statistic-at-a-time
formulas they replaced (the same numbers, not merely close ones)."""

from __future__ import annotations

import torch

from model.trace import SAMPLE_DIMS, _round, add_norm_stats, entropy_per_row


def test_add_norm_stats_equal_each_statistic_computed_alone():
    torch.manual_seed(0)
    record = {name: torch.randn(1, 7, 48) * 3 for name in ("residual", "sublayer", "sum", "normed")}
    summed, normed = record["sum"][0], record["normed"][0]
    expected = {
        "residual_norm": _round(record["residual"][0].norm(dim=-1), 3),
        "sublayer_norm": _round(record["sublayer"][0].norm(dim=-1), 3),
        "sum_mean": _round(summed.mean(dim=-1), 4),
        "sum_std": _round(summed.std(dim=-1, unbiased=False), 4),
        "sum_norm": _round(summed.norm(dim=-1), 3),
        "normed_mean": _round(normed.mean(dim=-1), 4),
        "normed_std": _round(normed.std(dim=-1, unbiased=False), 4),
        "normed_norm": _round(normed.norm(dim=-1), 3),
        "sum_sample": _round(summed[:, :SAMPLE_DIMS], 3),
        "normed_sample": _round(normed[:, :SAMPLE_DIMS], 3),
    }
    assert add_norm_stats(record) == expected


def test_entropy_per_row_equals_each_row_alone():
    torch.manual_seed(1)
    probs = torch.softmax(torch.randn(9, 300) * 4, dim=-1)
    probs[0] = 0
    probs[0, 5] = 1  # a certain choice: entropy exactly 0
    alone = [float(-(row * row.clamp_min(1e-12).log()).sum()) for row in probs]
    assert entropy_per_row(probs) == alone
    assert entropy_per_row(probs)[0] == 0
