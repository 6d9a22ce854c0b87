"""The picture is the page (issue 56): on the shipped model, in Chromium, at 1440×900 and 390×844,
in English and Chinese — the model and the play control are on the first screen, token chips are
never broken mid-word, a zoomed layer grows where it stands and the whole model stays on one
screen, an opened block adds at most one screen, and the player never covers what it narrates.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.conftest import warm_page
from tests.e2e.test_xray import DEC_LAYERS, ENC_LAYERS, ready

pytestmark = pytest.mark.e2e

LONG = "The children were playing football in the park when it started to rain."
SIZES = {"wide": (1440, 900), "phone": (390, 844)}


@pytest.fixture()
def server(shipped_server):
    """The app on the shipped checkpoint (one server for every file that needs it)."""
    return shipped_server


def open_page(context, server, size: str, lang: str, query: str = ""):
    """A page of ``size`` in ``lang`` on the x-ray of LONG, in the worker's warm Chromium."""
    width, height = SIZES[size]
    page = warm_page(context, width, height)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    target = f"/?text={quote(LONG)}{query}"
    page.goto(f"{server}/lang/{lang}?next={quote(target)}")
    ready(page)
    page.errors = errors
    return page


def box(page, selector: str) -> dict:
    return page.locator(selector).first.evaluate(
        "e => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left,"
        " right: r.right, width: r.width, height: r.height}; }")


def overlap(a: dict, b: dict) -> bool:
    return (a["left"] < b["right"] - 1 and b["left"] < a["right"] - 1
            and a["top"] < b["bottom"] - 1 and b["top"] < a["bottom"] - 1)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", ["wide", "phone"])
def test_the_model_and_the_play_control_are_on_the_first_screen(warm_context, server, size, lang):
    page = open_page(warm_context, server, size, lang)
    width, height = SIZES[size]
    stage, play, sentence = box(page, "#xr-stage"), box(page, "#xr-play"), box(page, "#text")
    limit = height / 2 if size == "wide" else height  # the upper half at 1440, the first screen on a phone
    assert stage["top"] < limit, (size, lang, stage)
    assert play["top"] >= 0 and play["bottom"] <= height, (size, lang, play)
    assert sentence["bottom"] <= stage["top"]  # the sentence box stays above the picture
    # the model's first rows are drawn on that first screen, not just its frame
    assert box(page, '.xr-row[data-key="enc-tokens"]')["top"] < height
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.errors == []
    page.close()


@pytest.mark.parametrize("size", ["wide", "phone"])
def test_token_chips_are_never_broken_mid_word(warm_context, server, size):
    for zoom in ("", "&zoom=d-1"):
        page = open_page(warm_context, server, size, "en", zoom + "&frame=200")
        chips = page.locator(".xr-token").evaluate_all("""bs => bs.filter(b => b.offsetParent).map(b => {
          const style = getComputedStyle(b);
          const range = document.createRange();
          range.selectNodeContents(b);
          return {text: b.textContent, title: b.title, lines: range.getClientRects().length,
                  cut: b.scrollWidth > b.clientWidth, overflow: style.textOverflow, wrap: style.whiteSpace};
        })""")
        assert len(chips) >= 10, chips
        broken = [c for c in chips if c["lines"] > 1 or c["wrap"] != "nowrap"]
        assert broken == [], (size, zoom, broken)
        # a chip too narrow for its token ends in an ellipsis, and says the whole token on hover
        cut = [c for c in chips if c["cut"] and (c["overflow"] != "ellipsis" or c["title"] != c["text"])]
        assert cut == [], (size, zoom, cut)
        page.close()


def test_not_computed_yet_is_empty_and_narrow_lanes_show_a_size(warm_context, server):
    page = open_page(warm_context, server, "wide", "en", "&frame=60")
    # a lane still to come is an opaque blank with an empty dashed slot, not faint strips
    veil = page.locator('.xr-row[data-key="d-0-ffn"] rect.xr-veil').first
    assert veil.get_attribute("opacity") is None and veil.get_attribute("fill") == "#fff"
    assert page.locator('.xr-row[data-key="d-0-ffn"] rect.xr-slot').count() >= 1
    # an overview lane ~19 px wide shows its vector's size; hovering says so with the number
    fig = page.locator('.xr-row[data-key="e-0-ffn"] .xr-fig')
    b = fig.bounding_box()
    fig.hover(position={"x": b["width"] / 20, "y": b["height"] - 4})
    tip = page.locator(".xr-tip")
    tip.wait_for()
    assert "root-mean-square" in tip.text_content()
    assert page.errors == []
    page.close()


@pytest.mark.parametrize("key", [f"e-{n}" for n in range(ENC_LAYERS)] + [f"d-{n}" for n in range(DEC_LAYERS)])
def test_a_zoomed_layer_grows_in_place_and_the_model_stays_on_one_screen(warm_context, server, key):
    page = open_page(warm_context, server, "wide", "en", f"&zoom={key}&frame=60")
    page.locator(f'.xr-group.xr-zoomed[data-zoom="{key}"]').wait_for()
    # once stepping scrolls the page, the player sticks below the header: the model fits below it
    header, player, stage = box(page, "header.site"), box(page, "#xr-player"), box(page, "#xr-stage")
    assert stage["height"] <= 900 - header["height"] - player["height"], stage
    side, layers = key[0], ENC_LAYERS if key[0] == "e" else DEC_LAYERS
    groups = [box(page, f'.xr-group[data-zoom="{side}-{n}"]') for n in range(layers)]
    assert [g["left"] for g in groups] == sorted(g["left"] for g in groups)  # the layers keep their order
    assert len({round(g["top"]) for g in groups}) == 1  # side by side, none drawn below the others
    zoomed = groups[int(key[2:])]
    assert all(zoomed["width"] > 4 * g["width"] for n, g in enumerate(groups) if n != int(key[2:]))
    assert page.errors == []
    page.close()


def test_opening_a_block_adds_at_most_one_screen(warm_context, server):
    for row in ("d-1-cross_attention", "d-1-ffn", "d-1-add_norm2", "e-0-self_attention"):
        page = open_page(warm_context, server, "wide", "en", f"&zoom={row[:3]}&frame=200")
        before = page.evaluate("document.documentElement.scrollHeight")
        page.locator(f'.xr-row[data-key="{row}"] button.xr-head').click()
        page.locator(f'.xr-row[data-key="{row}"] .xr-panel .xr-step').first.wait_for()
        added = page.evaluate("document.documentElement.scrollHeight") - before
        assert added <= 900, (row, added)
        assert page.errors == []
        page.close()


@pytest.mark.parametrize("size", ["wide", "phone"])
def test_the_player_never_covers_the_block_computing_or_a_heading(warm_context, server, size):
    page = open_page(warm_context, server, size, "en", "&frame=0")
    page.locator("h1").click()
    covered = []
    for _ in range(40):
        page.keyboard.press("ArrowRight")
        player = box(page, "#xr-player")
        for selector in [".xr-row.xr-active"] + (["#xr-stage h2", "#xr-crumbs"] if size == "wide" else []):
            for found in page.locator(selector).evaluate_all(
                    "es => es.map(e => { const r = e.getBoundingClientRect();"
                    " return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; })"):
                if overlap(player, found):
                    covered.append((selector, page.evaluate("ITTXray.state.frame")))
    assert covered == [], covered
    assert page.errors == []
    page.close()


def test_the_guided_chapters_walk_the_story_on_the_learners_sentence(warm_context, server):
    page = open_page(warm_context, server, "wide", "en", "&chapter=1")
    card = page.locator("#xr-chapter")
    expect_text = {  # a chapter says this sentence's own numbers
        1: lambda tr: " · ".join(tr["source_tokens"]),
        3: lambda tr: tr["source_tokens"][max(range(len(tr["source_tokens"])), key=lambda k: tr["encoder"][0][
            "self_attention_mean"][1][k])],
        10: lambda tr: tr["steps"][2]["top"][0]["token"],
        11: lambda tr: tr["translation"],
    }
    trace = page.evaluate("ITTXray.state.trace")
    seen_frames = set()
    for n in range(1, 13):
        assert card.is_visible()
        assert page.locator("#xr-chapter-count").text_content() == f"Chapter {n} of 12"
        text = page.locator("#xr-chapter-text").text_content()
        assert "{" not in text and "{" not in page.locator("#xr-chapter-point").text_content()
        if n in expect_text:  # chapter 11 asks for the comparison's translation, then redraws
            page.wait_for_function("([want]) => document.querySelector('#xr-chapter-text')"
                                   ".textContent.includes(want)", arg=[expect_text[n](trace)])
            text = page.locator("#xr-chapter-text").text_content()
            assert expect_text[n](trace) in text and "{" not in text, (n, text)
        assert page.locator(".xr-ring").count() >= 1, n  # the part it explains is ringed
        assert page.locator(".xr-point").count() == 1, n  # and one thing to click next is marked
        assert f"chapter={n}" in page.url  # progress is kept in the URL
        seen_frames.add(page.evaluate("ITTXray.state.frame"))
        if n == 9:  # cross-attention: the player stands on decoder layer 1's cross-attention at step 3
            assert page.locator(".xr-row.xr-active").evaluate_all("rs => rs.map(r => r.dataset.key)") == [
                "d-0-cross_attention"]
            assert page.locator('.xr-group.xr-zoomed[data-zoom="d-0"]').count() == 1
        page.locator("#xr-chapter-next").click()
    assert len(seen_frames) >= 6  # the chapters move the player through the computation
    assert card.is_hidden() and "chapter=" not in page.url  # "Finish" closes the guide
    # the start button opens the guide; the card's numbered list opens any chapter
    page.locator("#xr-chapters-start").click()
    assert page.locator("#xr-chapter-count").text_content() == "Chapter 1 of 12"
    page.locator('#xr-chapter-list button[data-chapter="8"]').click()
    assert page.locator("#xr-chapter-title").text_content() == "Masked self-attention"
    assert "−∞" in page.locator("#xr-chapter-text").text_content()
    assert page.errors == []
    page.close()


def test_the_chapters_read_in_chinese_on_a_phone(warm_context, server):
    page = open_page(warm_context, server, "phone", "zh", "&chapter=12")
    assert page.locator("#xr-chapter-count").text_content() == "第 12 章，共 12 章"
    assert page.locator("#xr-chapter-title").text_content() == "KV 缓存"
    link = page.locator("#xr-kv-link")
    assert link.is_visible() and "/kv-cache?" in link.get_attribute("href")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert page.errors == []
    page.close()
