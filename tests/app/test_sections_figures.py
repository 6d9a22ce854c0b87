"""Section figure builders are pure: plain data in, Plotly dicts out, with token labels kept."""

from __future__ import annotations

import json

import pytest

from app import section_figures as figs
from app.coreference import locate, rank_heads, words
from app.scale import ScaleInput, count

TOKENS = ["the", "cat", "sits", "on", "the", "mat", ".", "<eos>"]


def is_json(figure: dict) -> bool:
    json.dumps(figure, allow_nan=False)
    return True


def test_mask_heatmap_keeps_repeated_tokens_apart():
    mask = [[1] * 7 + [0] for _ in TOKENS]
    figure = figs.mask_heatmap(mask, TOKENS, TOKENS, "padding")
    trace = figure["data"][0]
    assert trace["type"] == "heatmap"
    assert len(set(trace["x"])) == len(TOKENS)  # "the" twice → two columns
    assert [x.replace("\u200b", "") for x in trace["x"]] == TOKENS
    assert trace["z"] == mask and (trace["zmin"], trace["zmax"]) == (0, 1)
    assert "blocked" in trace["text"][0][-1] and "may attend" in trace["text"][0][0]
    assert is_json(figure)


def test_batch_heatmap_shows_tokens_and_ids():
    figure = figs.batch_heatmap([["a", "<pad>"], ["b", "c"]], [[5, 0], [6, 7]], [[1, 0], [1, 1]],
                                ["yours", "sentence 2"])
    trace = figure["data"][0]
    assert trace["text"][0][1] == "<pad><br>0"
    assert trace["texttemplate"] == "%{text}" and trace["y"] == ["yours", "sentence 2"]


def test_vectors_and_similarity():
    matrix = [[0.5, -1.0], [2.0, 0.0]]
    figure = figs.vectors_heatmap(matrix, ["the", "the"], "token")
    trace = figure["data"][0]
    assert trace["zmid"] == 0 and trace["zmax"] == 2.0 and len(set(trace["y"])) == 2
    many = figs.vectors_heatmap([[0.0]] * 48, [str(i) for i in range(48)], "positions")
    assert many["data"][0]["y"] == list(range(48))
    cos = [[1, 0.5, 0.1], [0.5, 1, 0.5], [0.1, 0.5, 1]]
    assert figs.similarity_heatmap(cos, "")["data"][0]["zmin"] == -1
    offset = figs.similarity_by_offset(cos, [0, 1], "")
    assert [t["y"] for t in offset["data"]] == [[1, 0.5, 0.1], [1, 0.5]]


def test_projection_small_multiples():
    projection = {"tokens": ["a", "b"], "labels": ["input", "layer 1"],
                  "points": [[[0, 0], [1, 1]], [[1, 0], [0, 1]]]}
    figure = figs.projection_figure(projection, ["input", "after layer 1"])
    assert [t["xaxis"] for t in figure["data"]] == ["x", "x2"]
    assert all(t["text"] == ["a", "b"] for t in figure["data"])
    assert "xaxis2" in figure["layout"] and is_json(figure)


def test_score_and_training_figures():
    score = {"decoder_input": ["<bos>", "猫"], "labels": ["猫", "<eos>"],
             "label_prob": [0.5, 0.25], "cross_entropy": [0.69, 1.39]}
    figure = figs.score_figure(score, ("p", "ce"))
    assert [t["type"] for t in figure["data"]] == ["bar", "bar"]
    assert figure["data"][0]["customdata"] == ["<bos> → 猫", "猫 → <eos>"]
    assert figure["data"][1]["yaxis"] == "y2"
    schedule = figs.lr_schedule_figure([1, 2, 3], [0.1, 0.2, 0.1], [2], [0.2], 2)
    assert len(schedule["data"]) == 2 and schedule["layout"]["shapes"][0]["x0"] == 2
    steps = [{"step": 1, "loss": 3.0, "grad_norm": 2.0}, {"step": 2, "loss": 2.0, "grad_norm": 1.0}]
    curves = figs.training_curves(steps, {"loss": "loss", "grad_norm": "grad", "clip": "1.0"})
    assert [t["yaxis"] for t in curves["data"]] == ["y", "y2"]
    epochs = figs.epoch_curves([{"epoch": 1, "dev_bleu": 3.0, "dev_chrf": 9.0, "train_loss": 4.0}],
                               {"train_loss": "train loss", "epoch": "epoch"})
    assert [t["name"] for t in epochs["data"]][:2] == ["BLEU", "chrF"]


def test_kv_figures():
    race = {"steps": 3, "cached_step_ms": [1, 1, 1], "uncached_step_ms": [1, 2, 3],
            "cached_positions": [1, 1, 1], "uncached_positions": [1, 2, 3]}
    timing = figs.kv_timing_figure(race, ("cache", "no cache"))
    assert [t["y"] for t in timing["data"]] == [[1, 1, 1], [1, 2, 3]]
    work = figs.kv_work_figure(race, ("cache", "no cache"))
    assert work["data"][3]["y"] == [1, 3, 6]  # running total without the cache: 1+2+…+n
    cached = figs.kv_grid(race, True, "", ("new", "cached", ""))["data"][0]["z"]
    assert cached == [[1, None, None], [0.5, 1, None], [0.5, 0.5, 1]]
    uncached = figs.kv_grid(race, False, "", ("new", "cached", ""))["data"][0]["z"]
    assert uncached == [[1, None, None], [1, 1, None], [1, 1, 1]]


def test_head_grid_and_parameter_breakdown():
    grid = figs.head_grid([[0.1, 0.4], [0.3, 0.2]], "", "layer", "head")
    trace = grid["data"][0]
    assert trace["x"] == ["head 1", "head 2"] and trace["y"] == ["layer 1", "layer 2"]
    result = count(ScaleInput(d_model=64, heads=4, d_ff=256, layers=2, vocab=100, context=16))
    figure = figs.parameter_breakdown(result, {"qkv": "Q, K, V"})
    bar = figure["data"][0]
    assert bar["orientation"] == "h" and "Q, K, V" in bar["y"]
    assert sum(bar["x"]) == result["total"]


def test_words_and_locate():
    tokens = ["the", "wom", "##an", "said", "she", "was", "tired", ".", "<eos>"]
    assert words(tokens)[1] == ("woman", [1, 2])
    assert locate(["wom", "##an"], tokens, "referent") == [1, 2]
    assert locate(["she"], tokens, "pronoun", after=2) == [4]
    with pytest.raises(ValueError, match="referent"):
        locate(["man"], tokens, "referent")
    with pytest.raises(ValueError):
        locate(["wom"], tokens, "referent")  # only part of a word


def test_rank_heads_orders_by_weight():
    tokens = ["she", "and", "her"]
    # 1 layer, 2 heads; row 2 ("her") looks at "she" with 0.2 in head 0 and 0.9 in head 1
    attention = [[[[1, 0, 0], [0, 1, 0], [0.2, 0.3, 0.5]],
                  [[1, 0, 0], [0, 1, 0], [0.9, 0.05, 0.05]]]]
    result = rank_heads(attention, tokens, pronoun=[2], referent=[0])
    assert [(h["layer"], h["head"]) for h in result["ranking"]] == [(0, 1), (0, 0)]
    assert result["ranking"][0]["referent_rank"] == 1 and result["ranking"][1]["referent_rank"] == 3
    assert result["ranking"][0]["top_word"] == "she"
    assert result["uniform"] == pytest.approx(1 / 3, abs=1e-4)
