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
    assert field_of(app_client.get("/api/kv-cache", params={"text": "a" * 201})) == "query.text"
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
