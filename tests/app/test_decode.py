"""/decode: the seven views inside a decoder layer at every step, candidates, the beam tree."""

from __future__ import annotations

import json

import pytest

from app.pages import decode
from app.plots import ORANGE
from model.decoding import DecodingOptions


@pytest.fixture(scope="module")
def trace(tiny_translator):
    return tiny_translator.trace("The cat sits on the mat.", DecodingOptions(max_len=6))


@pytest.fixture(scope="module")
def beam_trace(tiny_translator):
    return tiny_translator.trace("I like green tea.", DecodingOptions(strategy="beam", max_len=5))


def test_candidates_mark_the_chosen_token(trace):
    step = trace.steps[0]
    figure = decode.candidates_figure(
        {"token": step.token, "prob": step.prob, "top": [vars(c) for c in step.top]}
    )
    bar = figure["data"][0]
    assert bar["type"] == "bar" and bar["orientation"] == "h"
    assert bar["customdata"] == [c.token for c in step.top]
    chosen = bar["customdata"].index(step.token)
    assert bar["marker"]["color"][chosen] == ORANGE
    assert bar["marker"]["color"].count(ORANGE) == 1


def test_decode_steps_have_the_seven_views(trace):
    steps = decode.decode_steps(trace, layer=1)
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


def test_beam_tree(beam_trace, trace):
    assert decode.beam_tree(trace) is None  # greedy has no tree
    figure = decode.beam_tree(beam_trace)
    points = figure["data"][-1]
    assert points["type"] == "scatter"
    assert len(points["x"]) == len(beam_trace.beam)
    assert points["text"][0] == "<bos>"
    selected = [n for n in beam_trace.beam if n.selected]
    assert points["marker"]["color"].count(ORANGE) == len(selected)
