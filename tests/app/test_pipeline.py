"""/: the architecture with this model's sizes and the probability of each chosen token."""

from __future__ import annotations

import pytest

from app.pages import pipeline
from model.decoding import DecodingOptions


@pytest.fixture(scope="module")
def trace(tiny_translator):
    return tiny_translator.trace("The cat sits on the mat.", DecodingOptions(max_len=6))


def test_step_probabilities(trace):
    figure = pipeline.step_probabilities(trace)
    assert figure["data"][0]["y"] == [s.prob for s in trace.steps]


def test_pipeline_shows_the_real_sizes(app_client):
    html = app_client.get("/pipeline").text
    assert "Encoder × 2" in html and "Decoder × 2" in html
    assert "self-attention (4 heads)" in html and "FFN 64" in html
    assert "The cat sits on the mat." in html
    assert "The woman said that she was tired." in html


def test_a_sampled_translation_shows_the_distribution_it_was_drawn_from(tiny_translator):
    hot = tiny_translator.trace("The cat sits on the mat.",
                                DecodingOptions(strategy="sample", temperature=2.5, top_k=3, seed=1,
                                                max_len=6))
    figure = pipeline.step_probabilities(hot, ("model", "sampled"))
    model, drawn = figure["data"]
    assert model["y"] == [s.prob for s in hot.steps]
    for step, p in zip(hot.steps, drawn["y"], strict=True):
        chosen = next(c for c in step.top if c.token == step.token)
        assert p == chosen.sample_prob  # top-k 3 at temperature 2.5: not the temperature-1 value
    assert any(abs(p - s.prob) > 1e-3 for s, p in zip(hot.steps, drawn["y"], strict=True))
    assert figure["layout"]["showlegend"] and drawn["name"] == "sampled"
