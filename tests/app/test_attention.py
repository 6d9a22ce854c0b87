"""/attention: every head, one head stage by stage, and their figures."""

from __future__ import annotations

import pytest

from app.pages import attention
from app.plots import GREY
from model.decoding import DecodingOptions
from tests.app.test_api import SHORT


def test_attention_detail(app_client):
    detail = app_client.post(
        "/api/attention-detail", json={**SHORT, "kind": "cross", "layer": 1, "head": 2}
    ).json()
    trace = app_client.post("/api/trace", json=SHORT).json()
    assert detail["d_k"] == 8
    assert detail["key_tokens"] == trace["source_tokens"]
    # rows by what each position reads and produces: the row that reads <bos> chose the first
    # character (issue 25: rows labelled by the input alone read one step late)
    assert detail["query_tokens"][0] == f"<bos> → {trace['steps'][0]['token']}"
    assert [row.split(" → ")[0] for row in detail["query_tokens"]] == trace["decoder_input"]
    assert [row.split(" → ")[1] for row in detail["query_tokens"]] == [
        step["token"] for step in trace["steps"]]
    assert detail["weights"] == trace["decoder"][1]["cross_attention"][2]
    for name in ("q", "k", "v", "raw", "scaled", "masked", "weights", "output"):
        assert name in detail
    scaled, raw = detail["scaled"][0][0], detail["raw"][0][0]
    assert scaled == pytest.approx(raw / 8**0.5, abs=1e-3)

    causal = app_client.post(
        "/api/attention-detail", json={**SHORT, "kind": "decoder_self", "layer": 0, "head": 0}
    ).json()
    assert causal["masked"][0][1:] == [None] * (len(causal["key_tokens"]) - 1)  # −∞ → null


def test_attention_stage_figures(app_client):
    body = app_client.post(
        "/api/figures/attention-detail",
        json={**SHORT, "kind": "encoder", "layer": 0, "head": 1, "query": 2},
    ).json()
    assert set(body["figures"]) == {"raw", "scaled", "masked", "weights"}
    assert body["figures"]["weights"]["data"][0]["y"] == body["detail"]["weights"][2]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"kind": "encoder", "layer": 2, "head": 0}, "layer"),
        ({"kind": "cross", "layer": 0, "head": 4}, "head"),
        ({"kind": "cross", "layer": -1, "head": 0}, "layer"),
        ({"kind": "keys", "layer": 0, "head": 0}, "kind"),
        ({"layer": 0, "head": 0}, "kind"),
    ],
)
def test_attention_detail_limits(app_client, extra, field):
    response = app_client.post("/api/attention-detail", json={**SHORT, **extra})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == field


@pytest.fixture(scope="module")
def trace(tiny_translator):
    return tiny_translator.trace("The cat sits on the mat.", DecodingOptions(max_len=6))


def test_attention_overview_covers_every_layer_and_head(trace):
    for kind in ("encoder", "decoder_self", "cross"):
        cells = attention.attention_overview(trace, kind)
        assert [(c["layer"], c["head"]) for c in cells] == [
            (layer, head) for layer in range(2) for head in range(4)
        ]
        assert set(cells[0]) == {"layer", "head", "figure"}  # the page draws the thumbnail from it
        assert cells[0]["figure"]["data"][0]["z"] == attention.attention_weights(trace, kind, 0)[0]
        rows = cells[0]["figure"]["data"][0]["y"]
        if kind != "encoder":
            assert all(" → " in row for row in rows) and len(rows) == len(trace.steps)


def test_score_bars_mark_masked_keys(trace):
    detail = trace.attention_detail("decoder_self", 0, 0)
    stages = attention.attention_stages(detail, 0)
    masked = stages["masked"]["data"][0]
    assert masked["type"] == "bar"
    assert masked["customdata"][1:] == ["−∞"] * (len(detail["key_tokens"]) - 1)
    assert masked["marker"]["color"][1] == GREY
    assert stages["weights"]["data"][0]["y"] == detail["weights"][0]


def test_masked_keys_get_a_minus_infinity_column(trace):
    detail = trace.attention_detail("decoder_self", 0, 0)
    figure = attention.attention_stages(detail, 0)["masked"]
    hidden = len(detail["key_tokens"]) - 1  # the first query sees only itself
    assert len(figure["layout"]["shapes"]) == hidden
    assert [a["text"] for a in figure["layout"]["annotations"]] == ["−∞"] * hidden
    encoder = attention.attention_stages(trace.attention_detail("encoder", 0, 0), 0)["masked"]
    assert encoder["layout"]["shapes"] == []  # nothing hidden: the page says this equals stage ②
