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
    html = app_client.get("/").text
    assert "Encoder × 2" in html and "Decoder × 2" in html
    assert "self-attention (4 heads)" in html and "FFN 64" in html
    assert "The cat sits on the mat." in html
    assert "The woman said that she was tired." in html
