"""Keeping what you see on the pages drawn from the trace (issue 25 item 10): "Download the trace
(JSON)" on /pipeline, /tokens, /embeddings, /attention, /decode and /kv-cache gives a file that
opens again (file picker or drag-and-drop) on any of them and draws the same figures with no
request to the server; a banner says so and leads back to the live model; a damaged, foreign,
wrong-version or cut file is refused in plain words and the page stays as it was."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from tests.conftest import warm_page

SEED = "The cat sits on the mat."
OTHER = "Where is the station?"
# Each page with the settings it is opened with (short, for the tiny test model).
PAGES = {
    "/pipeline": "max_len=6",
    "/tokens": "max_len=6&row=1",
    "/embeddings": "max_len=6",
    "/attention": "max_len=6&kind=cross&layer=1&head=1",
    "/decode": "max_len=6&step=2",
    "/kv-cache": "steps=4&runs=1&layer=1",
}
# What a page drew: every chart's numbers and every word on it (the save/open bar, the banner
# and the error box aside).
DRAWN = """() => {
    const plots = [...document.querySelectorAll('#main .js-plotly-plot')].map((node) => [
        node.id || node.parentElement.className,
        JSON.stringify((node.data || []).map((d) => [d.x, d.y, d.z, d.text, d.customdata]))]);
    const main = document.getElementById('main').cloneNode(true);
    main.querySelectorAll('#saved-files, #saved-status, #error, .js-plotly-plot').forEach((n) => n.remove());
    return { plots, text: main.innerText.replace(/\\s+/g, ' ') };
}"""


def url(server: str, path: str, text: str) -> str:
    return f"{server}{path}?text={quote(text)}&{PAGES[path]}"


def settle(page) -> None:
    page.wait_for_load_state("networkidle")
    page.locator("body.busy").wait_for(state="detached")
    page.locator("#main .js-plotly-plot .main-svg").first.wait_for(state="attached")


def download(page, tmp_path: Path) -> Path:
    with page.expect_download() as done:
        page.locator("#saved-download").click()
    path = tmp_path / done.value.suggested_filename
    done.value.save_as(path)
    return path


def open_file(page, path: Path) -> list[str]:
    """Open ``path`` with the file picker; the /api/ requests made meanwhile."""
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/api/" in r.url else None)
    page.locator("#saved-open").set_input_files(str(path))
    page.locator("body[data-source=file]").wait_for(state="attached")
    return asked


@pytest.mark.parametrize("path", list(PAGES))
def test_a_downloaded_trace_opens_again_on_its_page_without_the_model(page, server, tmp_path, path):
    page.goto(url(server, path, SEED))
    settle(page)
    before = page.evaluate(DRAWN)
    saved = download(page, tmp_path)
    data = json.loads(saved.read_text())
    assert data["format"] == "inside-the-transformer/trace" and data["version"] == 1
    assert data["request"]["text"] == SEED and data["page"] == path
    assert data["trace"]["source_tokens"] and data["trace"]["steps"]  # /api/trace in full
    # another sentence on screen, then the file
    page.goto(url(server, path, OTHER))
    settle(page)
    assert page.evaluate(DRAWN) != before
    asked = open_file(page, saved)
    assert asked == []
    assert page.evaluate(DRAWN) == before
    banner = page.locator("#saved-status")
    assert banner.is_visible()
    words = banner.inner_text()
    assert saved.name in words and SEED in words and "UTC" in words
    assert page.locator("#error").is_hidden()
    query = parse_qs(urlsplit(page.url).query)
    assert query["text"] == [SEED]
    assert page.locator("#text").input_value() == SEED
    # back to live mode: the banner goes, and the model is asked again for the same page
    page.locator("#saved-live").click()
    page.locator("body[data-source=file]").wait_for(state="detached")
    settle(page)
    assert banner.is_hidden() and any("/api/" in u for u in asked)
    if path != "/kv-cache":  # the race is timed again
        assert page.evaluate(DRAWN)["plots"] == before["plots"]


@pytest.mark.parametrize("path", ["/pipeline", "/embeddings", "/attention", "/decode"])
def test_a_trace_downloaded_on_one_page_opens_on_the_others(page, server, tmp_path, path):
    page.goto(url(server, "/tokens", SEED))
    settle(page)
    saved = download(page, tmp_path)
    page.goto(f"{server}{path}?text={quote(SEED)}&max_len=6")
    settle(page)
    live = page.evaluate(DRAWN)["plots"]
    page.goto(url(server, path, OTHER))
    settle(page)
    # dropped on the page this time
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/api/" in r.url else None)
    page.evaluate("""(text) => {
        const transfer = new DataTransfer();
        transfer.items.add(new File([text], 'dropped.json', { type: 'application/json' }));
        document.getElementById('main').dispatchEvent(
            new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
    }""", saved.read_text())
    page.locator("body[data-source=file]").wait_for(state="attached")
    assert asked == []
    assert page.evaluate(DRAWN)["plots"] == live
    assert "dropped.json" in page.locator("#saved-status").inner_text()


def test_going_back_from_a_saved_trace_is_live_again(page, server, tmp_path):
    page.goto(url(server, "/tokens", SEED))
    settle(page)
    saved = download(page, tmp_path)
    page.goto(url(server, "/tokens", OTHER))
    settle(page)
    live = page.evaluate(DRAWN)
    open_file(page, saved)
    assert page.evaluate(DRAWN) != live
    page.go_back()
    page.locator("body[data-source=file]").wait_for(state="detached")
    settle(page)
    assert page.locator("#saved-status").is_hidden()
    assert parse_qs(urlsplit(page.url).query)["text"] == [OTHER]
    assert page.evaluate(DRAWN)["plots"] == live["plots"]


def test_what_the_file_does_not_hold_is_refused_not_asked(page, server, tmp_path):
    page.goto(url(server, "/attention", SEED))
    settle(page)
    saved = download(page, tmp_path)
    page.goto(url(server, "/attention", OTHER))
    settle(page)
    asked = open_file(page, saved)
    page.locator('.head-cell[data-kind="encoder"][data-layer="0"][data-head="1"]').click()
    page.locator("#error").wait_for(state="visible")
    assert "not in the saved file" in page.locator("#error").inner_text()
    assert asked == []


def refusals(good: dict) -> dict[str, str]:
    text = json.dumps(good)
    return {
        "notes.json": "this is not json",
        "cut.json": text[: len(text) // 2],
        "other.json": json.dumps({"hello": 1}),
        "future.json": json.dumps({**good, "version": 2}),
        "xray.json": json.dumps({"format": "inside-the-transformer/xray-view", "version": 1, "view": "AAAA"}),
        "notebook.json": json.dumps({key: good[key] for key in ("model", "request", "trace")}),
        "damaged.json": json.dumps({**good, "answers": {key: 1 for key in good["answers"]}}),
        "emptied.json": json.dumps({**good, "answers": {}}),
        "elsewhere.json": json.dumps({**good, "page": "/pipeline", "answers": {}}),
    }


@pytest.mark.parametrize(("lang", "expected"), [
    ("en", {"notes.json": "not complete JSON", "cut.json": "not complete JSON",
            "other.json": "not a trace downloaded", "future.json": "format 2",
            "xray.json": "saved x-ray", "notebook.json": "downloaded from the x-ray",
            "damaged.json": "damaged", "emptied.json": "damaged",
            "elsewhere.json": "saved on /pipeline"}),
    ("zh", {"notes.json": "不是完整的 JSON", "cut.json": "不是完整的 JSON",
            "other.json": "不是本应用下载的记录", "future.json": "格式 2",
            "xray.json": "保存的透视图", "notebook.json": "从透视图页面下载",
            "damaged.json": "已损坏", "emptied.json": "已损坏",
            "elsewhere.json": "没有本页的图"}),
])
def test_a_file_that_is_not_a_trace_is_refused_and_the_page_stays(warm_context, server, tmp_path, lang,
                                                                  expected):
    page = warm_page(warm_context, lang=lang, server=server)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_default_timeout(30_000)
    page.goto(url(server, "/tokens", SEED))
    settle(page)
    before = page.evaluate(DRAWN)
    good = json.loads(download(page, tmp_path).read_text())
    for name, text in refusals(good).items():
        path = tmp_path / name
        path.write_text(text)
        page.evaluate("ITT.clearError()")
        page.locator("#saved-open").set_input_files(str(path))
        error = page.locator("#error")
        error.wait_for(state="visible")
        assert expected[name] in error.inner_text(), (name, error.inner_text())
        assert page.evaluate(DRAWN) == before, name
        assert page.locator("#saved-status").is_hidden()
        assert parse_qs(urlsplit(page.url).query)["text"] == [SEED]
    # a trace saved on /tokens holds no race: /kv-cache says where it was saved
    page.goto(url(server, "/kv-cache", SEED))
    settle(page)
    kv_before = page.evaluate(DRAWN)
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(good))
    page.locator("#saved-open").set_input_files(str(path))
    page.locator("#error").wait_for(state="visible")
    assert "/tokens" in page.locator("#error").inner_text()
    assert page.evaluate(DRAWN) == kv_before
    page.close()
    assert errors == []
