"""Keeping what you see (issue 25 item 10): the x-ray saved to a file opens again without the model
running, the full trace downloads as JSON, and a damaged file is refused plainly. On the shipped
checkpoint: what is saved and opened again is the real translation."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from tests.e2e.conftest import SHIPPED_TRANSLATIONS

pytestmark = pytest.mark.e2e
SEED = "The cat sits on the mat."
OTHER = "Where is the station?"


@pytest.fixture()
def server(shipped_server):
    return shipped_server


def ready(page) -> None:
    page.locator("body[data-xray=ready]").wait_for()
    page.locator("body.busy").wait_for(state="detached")


def shown(page) -> dict:
    """What the picture was drawn from, and what it says."""
    return {
        "trace": page.evaluate("JSON.stringify(window.ITTXray.state.trace)"),
        "xr": page.evaluate("JSON.stringify(window.ITTXray.state.xr)"),
        "tokens": page.locator('.xr-row[data-key="enc-tokens"] .xr-token').all_text_contents(),
        # the translation above the player: beam 4's (in the view) and the player's own
        "result": page.locator("#xr-result-lines p").all_text_contents(),
    }


def save(page, tmp_path: Path, button: str) -> Path:
    menu = page.locator("#xr-files-menu")  # the toolbar's "Save / open" folds the file buttons
    if menu.get_attribute("open") is None:
        menu.locator("summary").click()
    with page.expect_download() as download:
        page.locator(button).click()
    path = tmp_path / download.value.suggested_filename
    download.value.save_as(path)
    return path


def test_a_saved_xray_opens_again_without_the_model(page, server, tmp_path):
    page.goto(f"{server}/?text={quote(SEED)}&strategy=sample&seed=7&temperature=1.3&max_len=8")
    ready(page)
    before = shown(page)
    # one translation, the sampled run's, which the file keeps (issue 75: no second decoding)
    assert len(before["result"]) == 1 and before["result"][0].startswith("Sampling")
    assert json.loads(before["xr"])["decoder"]["values"] is None  # they come when the player moves
    saved = save(page, tmp_path, "#xr-save")
    before["xr"] = shown(page)["xr"]  # saving asked for them: the file has them
    assert json.loads(before["xr"])["decoder"]["values"] is not None
    assert saved.name == "xray-the-cat-sits-on-the-mat.json"
    data = json.loads(saved.read_text())
    assert isinstance(data["strips"], str) and isinstance(data["heads"], str)
    assert data["format"] == "inside-the-transformer/xray-view" and data["version"] == 1
    assert data["request"]["text"] == SEED and data["request"]["seed"] == 7
    # another sentence on screen; then the file, with no model request at all
    page.goto(f"{server}/?text={quote(OTHER)}&max_len=8")
    ready(page)
    other = shown(page)
    assert other["tokens"] != before["tokens"]
    assert all(SHIPPED_TRANSLATIONS[OTHER] in line for line in other["result"])
    asked = []
    page.on("request", lambda r: asked.append(r.url) if "/api/" in r.url else None)
    page.locator("#xr-open").set_input_files(str(saved))
    page.locator("body[data-xray-source=file]").wait_for()
    ready(page)
    assert asked == []
    assert shown(page) == before
    status = page.locator("#xr-file-status")
    assert status.is_visible() and saved.name in status.text_content()
    query = parse_qs(urlsplit(page.url).query)
    assert query["text"] == [SEED] and query["strategy"] == ["sample"] and query["seed"] == ["7"]
    assert page.locator("#text").input_value() == SEED
    assert page.locator("#xr-strategy").input_value() == "sample"
    # every head's weights are in the file too: picking a head asks nothing
    assert isinstance(data["heads"], str)
    page.select_option("#xr-head", "2")
    page.wait_for_function("() => window.ITTXray.state.trace.heads === true")
    assert asked == []
    # going on from there is the live model again: the banner goes
    page.locator("#xr-next").click()
    page.go_back()
    ready(page)
    assert parse_qs(urlsplit(page.url).query)["text"] == [OTHER]
    assert page.locator("#xr-file-status").is_hidden()


def test_the_whole_trace_downloads_as_json(page, server, tmp_path):
    page.goto(f"{server}/?text={quote(SEED)}&max_len=8")
    ready(page)
    path = save(page, tmp_path, "#xr-save-trace")
    assert path.name == "trace-the-cat-sits-on-the-mat.json"
    data = json.loads(path.read_text())
    assert data["request"]["text"] == SEED
    trace = data["trace"]
    assert trace["source_tokens"] == page.evaluate("window.ITTXray.state.trace.source_tokens")
    assert [s["token"] for s in trace["steps"]] == page.evaluate(
        "window.ITTXray.state.trace.steps.map((s) => s.token)")
    assert len(trace["encoder"]) == len(page.evaluate("window.ITTXray.state.trace.encoder"))


def test_a_file_that_is_not_a_saved_xray_is_refused_and_the_picture_stays(page, server, tmp_path):
    page.goto(f"{server}/?text={quote(SEED)}&max_len=8")
    ready(page)
    good = json.loads(save(page, tmp_path, "#xr-save").read_text())
    before = shown(page)  # saving fetched every head's weights into the trace on screen
    cases = {
        "notes.json": "this is not json",
        "other.json": json.dumps({"hello": 1}),
        "future.json": json.dumps({**good, "version": 99}),
        "cut.json": json.dumps({**good, "view": good["view"][: len(good["view"]) // 3]}),
        "garbage.json": json.dumps({**good, "view": "AAAA" * 64}),
    }
    messages = {}
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text)
        page.evaluate("ITT.clearError()")
        page.locator("#xr-open").set_input_files(str(path))
        error = page.locator("#error")
        error.wait_for(state="visible")
        messages[name] = error.text_content()
        assert shown(page) == before, name
        assert parse_qs(urlsplit(page.url).query)["text"] == [SEED]
    assert "not JSON" in messages["notes.json"]
    assert "format 99" in messages["future.json"]
    for name in ("other.json", "cut.json", "garbage.json"):
        assert "not a saved x-ray" in messages[name], (name, messages[name])
    assert page.locator("body[data-xray=ready]").count() == 1


def test_the_xray_links_to_the_training_timeline_with_the_sentence(page, server):
    page.goto(f"{server}/?text={quote(OTHER)}&max_len=8")
    ready(page)
    link = page.locator("#timeline-link a")
    assert link.is_visible()
    link.click()
    page.wait_for_url("**/timeline**")
    assert parse_qs(urlsplit(page.url).query)["text"] == [OTHER]
