"""The x-ray downloads one answer per sentence (issue 27): in headless Chromium on the shipped
checkpoint, a new sentence costs the page exactly one model-data request, small on the wire, and
the deep dives (an opened block, every logit for the sampling knobs) load only when opened."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

import pytest

from bench.common import sentences
from tests.e2e.test_xray import XRAY, open_block, ready, set_range
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e
TEN_WORDS = sentences(10, 1, offset=27_010)[0]
MAX_10_WORDS = 120_000  # bytes on the wire for a new 10-word sentence (issue 27's target)


@pytest.fixture()
def server(shipped_server):
    """The app on the shipped checkpoint (one server for the whole run)."""
    return shipped_server


def api_paths(calls: list) -> list[str]:
    return [urlsplit(request.url).path for request in calls if "/api/" in request.url]


def test_a_new_sentence_is_one_small_download_and_deep_dives_load_when_opened(page, server):
    calls: list = []
    page.on("request", lambda request: calls.append(request))
    with page.expect_request_finished(lambda r: urlsplit(r.url).path == "/api/xray/view") as done:
        page.goto(f"{server}{XRAY}?text={quote(TEN_WORDS)}")
    ready(page)
    assert api_paths(calls) == ["/api/xray/view"]
    sizes = done.value.sizes()
    assert done.value.response().header_value("content-encoding") == "gzip"
    assert 0 < sizes["responseBodySize"] <= MAX_10_WORDS, sizes
    assert page.locator("#xr-dist-body tr").count() == 15  # the sampling table, from the view alone
    first = page.locator("#xr-dist-body tr").first
    assert first.get_attribute("data-model") == first.get_attribute("data-new")

    # an opened attention block asks for its own numbers and every head's weights (its heat map
    # draws its head's whole matrix; the view carries their average), and nothing else
    calls.clear()
    open_block(page, "e-0-self_attention")
    assert sorted(api_paths(calls)) == ["/api/xray/block", "/api/xray/heads"]
    calls.clear()
    page.select_option("#xr-head", "1")  # the heads are here already
    open_block(page, "d-0-cross_attention")
    assert api_paths(calls) == ["/api/xray/block"]

    # turning a knob asks for every logit once; later turns and steps use them
    calls.clear()
    with page.expect_request_finished(lambda r: urlsplit(r.url).path == "/api/xray/logits"):
        set_range(page, "#xr-temperature", 2)
    wait_until(lambda: first.get_attribute("data-new") != first.get_attribute("data-model"),
               "the table redrew at temperature 2")
    set_range(page, "#xr-topk", 3)
    wait_until(lambda: page.locator("#xr-dist-body tr.xr-cut").count() == 12, "top-k cut 12 rows")
    page.locator("#xr-next").click()
    page.locator("#xr-draw-button").click()
    page.locator("#xr-drew").wait_for()
    # the player's first move asks for the decoder's strips, once (the landing frame draws none)
    page.locator("body[data-xray-strips=ready]").wait_for()
    assert sorted(api_paths(calls)) == ["/api/xray/logits", "/api/xray/strips"]


def test_every_heads_weights_come_once_when_a_head_is_picked(page, server):
    calls: list = []
    page.on("request", lambda request: calls.append(request))
    page.goto(f"{server}{XRAY}?text={quote(TEN_WORDS)}&frame=3")
    ready(page)
    lines = '.xr-row[data-key="e-0-self_attention"] path'
    assert set(page.locator(lines).evaluate_all("ps => ps.map(p => p.dataset.h)")) == {"avg"}
    calls.clear()
    with page.expect_request_finished(lambda r: urlsplit(r.url).path == "/api/xray/heads"):
        page.select_option("#xr-head", "all")
    wait_until(lambda: len(set(page.locator(lines).evaluate_all("ps => ps.map(p => p.dataset.h)"))
                           - {"avg"}) >= 2, "every head drawn in its own colour")
    page.select_option("#xr-head", "3")
    wait_until(lambda: set(page.locator(lines).evaluate_all("ps => ps.map(p => p.dataset.h)")) == {"3"},
               "head 4 drawn alone")
    assert api_paths(calls) == ["/api/xray/heads"]
    # a link that picks a head draws it from the start (its one extra request)
    calls.clear()
    page.goto(f"{server}{XRAY}?text={quote(TEN_WORDS)}&frame=3&head=0")
    ready(page)
    assert set(page.locator(lines).evaluate_all("ps => ps.map(p => p.dataset.h)")) == {"0"}
    assert api_paths(calls) == ["/api/xray/view", "/api/xray/heads"]


def test_draw_at_the_starting_knobs_asks_for_the_logits_first(page, server):
    page.goto(f"{server}{XRAY}?text={quote(TEN_WORDS)}&frame=3")
    ready(page)
    with page.expect_request_finished(lambda r: urlsplit(r.url).path == "/api/xray/logits"):
        page.locator("#xr-draw-button").click()
    page.locator("#xr-drew").wait_for()
    assert "seed 0" in page.locator("#xr-drew").text_content().lower()


def test_the_decoder_strips_come_when_the_player_moves_and_draw_the_same(page, server):
    """The view leaves the decoder's strips out; each decoder row says its ±m from the start, and
    once the player moves they come (one request) and are drawn: the same ±m, strips painted."""
    calls: list = []
    page.on("request", lambda request: calls.append(request))
    page.goto(f"{server}{XRAY}?text={quote(TEN_WORDS)}")
    ready(page)
    assert page.evaluate("document.body.dataset.xrayStrips") == "none"
    ranges = '.xr-row[data-key^="d-"] .xr-range, .xr-row[data-key="dec-embedding"] .xr-range'
    before = page.locator(ranges).all_text_contents()
    assert before and all(text.startswith("±") for text in before)
    blank = page.evaluate(STRIP_INK, "dec-embedding")
    assert blank == 0  # nothing painted under the veil before they come
    with page.expect_request_finished(lambda r: urlsplit(r.url).path == "/api/xray/strips") as done:
        page.locator("#xr-play").click()
    page.locator("body[data-xray-strips=ready]").wait_for()
    page.locator("#xr-play").click()  # pause
    assert done.value.response().header_value("content-encoding") == "gzip"
    assert page.locator(ranges).all_text_contents() == before
    wait_until(lambda: page.evaluate(STRIP_INK, "dec-embedding") > 0, "the decoder's strips painted")
    assert api_paths(calls) == ["/api/xray/view", "/api/xray/strips"]
    # a link into the decoding draws it whole from the start (its one extra request)
    calls.clear()
    page.goto(f"{server}{XRAY}?text={quote(TEN_WORDS)}&frame=40")
    ready(page)
    assert page.evaluate("document.body.dataset.xrayStrips") == "ready"
    assert page.evaluate(STRIP_INK, "dec-embedding") > 0
    assert api_paths(calls) == ["/api/xray/view", "/api/xray/strips"]


# how many pixels of a row's canvas are painted (alpha > 0)
STRIP_INK = """(key) => {
  const canvas = document.querySelector(`.xr-row[data-key="${key}"] canvas`);
  const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let ink = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i] > 0) ink++;
  return ink;
}"""


def test_a_forced_prefix_is_still_one_download(page, server):
    calls: list = []
    page.on("request", lambda request: calls.append(request))
    page.goto(f"{server}{XRAY}?text={quote(TEN_WORDS)}&forced=%E6%88%91")
    ready(page)
    assert api_paths(calls) == ["/api/xray/view"]
    assert not page.locator("#xr-compare").is_hidden()  # the unforced translation came with it
    assert page.locator("#xr-original li").count() > 0
