"""Figure builders: pure functions from a trace to Plotly figure dicts."""

from __future__ import annotations

import json

import pytest

from app import figures
from model.decoding import DecodingOptions


@pytest.fixture(scope="module")
def trace(tiny_translator):
    return tiny_translator.trace("The cat sits on the mat.", DecodingOptions(max_len=6))


@pytest.fixture(scope="module")
def beam_trace(tiny_translator):
    return tiny_translator.trace("I like green tea.", DecodingOptions(strategy="beam", max_len=5))


def test_unique_labels_keep_repeated_tokens_apart():
    labels = figures.unique_labels(["the", "cat", "the", "the"])
    assert len(set(labels)) == 4
    assert [label.replace("\u200b", "") for label in labels] == ["the", "cat", "the", "the"]


def test_attention_heatmap_has_tokens_on_both_axes(trace):
    figure = figures.attention_heatmap(
        trace.decoder[0]["cross_attention"][1], trace.decoder_input, trace.source_tokens
    )
    heatmap = figure["data"][0]
    assert heatmap["type"] == "heatmap"
    assert heatmap["colorscale"] == "Cividis"
    assert (heatmap["zmin"], heatmap["zmax"]) == (0, 1)
    assert [x.replace("\u200b", "") for x in heatmap["x"]] == trace.source_tokens
    assert [y.replace("\u200b", "") for y in heatmap["y"]] == trace.decoder_input
    assert len(heatmap["z"]) == len(trace.decoder_input)
    assert "%{z:.4f}" in heatmap["hovertemplate"]
    assert figure["layout"]["yaxis"]["autorange"] == "reversed"  # first query on top
    json.dumps(figure)  # plain JSON data


def test_attention_overview_covers_every_layer_and_head(trace):
    for kind in ("encoder", "decoder_self", "cross"):
        cells = figures.attention_overview(trace, kind)
        assert [(c["layer"], c["head"]) for c in cells] == [
            (layer, head) for layer in range(2) for head in range(4)
        ]
        assert cells[0]["thumbnail"]["trace"]["showscale"] is False
        assert cells[0]["figure"]["data"][0]["z"] == figures.attention_weights(trace, kind, 0)[0]


def test_score_bars_mark_masked_keys(trace):
    detail = trace.attention_detail("decoder_self", 0, 0)
    stages = figures.attention_stages(detail, 0)
    masked = stages["masked"]["data"][0]
    assert masked["type"] == "bar"
    assert masked["text"][1:] == ["−∞"] * (len(detail["key_tokens"]) - 1)
    assert masked["marker"]["color"][1] == figures.GREY
    assert stages["weights"]["data"][0]["y"] == detail["weights"][0]


def test_candidates_mark_the_chosen_token(trace):
    step = trace.steps[0]
    figure = figures.candidates_figure(
        {"token": step.token, "prob": step.prob, "top": [vars(c) for c in step.top]}
    )
    bar = figure["data"][0]
    assert bar["type"] == "bar" and bar["orientation"] == "h"
    assert bar["customdata"] == [c.token for c in step.top]
    chosen = bar["customdata"].index(step.token)
    assert bar["marker"]["color"][chosen] == figures.ORANGE
    assert bar["marker"]["color"].count(figures.ORANGE) == 1


def test_decode_steps_have_the_seven_views(trace):
    steps = figures.decode_steps(trace, layer=1)
    assert len(steps) == len(trace.steps)
    for t, step in enumerate(steps):
        assert step["prefix"] == trace.decoder_input[: t + 1]
        views = step["figures"]
        assert list(views) == ["self_attention", "add_norm1", "cross_attention", "add_norm2",
                               "ffn", "add_norm3", "softmax"]
        # the masked self-attention row covers only the tokens so far, one row per head
        self_row = views["self_attention"]["data"][0]
        assert len(self_row["z"]) == 4 and all(len(r) == t + 1 for r in self_row["z"])
        cross_row = views["cross_attention"]["data"][0]
        assert [x.replace("\u200b", "") for x in cross_row["x"]] == trace.source_tokens
        assert views["add_norm1"]["data"][0]["type"] == "bar"
        assert len(views["ffn"]["data"][0]["y"]) == 32
    json.dumps(steps)


def test_step_probabilities(trace):
    figure = figures.step_probabilities(trace)
    assert figure["data"][0]["y"] == [s.prob for s in trace.steps]


def test_beam_tree(beam_trace, trace):
    assert figures.beam_tree(trace) is None  # greedy has no tree
    figure = figures.beam_tree(beam_trace)
    points = figure["data"][-1]
    assert points["type"] == "scatter"
    assert len(points["x"]) == len(beam_trace.beam)
    assert points["text"][0] == "<bos>"
    selected = [n for n in beam_trace.beam if n.selected]
    assert points["marker"]["color"].count(figures.ORANGE) == len(selected)
