"""/kv-cache: the race with and without the cache, and its figures."""

from __future__ import annotations

import pytest

from app.pages import kv_cache as figs
from tests.app.checks import field_of

CAT = "The cat sits on the mat."


def test_kv_cache_race(app_client):
    body = app_client.get("/api/kv-cache", params={"text": CAT, "steps": 12}).json()
    assert body["identical"] is True
    assert body["cached_ms"] > 0 and body["uncached_ms"] > 0
    assert len(body["cached_step_ms"]) == len(body["uncached_step_ms"]) == 12
    assert body["cached_positions"] == [1] * 12
    assert body["uncached_positions"] == list(range(1, 13))
    assert len(body["tokens"]) == 12
    grid = body["figures"]["cached_grid"]["data"][0]["z"]
    assert len(grid) == 12 and grid[11][11] == 1 and grid[11][0] == 0.5 and grid[0][1] is None
    uncached = body["figures"]["uncached_grid"]["data"][0]["z"]
    assert uncached[11][:12] == [1] * 12


@pytest.mark.parametrize("params", [{"text": CAT, "steps": 0}, {"text": CAT, "steps": 129}])
def test_kv_cache_step_limits(app_client, params):
    assert field_of(app_client.get("/api/kv-cache", params=params)) == "query.steps"


def test_kv_cache_text_limits(app_client):
    assert field_of(app_client.get("/api/kv-cache", params={"text": "a" * 601})) == "query.text"
    assert field_of(app_client.get("/api/kv-cache", params={"text": "12345"})) == "query.text"


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


# -- several timed runs, the real cache, and odd digits (issue 11, item 13) -----------------------

@pytest.mark.parametrize("raw", ["²", "١٢", "１２", "Ⅻ", "0", "129", "-3", "1e1", "", None])
def test_steps_field_only_takes_ascii_numbers_within_limits(raw):
    assert figs.steps_value(raw) == "32"


def test_steps_field_keeps_a_valid_number():
    assert figs.steps_value("12") == "12" and figs.steps_value("007") == "7"


@pytest.mark.parametrize("raw", ["²", "١٢", "１２", "Ⅻ", "¹²³"])
def test_unicode_digits_never_give_a_500(app_client, raw):
    page = app_client.get("/kv-cache", params={"steps": raw})
    assert page.status_code == 200 and 'value="32"' in page.text
    assert app_client.get("/api/kv-cache", params={"text": CAT, "steps": raw}).status_code == 422


def test_races_are_summarised_by_median_and_spread():
    def race(cached, uncached):
        return {"steps": 2, "tokens": ["猫", "坐"], "cached_positions": [1, 1],
                "uncached_positions": [1, 2], "kv_rows": [1, 2], "kv_floats_per_layer": [2, 4],
                "identical": True, "cached_step_ms": cached, "uncached_step_ms": uncached,
                "cached_ms": sum(cached), "uncached_ms": sum(uncached)}
    out = figs.summarise_races([race([1, 1], [1, 2]), race([9, 1], [1, 4]), race([2, 3], [1, 3])])
    assert out["runs"] == 3
    assert out["cached_step_ms"] == [2, 1] and out["cached_step_min"] == [1, 1]
    assert out["cached_step_max"] == [9, 3]
    assert out["cached_ms"] == 5 and out["cached_min_ms"] == 2 and out["cached_max_ms"] == 10
    assert out["uncached_step_ms"] == [1, 3] and out["uncached_ms"] == 4


def test_race_runs_stop_when_the_budget_is_spent():
    import time
    from types import SimpleNamespace

    def slow(text, steps):
        time.sleep(0.05)
        return {"steps": steps}
    stub = SimpleNamespace(kv_cache_race=slow)
    assert len(figs.race_runs(stub, CAT, 3, runs=5, budget_s=10)) == 5
    assert len(figs.race_runs(stub, CAT, 3, runs=5, budget_s=0.12)) in (1, 2)
    assert len(figs.race_runs(stub, CAT, 3, runs=5, budget_s=0)) == 1


def test_kv_rows_are_the_cached_tensors(tiny_translator):
    import torch

    race = tiny_translator.kv_cache_race(CAT, 6)
    rows = figs.kv_rows(tiny_translator, CAT, race, layer=1, head=1, dims=4)
    config = tiny_translator.config
    d_head = config.d_model // config.n_heads
    assert rows["self"]["shapes"] == [[1, config.n_heads, n, d_head] for n in range(1, 7)]
    assert rows["self"]["tokens"][0] == "<bos>" and len(rows["self"]["k"]) == 6
    assert all(len(r) == 4 for r in rows["self"]["k"] + rows["self"]["v"])
    assert rows["cross"]["reused"] is True
    assert rows["cross"]["shape"] == [1, config.n_heads, len(tiny_translator.source_ids(CAT)), d_head]
    # the cached rows equal the K and V a full pass over the same prefix computes
    record: dict = {}
    src = torch.tensor([tiny_translator.source_ids(CAT)])
    ids = torch.tensor([[1, *tiny_translator.target_ids(race["tokens"])][:6]])
    with torch.inference_mode():
        tiny_translator.model.decode(ids, tiny_translator.model.encode(src), src, record=record)
    attention = record["layers"][1]["self_attention"]
    for key in ("k", "v"):
        shown = [x for row in rows["self"][key] for x in row]
        assert shown == pytest.approx(attention[key][0, 1, :, :4].flatten().tolist(), abs=1e-3)


def test_kv_api_sends_runs_and_rows(app_client):
    body = app_client.get("/api/kv-cache", params={"text": CAT, "steps": 5, "runs": 3}).json()
    assert 1 <= body["runs"] <= 3 and len(body["cached_runs_ms"]) == body["runs"]
    assert body["cached_min_ms"] <= body["cached_ms"] <= body["cached_max_ms"]
    assert len(body["figures"]["k_rows"]["data"][0]["z"]) == 5
    assert body["kv"]["cross"]["reused"] is True
    assert field_of(app_client.get("/api/kv-cache", params={"text": CAT, "layer": 40})) == "layer"
