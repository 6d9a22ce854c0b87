"""/timeline and its JSON routes (app/pages/timeline.py) on the committed timeline folder: the
snapshots listed, a reading and a comparison, 422s that name the field for bad snapshot names
and out-of-range layers and heads, the load going through the engine (cancellable), and no
snapshot loaded at start-up."""

from __future__ import annotations

import json

import pytest

from model.timeline import FOLDER, MANIFEST

MANIFEST_DATA = json.loads((FOLDER / MANIFEST).read_text(encoding="utf-8"))
NAMES = [e["name"] for e in MANIFEST_DATA["snapshots"]]
TEXT = "The cat sits on the mat."


def read(client, **body):
    return client.post("/api/timeline/read", json={"text": TEXT, **body})


def test_nothing_is_loaded_at_start_up(fresh_client):
    state = fresh_client.app.state
    assert not hasattr(state, "timeline")  # opened on first use only
    fresh_client.get("/api/timeline")
    assert state.timeline.loads == 0  # the list reads the manifest, no weights


def test_the_summary_lists_every_snapshot_and_the_served_model(app_client):
    answer = app_client.get("/api/timeline")
    assert answer.status_code == 200
    data = answer.json()
    assert [s["name"] for s in data["snapshots"]] == NAMES
    assert data["snapshots"][0]["step"] == 0 and data["snapshots"][0]["regenerated"]
    assert data["shipped"]["available"] and data["dev"]["pairs"] == MANIFEST_DATA["dev"]["pairs"]
    assert data["figure"]["data"][0]["x"] == MANIFEST_DATA["curve"]["step"]


def test_a_reading_and_a_comparison(app_client):
    first, last = NAMES[0], NAMES[-1]
    one = read(app_client, snapshot=last, layer=1, head=2).json()
    assert one["b"] is None and one["a"]["name"] == last and one["a"]["head"] == 2
    entry = MANIFEST_DATA["snapshots"][-1]
    assert one["a"]["target_tokens"] and len(one["a"]["probs"]) == len(one["a"]["labels"])
    marks = [shape["x0"] for shape in one["figures"]["curve"]["layout"]["shapes"]]
    assert marks == [entry["step"]]
    both = read(app_client, snapshot=first, compare=last).json()
    assert both["b"]["name"] == last and both["layer"] == MANIFEST_DATA["config"]["n_decoder_layers"] - 1
    parted = both["parted_at"]
    if parted is not None:
        assert both["a"]["labels"][:parted] == both["b"]["labels"][:parted]
    difference = both["difference"]
    assert difference["comparable"] and 0 <= difference["mean_distance"] <= 1
    # the served model has its own English vocabulary: a difference map only where its pieces
    # are the snapshot's (the tiny model's BPE may or may not cut this sentence into words)
    shipped = read(app_client, snapshot=last, compare="shipped").json()
    same_pieces = shipped["a"]["source_tokens"] == shipped["b"]["source_tokens"]
    assert shipped["b"]["name"] == "shipped" and shipped["difference"]["comparable"] == same_pieces


def test_readings_are_kept_and_loads_go_through_the_engine(fresh_client):
    engine = fresh_client.app.state.engine
    calls = engine.stop_checks
    assert read(fresh_client, snapshot=NAMES[1]).status_code == 200
    # the snapshot decoded on the model thread, each step asking its request's ticket first
    assert engine.stop_checks > calls
    timeline = fresh_client.app.state.timeline
    model = timeline.model(NAMES[1])
    assert not any(layer._forward_pre_hooks for layer in model.encoder_layers)  # no hook: cancellable
    calls = engine.stop_checks
    assert read(fresh_client, snapshot=NAMES[1]).status_code == 200
    assert engine.stop_checks == calls  # the reading was kept


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"snapshot": "step999999"}, "snapshot", "Input should be"),
    ({"snapshot": "../weights"}, "snapshot", "Input should be"),
    ({"snapshot": NAMES[0], "compare": "nope"}, "compare", "Input should be"),
    ({"snapshot": NAMES[0], "layer": 99}, "layer", "less than or equal"),
    ({"snapshot": NAMES[0], "layer": -1}, "layer", "greater than or equal"),
    ({"snapshot": NAMES[0], "head": 64}, "head", "less than or equal"),
    ({"snapshot": NAMES[0], "head": "1"}, "head", "valid integer"),
    ({"snapshot": NAMES[0], "extra": 1}, "extra", "Extra inputs"),
    ({"snapshot": NAMES[0], "text": "猫"}, "text", "English"),
    ({"snapshot": NAMES[0], "text": "a" * 601}, "text", "at most 600"),
    ({}, "snapshot", "Field required"),
])
def test_bad_requests_are_422_naming_the_field(app_client, body, field, words):
    answer = app_client.post("/api/timeline/read", json={"text": TEXT, **body})
    assert answer.status_code == 422
    errors = answer.json()["errors"]
    assert any(e["field"] == field and words in e["message"] for e in errors), errors


def test_too_many_tokens_is_422(app_client):
    answer = read(app_client, snapshot=NAMES[0], text="a 1 " * 100)
    assert answer.status_code == 422 and "tokens long" in answer.json()["message"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_renders_in_both_languages(app_client, lang):
    html = app_client.get("/timeline", params={"text": TEXT}, headers={"cookie": f"lang={lang}"}).text
    assert 'id="snapshot-slider"' in html and 'src="/static/js/timeline.js"' in html
    assert ("Watch it learn" if lang == "en" else "看它学会") in html
    assert 'href="/timeline"' in app_client.get("/training").text  # in the nav of every page


def test_the_served_model_is_said_to_continue_the_run_only_when_its_first_stage_is_the_run():
    from app.pages.timeline import continues_run

    manifest = {"run": {"label": {"en": "from random weights"}}, "epochs": [{"step": 50}, {"step": 90}]}
    run = {"label": {"en": "from random weights"}, "epochs": [{"step": 50}, {"step": 90}]}
    later = {"label": {"en": "one more pass"}, "epochs": [{"step": 40}]}
    assert continues_run(manifest, [run, later])
    assert continues_run(manifest, [run])  # the served model is the run itself
    assert not continues_run(manifest, [later, run])  # another line, the run somewhere after
    assert not continues_run(manifest, [{**run, "epochs": [{"step": 50}]}, later])  # stopped earlier
    assert not continues_run({"run": {"label": None}, "epochs": []}, [{"epochs": []}])
