"""POST /api/figures/interpret: the logit lens and source attributions of one step, beside its
cross-attention; limits, the bad-input answers, caching and both languages."""

from __future__ import annotations

import pytest

from app.pages import decode
from model.decoding import DecodingOptions
from model.explain import interpret
from tests.app.checks import assert_valid_figures, field_of

CAT = "The cat sits on the mat."
BODY = {"text": CAT, "max_len": 6}
URL = "/api/figures/interpret"


@pytest.fixture(scope="module")
def answer(app_client):
    response = app_client.post(URL, json={**BODY, "step": 2, "ig_steps": 16})
    assert response.status_code == 200, response.text
    return response.json()


def test_the_answer_holds_both_views_for_the_step(app_client, answer):
    trace = app_client.post("/api/trace", json=BODY).json()
    step = trace["steps"][2]
    S = len(trace["source_tokens"])
    assert answer["step"] == 2 and answer["layers"] == 2
    lens = answer["lens"]
    assert lens["token"] == step["token"] and len(lens["layers"]) == 2
    assert lens["layers"][-1]["chosen_prob"] == pytest.approx(step["prob"], abs=2e-6)
    assert len(answer["first_top_layers"]) == len(trace["steps"])
    attribution = answer["attribution"]
    assert attribution["token"] == step["token"] and attribution["ig_steps"] == 16
    assert len(attribution["gradient_x_input"]) == len(attribution["integrated_gradients"]) == S
    assert attribution["log_prob"] == pytest.approx(step["log_prob"], abs=1e-4)
    # the cross-attention beside it is this step's row in every layer, averaged over the heads
    for layer, row in enumerate(answer["cross_attention"]):
        heads = trace["decoder"][layer]["cross_attention"]
        assert row == pytest.approx([sum(h[2][j] for h in heads) / len(heads) for j in range(S)],
                                    abs=1e-4)
        assert sum(row) == pytest.approx(1, abs=1e-3)
    figures = assert_valid_figures(answer["figures"], at_least=3)
    assert {path for path, _ in figures} == {".lens", ".lens_steps", ".attribution"}


def test_the_attribution_figure_puts_both_methods_above_the_attention(answer):
    heatmap = answer["figures"]["attribution"]["data"][0]
    assert heatmap["y"][:2] == ["gradient × input", "integrated gradients"]
    assert [label.startswith("cross-attention · Layer") for label in heatmap["y"][2:]] == [True, True]
    for row in heatmap["z"][:2]:  # attributions as shares of their total size
        assert sum(row) == pytest.approx(1, abs=1e-3)
    assert heatmap["customdata"][1] == answer["attribution"]["integrated_gradients"]


def test_the_lens_figure_is_layers_by_candidates_with_the_choice_first(answer):
    heatmap = answer["figures"]["lens"]["data"][0]
    lens = answer["lens"]
    assert heatmap["y"] == ["Layer 1", "Layer 2"]
    assert heatmap["x"][0] == f"{lens['token']} ✓"
    assert [row[0] for row in heatmap["z"]] == [layer["chosen_prob"] for layer in lens["layers"]]


def test_a_second_request_is_cached(app_client, answer):
    response = app_client.post(URL, json={**BODY, "step": 2, "ig_steps": 16})
    assert response.status_code == 200
    assert response.headers["server-timing"].startswith("model;dur=0.0")
    assert response.json()["attribution"] == answer["attribution"]


def test_chinese_labels(app_client):
    response = app_client.post(URL, json={**BODY, "step": 0, "ig_steps": 4},
                               headers={"Accept-Language": "zh-CN"})
    heatmap = response.json()["figures"]["attribution"]["data"][0]
    assert heatmap["y"][:3] == ["梯度 × 输入", "积分梯度", "交叉注意力 · 第 1 层"]


@pytest.mark.parametrize(("body", "field"), [
    ({"step": -1}, "step"),
    ({"step": 129}, "step"),
    ({"step": "1"}, "step"),  # strict: a string is not a number
    ({"ig_steps": 1}, "ig_steps"),
    ({"ig_steps": 257}, "ig_steps"),
    ({"ig_steps": 2.5}, "ig_steps"),
    ({"unknown": 1}, "unknown"),
    ({"text": "猫坐在垫子上"}, "text"),
    ({"max_len": 0}, "max_len"),
])
def test_limits(app_client, body, field):
    response = app_client.post(URL, json={**BODY, **body})
    assert field_of(response) == field
    assert response.json()["message"].startswith(f"{field}:")


def test_a_step_past_the_translation_is_not_found(app_client):
    response = app_client.post(URL, json={**BODY, "step": 6})  # the translation has 6 steps: 0–5
    assert response.status_code == 404
    assert response.json()["message"].startswith("step: step must be between 0 and 5")


def test_figure_builders_are_pure_functions(tiny_translator):
    trace = tiny_translator.trace(CAT, DecodingOptions(max_len=4))
    lens = interpret.logit_lens(tiny_translator, trace)
    figure = decode.lens_steps_figure(lens, current=1)
    heatmap = figure["data"][0]
    assert len(heatmap["x"]) == len(trace.steps) and len(heatmap["z"]) == 2
    assert figure["layout"]["shapes"][0]["x0"] == 0.5  # the current step is framed
    assert_valid_figures({"lens": decode.lens_figure(lens[0]), "steps": figure}, at_least=2)
