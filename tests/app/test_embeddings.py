"""/embeddings: token vectors ×√d, positions, their sum, the position table, the projection."""

from __future__ import annotations

import math

import pytest

from app.pages import embeddings as figs
from tests.app.checks import assert_valid_figures, field_of

CAT = "The cat sits on the mat."


def test_embeddings_numbers(app_client, tiny_translator):
    body = app_client.post("/api/figures/embeddings", json={"text": CAT, "positions": 24}).json()
    d = tiny_translator.config.d_model
    assert body["d_model"] == d and body["sqrt_d"] == pytest.approx(math.sqrt(d), abs=1e-3)
    assert body["position_norm"] == pytest.approx(math.sqrt(d / 2), abs=1e-3)
    s = body["sample"]
    for token, position, total in zip(s["scaled"], s["position"], s["sum"], strict=True):
        assert token + position == pytest.approx(total, abs=2e-3)
    # the raw row is the table entry itself: × √d gives the scaled one
    row = tiny_translator.model.src_embedding.tokens.weight[
        tiny_translator.english.encode(CAT)[0]].tolist()
    assert s["raw"] == pytest.approx(row[:8], abs=1e-3)
    figures = body["figures"]
    token = figures["token"]["data"][0]
    assert len(token["z"]) == len(body["source_tokens"]) and len(token["z"][0]) == d
    cosine = figures["cosine"]["data"][0]["z"]
    assert len(cosine) == 24
    for p in range(24):
        assert cosine[p][p] == pytest.approx(1.0, abs=1e-3)
    for k in range(1, 8):  # similarity depends on the offset only
        assert cosine[5][5 + k] == pytest.approx(cosine[0][k], abs=2e-3)
    projection = figures["projection"]["data"]
    assert len(projection) == tiny_translator.config.n_encoder_layers + 1
    assert projection[0]["text"] == body["source_tokens"]


def test_embeddings_limits(app_client):
    assert field_of(app_client.post("/api/figures/embeddings",
                                    json={"text": CAT, "positions": 500})) == "positions"


def test_vectors_and_similarity():
    matrix = [[0.5, -1.0], [2.0, 0.0]]
    figure = figs.vectors_heatmap(matrix, ["the", "the"], "token")
    trace = figure["data"][0]
    assert trace["zmid"] == 0 and trace["zmax"] == 2.0 and len(set(trace["y"])) == 2
    many = figs.vectors_heatmap([[0.0]] * 48, [str(i) for i in range(48)], "positions")
    assert many["data"][0]["y"] == list(range(48))
    cos = [[1, 0.5, 0.1], [0.5, 1, 0.5], [0.1, 0.5, 1]]
    # the colour scale spans the values present (0.1 … 1), not −1 … 1, so the picture has contrast
    assert figs.similarity_heatmap(cos, "")["data"][0]["zmin"] == 0.1
    assert figs.similarity_heatmap([[1, -0.52], [-0.52, 1]], "")["data"][0]["zmin"] == -0.55
    offset = figs.similarity_by_offset(cos, [0, 1], "")
    assert [t["y"] for t in offset["data"]] == [[1, 0.5, 0.1], [1, 0.5]]


def test_projection_small_multiples():
    projection = {"tokens": ["a", "b"], "labels": ["input", "layer 1"],
                  "points": [[[0, 0], [1, 1]], [[1, 0], [0, 1]]]}
    figure = figs.projection_figure(projection, ["input", "after layer 1"])
    assert [t["xaxis"] for t in figure["data"]] == ["x", "x2"]
    assert all(t["text"] == ["a", "b"] for t in figure["data"])
    assert "xaxis2" in figure["layout"]
    assert_valid_figures(figure)
    grid = figs.projection_figure({**projection, "points": projection["points"] * 2},
                                  ["input", "1", "2", "3"], columns=2)
    domains = [grid["layout"][f"yaxis{s}"]["domain"] for s in ("", "2", "3", "4")]
    assert domains[0] == domains[1] and domains[2] == domains[3] and domains[0][0] > domains[2][1]


def test_each_projection_panel_is_zoomed_to_its_points_and_says_so():
    """The deeper layers' points lie close together; on the input's scale they would overlap."""
    projection = {"tokens": ["a", "b", "c"],
                  "points": [[[0, 0], [4, 0], [0, 4]], [[1, 1], [1.5, 1], [1, 1.5]]]}
    figure = figs.projection_figure(projection, ["input", "after layer 1"], zoom_label="×{z}")
    layout = figure["layout"]
    for suffix, stage in (("", projection["points"][0]), ("2", projection["points"][1])):
        low, high = layout[f"xaxis{suffix}"]["range"]
        assert all(low < x < high for x, _ in stage)
        low, high = layout[f"yaxis{suffix}"]["range"]
        assert all(low < y < high for _, y in stage)
    width = [layout[f"xaxis{s}"]["range"][1] - layout[f"xaxis{s}"]["range"][0] for s in ("", "2")]
    assert width[0] / width[1] == pytest.approx(8.0)
    titles = [a["text"] for a in layout["annotations"]]
    assert titles == ["input", "after layer 1<br>×8.0"]
