"""The trace's lists are built in few conversions, for all layers of a pass at once; these pin them
to the one-record, one-statistic-at-a-time formulas they replaced (the same numbers, not merely
close ones)."""

from __future__ import annotations

import torch

from model.explain.trace import (
    SAMPLE_DIMS,
    _round,
    add_norm_stats,
    embedding_data,
    entropy_per_row,
    ffn_stats,
    heads,
    pca_2d,
)


def test_add_norm_stats_equal_each_statistic_of_each_record_computed_alone():
    torch.manual_seed(0)
    records = [
        {name: torch.randn(1, 7, 48) * 3 for name in ("residual", "sublayer", "sum", "normed")}
        for _ in range(5)
    ]

    def alone(record: dict) -> dict:
        summed, normed = record["sum"][0], record["normed"][0]
        return {
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

    assert add_norm_stats(records) == [alone(record) for record in records]


def test_ffn_stats_equal_each_statistic_of_each_record_computed_alone():
    torch.manual_seed(2)
    records = [{"hidden": torch.relu(torch.randn(1, 6, 96) * 2)} for _ in range(4)]
    outputs = [{"sublayer": torch.randn(1, 6, 40)} for _ in range(4)]

    def alone(record: dict, output: dict) -> dict:
        hidden = record["hidden"][0]
        top = torch.topk(hidden, k=5, dim=-1)
        return {
            "d_ff": 96,
            "active_share": _round((hidden > 0).float().mean(dim=-1), 4),
            "hidden_norm": _round(hidden.norm(dim=-1), 3),
            "output_norm": _round(output["sublayer"][0].norm(dim=-1), 3),
            "top_units": top.indices.tolist(),
            "top_values": _round(top.values, 3),
            "hidden_sample": _round(hidden[:, : SAMPLE_DIMS * 2], 3),
        }

    expected = [alone(record, output) for record, output in zip(records, outputs, strict=True)]
    assert ffn_stats(records, outputs) == expected


def test_heads_and_embeddings_equal_each_record_rounded_alone():
    torch.manual_seed(3)
    records = [{"weights": torch.softmax(torch.randn(1, 4, 5, 6), dim=-1)} for _ in range(3)]
    assert heads(records) == [_round(record["weights"][0], 5) for record in records]
    embedding = {name: torch.randn(1, 5, 32) for name in ("token", "position", "sum")}
    assert embedding_data(embedding) == {name: _round(embedding[name][0], 4) for name in embedding}


def test_pca_2d_equals_each_state_projected_and_rounded_alone():
    torch.manual_seed(4)
    states = [torch.randn(6, 16) for _ in range(4)]
    stacked = torch.cat(states).double()
    centred = stacked - stacked.mean(dim=0, keepdim=True)
    axes = torch.linalg.svd(centred, full_matrices=False)[2][:2].T
    points = (centred @ axes).float()
    assert pca_2d(states) == [_round(chunk, 4) for chunk in torch.split(points, 6)]


def test_entropy_per_row_equals_each_row_alone():
    torch.manual_seed(1)
    probs = torch.softmax(torch.randn(9, 300) * 4, dim=-1)
    probs[0] = 0
    probs[0, 5] = 1  # a certain choice: entropy exactly 0
    alone = [float(-(row * row.clamp_min(1e-12).log()).sum()) for row in probs]
    assert entropy_per_row(probs) == alone
    assert entropy_per_row(probs)[0] == 0


def test_layer_lists_are_the_traces_layers_by_stage(tiny_translator):
    """``record.layer_lists`` reads each layer of a trace by stage: every sublayer and the Add &
    Norm after it, in the model's own order (``SUBLAYERS``), nothing left out."""
    from dataclasses import fields

    from model.explain.record import ADD_NORM_NAMES, SUBLAYERS, layer_lists

    trace = tiny_translator.trace("The cat sits on the mat.")
    for side in ("encoder", "decoder"):
        layers = layer_lists(trace, side)
        assert len(layers) == len(getattr(trace, side))
        for typed, block in zip(layers, getattr(trace, side), strict=True):
            assert [sublayer for sublayer, _ in typed.add_norms] == list(SUBLAYERS[side])
            for sublayer, stats in typed.add_norms:
                assert getattr(typed, sublayer) is block[sublayer]
                assert stats is block[ADD_NORM_NAMES[side][sublayer]]
            assert len(fields(typed)) == len(block) == 2 * len(SUBLAYERS[side])
