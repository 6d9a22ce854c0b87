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


# -- why attention replaced recurrence (issue 11, item 15) ----------------------------------------

def test_distance_links_are_the_strongest_real_weights(trace):
    links = pipeline.distance_links(trace)
    words = [i for i, t in enumerate(trace.source_tokens) if t not in pipeline.SPECIAL]
    assert [link["distance"] for link in links] == list(range(1, len(words)))
    for link in links:
        assert abs(link["query"] - link["key"]) == link["distance"]
        assert "<eos>" not in (link["from"], link["to"])
        rows = trace.encoder[link["layer"]]["self_attention"][link["head"]]
        assert rows[link["query"]][link["key"]] == link["weight"]
        # nothing stronger anywhere at that distance
        strongest = max(head[q][k] for block in trace.encoder for head in block["self_attention"]
                        for q in words for k in words if abs(q - k) == link["distance"])
        assert link["weight"] == strongest


def test_recurrence_figure_compares_steps_and_draws_the_weights(trace):
    figure = pipeline.recurrence_figure(trace)
    rnn, attention, weights = figure["data"]
    assert rnn["y"] == rnn["x"] and attention["y"] == [1] * len(rnn["x"])
    assert weights["y"] == [link["weight"] for link in pipeline.distance_links(trace)]


def test_pipeline_route_sends_the_recurrence_figure(app_client):
    body = app_client.post("/api/figures/pipeline", json={"text": "The cat sits on the mat."}).json()
    assert body["links"] and body["figures"]["recurrence"]["data"][2]["yaxis"] == "y2"
