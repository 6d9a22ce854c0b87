"""The x-ray whole on one screen, and zooming into a layer in place (issue 24, item 2).

At 1440×900 the whole model (encoder, decoder, output) fits below the sticky player and stays
there while the keyboard steps through the computation; a layer's title (or any of its blocks)
draws that layer large in place, the breadcrumb and Escape go back, the zoom follows the
computation from layer to layer; on a 390 px phone the overview is at most two screens tall.
"""

from __future__ import annotations

from urllib.parse import parse_qs, quote, urlsplit

import pytest

from tests.e2e.test_xray import DEC_LAYERS, ENC_LAYERS, SEED, active, frame_of, ready
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture()
def server(shipped_server):
    """The app on the shipped checkpoint (one server for the whole run)."""
    return shipped_server


def open_xray(page, server, query: str = "") -> None:
    page.goto(f"{server}/?text={quote(SEED)}{query}")
    ready(page)


def boxes(page) -> dict:
    """The player's, the stage's and every drawn row's box, in viewport pixels."""
    return page.evaluate("""() => {
      const box = (el) => {
        const r = el.getBoundingClientRect();
        return {top: r.top, bottom: r.bottom, height: r.height, width: r.width};
      };
      return {
        player: box(document.getElementById('xr-player')),
        stage: box(document.getElementById('xr-stage')),
        rows: [...document.querySelectorAll('.xr-row')].map((r) => ({key: r.dataset.key, ...box(r)})),
        height: window.innerHeight,
      };
    }""")


def assert_whole_model_on_screen(page) -> None:
    b = boxes(page)
    assert b["stage"]["top"] >= b["player"]["bottom"] - 1, b["stage"]
    assert b["stage"]["bottom"] <= b["height"], b["stage"]
    off = [r["key"] for r in b["rows"] if r["top"] < b["player"]["bottom"] - 1 or r["bottom"] > b["height"]]
    assert off == [], off
    keys = {r["key"] for r in b["rows"]}
    assert {"enc-tokens", "e-2-add_norm2", "d-0-self_attention", "d-2-add_norm3", "dec-output",
            "dec-chosen"} <= keys


def test_the_whole_model_fits_below_the_player_at_1440_and_stays_there_while_stepping(wide, server):
    open_xray(wide, server, f"&frame={frame_of(0, 'embedding')}")
    wide.locator("h1").click()  # the top of the page: the model starts below the fold
    wide.keyboard.press("ArrowRight")  # stepping brings the whole model below the player
    assert_whole_model_on_screen(wide)
    before = wide.evaluate("window.scrollY")
    # every sub-step of the encoder and of the first decoding step: the picture stands still
    for _ in range(frame_of(1, "output") - frame_of(0, "self_attention")):
        wide.keyboard.press("ArrowRight")
        keys = active(wide)
        assert keys, "a block is lit at every frame"
        key = keys[0]
        box = wide.locator(f'.xr-row[data-key="{key}"]').bounding_box()
        assert box["y"] >= boxes(wide)["player"]["bottom"] - 1 and box["y"] + box["height"] <= 900, key
    assert wide.evaluate("window.scrollY") == before
    assert_whole_model_on_screen(wide)
    # the layers of a side sit side by side: one row of boxes, in order
    for side, layers in (("e", ENC_LAYERS), ("d", DEC_LAYERS)):
        tops = [wide.locator(f'.xr-group[data-zoom="{side}-{n}"]').bounding_box() for n in range(layers)]
        assert len({round(t["y"]) for t in tops}) == 1, tops
        assert [t["x"] for t in tops] == sorted(t["x"] for t in tops)


def test_zoom_into_a_layer_in_place_and_back(wide, server):
    open_xray(wide, server, f"&frame={frame_of(1, 'self_attention', 1)}")
    group = wide.locator('.xr-group[data-zoom="d-1"]')
    small = group.bounding_box()
    small_fig = wide.locator('.xr-row[data-key="d-1-self_attention"] .xr-fig').bounding_box()
    assert not wide.locator('.xr-row[data-key="d-1-self_attention"] .xr-shape').is_visible()
    wide.locator('.xr-group-title[data-zoom="d-1"]').click()
    wide.locator('.xr-group.xr-zoomed[data-zoom="d-1"]').wait_for()
    assert wide.locator("#xr-crumb-here").text_content() == f"Decoder layer 2 of {DEC_LAYERS}"
    assert parse_qs(urlsplit(wide.url).query)["zoom"] == ["d-1"]
    large = group.bounding_box()
    large_fig = wide.locator('.xr-row[data-key="d-1-self_attention"] .xr-fig').bounding_box()
    column = wide.locator("#xr-decoder").bounding_box()
    assert large["width"] > 2.5 * small["width"] and large["width"] > 0.9 * column["width"] - 30
    assert large_fig["height"] > small_fig["height"]  # drawn large: the attention lines get room
    assert wide.locator('.xr-row[data-key="d-1-self_attention"] .xr-shape').is_visible()
    # the strips are drawn again at the new width, not stretched
    assert wide.locator('.xr-row[data-key="d-1-self_attention"] canvas').evaluate(
        "c => c.width") >= large_fig["width"] - 1
    # the other layers stay on the page, small, and can be opened from there
    assert wide.locator('.xr-group[data-zoom="d-0"]').is_visible()
    assert wide.locator('.xr-group[data-zoom="e-2"]').is_visible()
    # Escape goes back to the whole model
    wide.locator("h1").click()
    wide.keyboard.press("Escape")
    wide.locator(".xr-group.xr-zoomed").wait_for(state="detached")
    assert "zoom" not in parse_qs(urlsplit(wide.url).query)
    assert abs(group.bounding_box()["width"] - small["width"]) < 2
    # a small block's head zooms into its layer and opens the block there
    wide.locator('.xr-row[data-key="e-1-ffn"] button.xr-head').click()
    wide.locator('.xr-group.xr-zoomed[data-zoom="e-1"]').wait_for()
    wide.locator('.xr-row[data-key="e-1-ffn"] .xr-panel .xr-step').first.wait_for()
    assert wide.locator('.xr-row[data-key="e-1-ffn"] .xr-panel').is_visible()
    # the breadcrumb's "Whole model" goes back too
    wide.locator("#xr-crumb-all").click()
    wide.locator(".xr-group.xr-zoomed").wait_for(state="detached")
    assert wide.locator("#xr-crumb-all").is_disabled()


def test_a_zoomed_view_follows_the_computation_to_the_next_layer(wide, server):
    open_xray(wide, server, f"&frame={frame_of(2, 'add_norm3', 0)}&zoom=d-0")
    assert wide.locator('.xr-group.xr-zoomed').get_attribute("data-zoom") == "d-0"
    wide.locator("h1").click()
    wide.keyboard.press("ArrowRight")  # layer 2's masked self-attention runs next
    assert active(wide) == ["d-1-self_attention"]
    wide.locator('.xr-group.xr-zoomed[data-zoom="d-1"]').wait_for()
    box = wide.locator('.xr-row[data-key="d-1-self_attention"]').bounding_box()
    player = wide.locator("#xr-player").bounding_box()
    assert box["y"] >= player["y"] + player["height"] - 1 and box["y"] + box["height"] <= 900
    # the output is no layer: the zoom stays where it was
    for _ in range(frame_of(2, "output") - frame_of(2, "self_attention", 1)):
        wide.keyboard.press("ArrowRight")
    assert "dec-output" in active(wide)
    wide.locator(f'.xr-group.xr-zoomed[data-zoom="d-{DEC_LAYERS - 1}"]').wait_for()
    assert wide.locator(".xr-group.xr-zoomed").count() == 1


def test_a_bad_zoom_in_the_url_is_ignored(wide, server):
    for bad in ("d-9", "x-1", "e-", "<b>"):
        open_xray(wide, server, f"&zoom={quote(bad)}")
        assert wide.locator(".xr-group.xr-zoomed").count() == 0, bad
        assert wide.locator("#xr-crumb-all").is_disabled()


def test_the_phone_overview_is_at_most_two_screens_and_zooms_by_tap(phone, server):
    open_xray(phone, server, f"&frame={frame_of(1, 'cross_attention', 2)}")
    height = phone.locator("#xr-stage").bounding_box()["height"]
    assert height <= 2 * 844, height
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    phone.locator('.xr-group-title[data-zoom="d-2"]').click()
    phone.locator('.xr-group.xr-zoomed[data-zoom="d-2"]').wait_for()
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    wide_elements = phone.locator("main *").evaluate_all(
        "els => els.filter(e => e.getBoundingClientRect().right > 391 && e.offsetParent)"
        ".map(e => e.tagName + '.' + e.className)")
    assert wide_elements == []
    phone.locator('.xr-group-title[data-zoom="d-2"]').click()  # its ✕: back to the overview
    phone.locator(".xr-group.xr-zoomed").wait_for(state="detached")


def beacon_on(page, key: str) -> bool:
    """Whether the travelling outline has arrived around row ``key``."""
    return page.evaluate("""(key) => {
      const b = document.getElementById('xr-beacon').getBoundingClientRect();
      const r = document.querySelector(`.xr-row[data-key="${key}"]`).getBoundingClientRect();
      return Math.abs(b.left + 3 - r.left) < 2 && Math.abs(b.top + 3 - r.top) < 2
        && Math.abs(b.width - 6 - r.width) < 2;
    }""", key)


def test_the_highlight_travels_to_each_block_and_a_sentence_plays_in_about_a_minute(wide, server):
    open_xray(wide, server, f"&frame={frame_of(1, 'add_norm1', 0)}")
    wait_until(lambda: beacon_on(wide, "d-0-add_norm1"), "the outline is around the block computing")
    wide.locator("h1").click()
    wide.keyboard.press("ArrowRight")
    wait_until(lambda: beacon_on(wide, "d-0-cross_attention"), "the outline moved on to cross-attention")
    # the links of the block computing fade in, the strongest first
    delays = wide.locator('.xr-row[data-key="d-0-cross_attention"] path').evaluate_all(
        "ps => ps.map(p => [+p.dataset.w, parseFloat(p.style.animationDelay)])")
    assert delays and all(d >= 0 for _, d in delays)
    strongest = max(delays)
    assert strongest[1] == min(d for _, d in delays)
    # at 1× every frame stays long enough to read (issue 75: at least 2 s, more for a long line):
    # the timeline is the sum of the frames' dwells (tests/e2e/test_xray_pace.py checks each)
    frames = wide.evaluate("ITTXray.state.frames.length")
    seconds = wide.evaluate("ITTXray.playSeconds()")
    dwells = wide.evaluate("[...ITTXray.state.frames.keys()].map(i => ITTXray.dwellMs(i))")
    assert seconds >= 2 * frames and abs(sum(dwells) / 1000 - seconds) < 0.01 * frames, (frames, seconds)
