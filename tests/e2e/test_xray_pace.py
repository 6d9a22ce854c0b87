"""A pace a person can follow, and the guided chapters as the front door (issue 75, items 2 and 3):
on the shipped model in Chromium, at 1440×900 and 390×844, in English and Chinese.

Playing dwells on each sub-step for the time its narration takes to read (checked against the
narration on screen, counted here on its own: words and Chinese characters), a learner plays one
time step, one layer or one sublayer at a time, and play stops where an open chapter's part
computes. The twelve chapters start from a button on the first screen; on a phone the player and
the chapter card cover at most 35 % of the screen and each chapter brings its ringed part into view.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from tests.conftest import warm_page
from tests.e2e.test_xray import ENC_SUBS, SEED, frame_of, ready
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

SIZES = {"wide": (1440, 900), "phone": (390, 844)}
OWN = "My brother bought three old books at the market yesterday."  # a new sentence of our own
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


@pytest.fixture()
def server(shipped_server):
    return shipped_server


def open_page(context, server, size: str, lang: str, text: str = SEED, query: str = ""):
    width, height = SIZES[size]
    page = warm_page(context, width, height)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    target = f"/?text={quote(text)}{query}"
    page.goto(f"{server}/lang/{lang}?next={quote(target)}")
    ready(page)
    page.errors = errors
    return page


def reading_ms(text: str) -> int:
    """A reader's time for one narration: 300 ms a word (Latin words and numbers), 200 ms a Chinese
    character (about 200 words or 300 characters a minute), never under 2 s."""
    han = len(HAN.findall(text))
    words = [w for w in HAN.sub(" ", text).split() if re.search(r"\w", w)]
    return max(2000, 300 * len(words) + 200 * han)


EVERY_FRAME = """() => ITTXray.state.frames.map((_, i) => {
  ITTXray.go(i);
  const n = document.getElementById('xr-narration');
  return [n.textContent, +n.dataset.readMs, +n.dataset.dwellMs, ITTXray.dwellMs(i)];
})"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_narration_of_the_seed_stays_on_screen_for_its_reading_time(warm_context, server, lang):
    page = open_page(warm_context, server, "wide", lang)
    frames = page.evaluate(EVERY_FRAME)
    assert len(frames) == page.evaluate("ITTXray.state.frames.length") > 100
    short = []
    for i, (text, read, dwell, dwell_fn) in enumerate(frames):
        assert text.strip(), i
        assert dwell == dwell_fn  # the attribute is the player's own timer value at 1×
        if dwell < reading_ms(text) or read != reading_ms(text):
            short.append((i, text, read, dwell, reading_ms(text)))
    assert short == [], short[:3]
    # a long narration holds longer than a short one: the dwell follows the text, not a constant
    assert len({d for _, _, d, _ in frames}) > 10
    total = sum(d for *_, d in frames)
    assert page.evaluate("ITTXray.playSeconds()") * 1000 == pytest.approx(total, abs=len(frames))
    # twice the speed halves it
    page.select_option("#xr-speed", "2")
    assert page.evaluate("ITTXray.dwellMs(3)") == pytest.approx(frames[3][3] / 2, abs=1)
    assert page.errors == []
    page.close()


def scrub(page) -> int:
    return int(page.locator("#xr-scrub").input_value())


def play_until_it_stops(page) -> int:
    page.locator("#xr-play").click()
    wait_until(lambda: page.locator("#xr-play").get_attribute("aria-pressed") == "false",
               "the player stopped by itself")
    return scrub(page)


def test_play_one_sublayer_one_layer_one_time_step(warm_context, server):
    page = open_page(warm_context, server, "wide", "en", OWN, f"&frame={frame_of(0, 'self_attention', 0)}")
    page.select_option("#xr-speed", "8")
    page.select_option("#xr-scope", "stage")  # a block and its Add & Norm
    assert play_until_it_stops(page) == frame_of(0, "add_norm1", 0)
    lit = page.locator(".xr-row.xr-active").evaluate_all("rs => rs.map(r => r.dataset.key)")
    assert lit == ["e-0-add_norm1"]
    page.select_option("#xr-scope", "layer")  # the rest of encoder layer 1
    assert play_until_it_stops(page) == frame_of(0, "add_norm2", 0)
    assert play_until_it_stops(page) == frame_of(0, "add_norm2", 1)  # at a layer's end: the next layer
    # this time step: the encoder's pass ends at its last sub-step, a decoding step at its output
    assert page.evaluate("ITTXray.unitEnd(5, 'step')") == ENC_SUBS - 1
    first = frame_of(1, "embedding")
    assert page.evaluate(f"ITTXray.unitEnd({first + 3}, 'step')") == frame_of(1, "output")
    assert page.evaluate(f"ITTXray.unitEnd({first + 3}, 'layer')") == frame_of(1, "add_norm3", 0)
    page.evaluate(f"ITTXray.go({frame_of(1, 'output')})")
    page.select_option("#xr-scope", "step")
    page.select_option("#xr-speed", "8")
    assert play_until_it_stops(page) == frame_of(2, "output")  # one whole decoding step, then stop
    assert "Time step 2 of" in page.locator("#xr-where").text_content()
    assert page.errors == []
    page.close()


def test_play_stops_where_the_open_chapters_part_computes(warm_context, server):
    page = open_page(warm_context, server, "wide", "en", OWN, "&chapter=5")  # Add & Norm, encoder layer 1
    chapter_frame = scrub(page)
    assert chapter_frame == frame_of(0, "add_norm1", 0)
    page.evaluate("ITTXray.go(0)")
    page.select_option("#xr-speed", "8")
    assert play_until_it_stops(page) == chapter_frame
    assert page.locator("#xr-chapter").is_visible()
    page.locator("#xr-chapter-close").click()  # no chapter: it plays on past that frame
    page.select_option("#xr-scope", "layer")
    assert play_until_it_stops(page) == frame_of(0, "add_norm2", 0)
    assert page.errors == []
    page.close()


def visible_part(page, selector: str) -> float:
    """How many px of the first element ``selector`` are on screen and not under the player."""
    return page.evaluate("""(sel) => {
      const p = document.getElementById('xr-player').getBoundingClientRect();
      let best = 0;
      for (const e of document.querySelectorAll(sel)) {
        const r = e.getBoundingClientRect();
        const above = Math.min(r.bottom, p.top) - Math.max(r.top, 0);
        const below = Math.min(r.bottom, innerHeight) - Math.max(r.top, p.bottom);
        best = Math.max(best, above, below);
      }
      return best;
    }""", selector)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", ["wide", "phone"])
def test_the_chapters_start_on_the_first_screen_and_each_shows_its_part(warm_context, server, size, lang):
    page = open_page(warm_context, server, size, lang, OWN)
    width, height = SIZES[size]
    start = page.locator("#xr-chapters-start")
    box = start.bounding_box()
    assert start.is_visible() and box["y"] >= 0 and box["y"] + box["height"] <= height
    assert start.text_content().strip() == {"en": "▶ Start the guided tour: 12 short chapters",
                                            "zh": "▶ 开始导览：12 个小章节"}[lang]
    start.click()
    covered = []
    for n in range(1, 13):
        assert page.locator("#xr-chapter").get_attribute("data-chapter") == str(n)
        wait_until(lambda: visible_part(page, ".xr-ring") >= 20, f"chapter {n}'s ringed part is in view")
        player = page.locator("#xr-player").bounding_box()["height"]
        covered.append(player / height)
        if size == "phone":
            assert player <= 0.35 * height, (n, player)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        if n < 12:
            page.locator("#xr-chapter-next").click()
    # every chapter is one click away in the card (no dropdown to open)
    page.locator('#xr-chapter-list button[data-chapter="4"]').click()
    assert page.locator("#xr-chapter").get_attribute("data-chapter") == "4"
    print(size, lang, "player + card / screen height, max", round(max(covered), 3))
    assert page.errors == []
    page.close()
