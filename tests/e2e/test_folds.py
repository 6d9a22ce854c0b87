"""Issue 25 point 7: the long pages (/training, /scale, /decode, /embeddings, /kv-cache) fold
their secondary sections behind closed <details> so the main figure and controls read without
scrolling past walls of cards; on a phone /decode folds the parts of its decoder layer too; a
chart in a closed fold is not drawn until the fold opens, and then to its real width (one drawn
before, folded and shown again, is redrawn to its width); the "on this page" list and a
#fragment in the address open the fold they lead into."""

from __future__ import annotations

import re

import pytest

from tests.conftest import warm_page
from tests.e2e.conftest import shot

WIDE = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
# (path, the folds closed on arrival). Heights with the tiny test checkpoint at 1440 × 900 in
# English: before folding /training 4,866 px, /scale 6,074, /decode 5,146; after 2,885, 2,444
# and 3,631. The bounds leave room for a longer string or two, not for a wall.
FOLDS = {
    "/training": ["#schedule-card", "#adam", "#curves-card", "#evaluation"],
    "/scale": ["#chatgpt", "#design", "#improvements", "#timeline"],
    "/decode?max_len=6": ["#why", "#residual"],
    "/embeddings": ["#scaling", "#cosine", "#projection-card"],
    "/kv-cache?steps=4&runs=1": ["#kv-tensors"],
}
# Folded, /embeddings is 2,316 px and /kv-cache 2,292 (with the shipped model at 1440 px: 3,734
# → 2,400 and 3,672 → 2,300).
BOUND = {"/training": 3600, "/scale": 3000, "/decode?max_len=6": 3900, "/embeddings": 2900,
         "/kv-cache?steps=4&runs=1": 2900}
# A figure fits its box: Plotly's width is the box's (not its 700 px default), and not zero.
FITS = """(selector) => {
    const node = document.querySelector(selector);
    const layout = node && node._fullLayout;
    return Boolean(layout && node.querySelector('.main-svg') && node.clientWidth > 0
        && Math.abs(layout.width - node.clientWidth) <= 2);
}"""


# Chromium since version 131 lays out a closed <details>'s content (content-visibility: hidden),
# so a chart drawn there already has its width; Firefox, Safari and older Chromium leave it out
# of layout (display: none), so the chart falls back to Plotly's 700 × 450 px. This rule makes
# the test's Chromium behave like them.
LEGACY_DETAILS = "details:not([open]) > :not(summary) { display: none !important; }"


@pytest.fixture(scope="module")
def legacy_context(browser):
    """Pages that add LEGACY_DETAILS: a stylesheet from a script, which the CSP would refuse."""
    context = browser.new_context(viewport=WIDE, locale="en-US", bypass_csp=True)
    yield context
    context.close()


@pytest.fixture()
def open_page(warm_context, legacy_context):
    """``open_page(server, path, viewport, lang, legacy)``: a page loaded and settled, with the
    script and console errors it raises; closed after the test."""
    opened = []

    def open_page(server, path, viewport=WIDE, lang="en", legacy=False):
        page = warm_page(legacy_context if legacy else warm_context, viewport["width"],
                         viewport["height"], lang, server)
        opened.append(page)
        if legacy:
            page.add_init_script(f"""document.addEventListener("DOMContentLoaded", () => {{
                const style = document.createElement("style");
                style.textContent = {LEGACY_DETAILS!r};
                document.head.appendChild(style);
            }});""")
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.set_default_timeout(30_000)
        page.goto(f"{server}{path}")
        page.wait_for_load_state("networkidle")
        page.locator("body.busy").wait_for(state="detached")
        return page, errors

    yield open_page
    for page in opened:
        page.close()


def is_open(page, selector: str) -> bool:
    return page.locator(selector).evaluate("(d) => d.tagName === 'DETAILS' && d.open")


# (fold, the figure inside it) for every fold whose chart the tests open
FIGURES = {
    "/training": [("#schedule-card", "#schedule"), ("#curves-card", "#curves")],
    "/decode?max_len=6": [("#residual", "#fig-residual")],
    "/embeddings": [("#projection-card", "#projection")],
    "/kv-cache?steps=4&runs=1": [("#kv-tensors", "#kv-k")],
}


def opens_to_its_width(page, fold: str, figure: str, viewport: dict) -> None:
    """The figure in ``fold`` waits, undrawn, while its fold is closed (no drawing for a fold
    nobody opens); opening the fold draws it to its box's width, and the page does not scroll
    sideways."""
    assert not is_open(page, fold), fold
    assert page.locator(f"{figure}[data-waiting=fold]").count() == 1, figure
    assert page.locator(f"{figure} .main-svg").count() == 0, figure
    page.locator(f"{fold} > summary").click()
    assert is_open(page, fold), fold
    page.wait_for_function(FITS, arg=figure)
    assert page.locator(f"{figure}[data-waiting]").count() == 0, figure
    box = page.locator(figure).bounding_box()
    assert box["width"] > viewport["width"] / 3, figure  # some charts share a row with another
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"], figure


def refits_when_shown_again(page, fold: str, figure: str, viewport: dict) -> None:
    """A chart drawn in an open fold, folded again, the window made narrower, then shown again:
    redrawn to its box's new width (``legacy`` below: folded, it had no box to follow)."""
    page.locator(f"{fold} > summary").click()
    assert not is_open(page, fold), fold
    narrower = {"width": viewport["width"] - 60, "height": viewport["height"]}
    page.set_viewport_size(narrower)
    page.locator(f"{fold} > summary").click()
    page.wait_for_function(FITS, arg=figure)
    assert page.evaluate("document.documentElement.scrollWidth") <= narrower["width"], figure
    page.set_viewport_size(viewport)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("path", list(FOLDS))
def test_long_pages_open_with_their_secondary_sections_folded(open_page, server, path, lang):
    """Folded on arrival at 1440 px, each summary a heading in the page's language; then (in
    English) opening each fold that holds a chart draws the chart to its width."""
    page, errors = open_page(server, path, lang=lang)
    for fold in FOLDS[path]:
        assert page.locator(fold).evaluate("(d) => d.tagName") == "DETAILS", fold
        assert not is_open(page, fold), fold
        summary = page.locator(f"{fold} > summary")
        assert summary.is_visible() and summary.locator("h2[id]").inner_text().strip(), fold
        if lang == "zh":  # the summaries are in Chinese, not English left over
            assert re.search(r"[\u4e00-\u9fff]", summary.inner_text()), fold
    height = page.evaluate("document.documentElement.scrollHeight")
    if lang == "en":
        assert height < BOUND[path], (path, height)
    name = path.strip("/").split("?")[0]
    shot(page, f"folds-{name}-{lang}-1440")
    if lang == "en":
        for fold, figure in FIGURES.get(path, []):
            opens_to_its_width(page, fold, figure, WIDE)
    page.close()
    assert errors == []


@pytest.mark.parametrize("path", list(FIGURES))
@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1440", "390"])
def test_a_fold_left_out_of_layout_draws_its_figure_to_its_width_when_opened(open_page, server,
                                                                              path, viewport):
    """With a closed fold's content out of layout (display: none, as Firefox, Safari and older
    Chromium do) a chart there has no box to fit: opening the fold draws it to its box, and
    showing it again after the window changed redraws it to the new one. (In today's Chromium:
    test_long_pages_open_with_their_secondary_sections_folded at 1440 px and
    test_folded_pages_on_a_phone at 390.)"""
    page, errors = open_page(server, path, viewport, legacy=True)
    for fold, figure in FIGURES[path]:
        opens_to_its_width(page, fold, figure, viewport)
        refits_when_shown_again(page, fold, figure, viewport)
    page.close()
    assert errors == []


@pytest.mark.parametrize(("path", "fold", "heading"), [
    ("/scale", "#design", "#design-title"),
    ("/training", "#curves-card", "#curves-title"),
])
def test_the_list_of_sections_opens_the_fold_it_leads_into(open_page, server, path, fold, heading):
    page, errors = open_page(server, path)
    toc = page.locator("#toc")
    assert toc.is_visible()
    # every section is listed, folded or not, in the page's order
    listed = [link.get_attribute("href") for link in toc.locator("a").all()]
    sections = page.evaluate("""() => [...document.querySelectorAll(
        '#main > section.card:not([hidden]), #main > details.card:not([hidden])')]
        .map((s) => s.querySelector('h2[id]')).filter(Boolean).map((h) => '#' + h.id)""")
    assert listed == sections and heading in listed and len(listed) >= 5
    assert not is_open(page, fold)
    toc.locator(f'a[href="{heading}"]').click()
    page.wait_for_url(f"**{heading}")
    assert is_open(page, fold)
    assert 0 <= page.locator(heading).bounding_box()["y"] < WIDE["height"]
    if path == "/training":
        page.wait_for_function(FITS, arg="#curves")
    page.close()
    assert errors == []


def test_an_address_into_a_fold_opens_it(open_page, server):
    page, errors = open_page(server, "/scale#why-moe")
    assert is_open(page, "#design")
    assert not is_open(page, "#chatgpt")
    assert page.locator("#why-moe").is_visible()
    page.evaluate("window.location.hash = 'year-2017'")
    page.locator("#year-2017").wait_for(state="visible")
    assert is_open(page, "#timeline")
    page.close()
    assert errors == []


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("path", list(FOLDS))
def test_folded_pages_on_a_phone(open_page, server, path, lang):
    """Screenshots of every folded page at 390 px (closed, then every fold open), no sideways
    scroll either way; (in English) each chart in a fold drawn to its width when its fold opens."""
    page, errors = open_page(server, path, PHONE, lang)
    name = path.strip("/").split("?")[0]
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shot(page, f"folds-{name}-{lang}-390")
    if lang == "en":  # each chart in a fold is drawn to its width when its fold opens
        for fold, figure in FIGURES.get(path, []):
            opens_to_its_width(page, fold, figure, PHONE)
    for fold in FOLDS[path]:
        if not is_open(page, fold):
            page.locator(f"{fold} > summary").click()
        assert is_open(page, fold)
    page.locator("body.busy").wait_for(state="detached")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shot(page, f"folds-{name}-{lang}-390-open")
    page.close()
    assert errors == []


BOXES = ["#box-self", "#box-an1", "#box-cross", "#box-an2", "#box-ffn", "#box-an3"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_decode_folds_the_decoder_layer_on_a_phone(open_page, server, lang):
    """At 390 px /decode lists the six parts of the decoder layer as headings, each opening its
    figure on a tap, and the next-character distribution stays open; at 1440 px all are open."""
    page, errors = open_page(server, "/decode?max_len=6", PHONE, lang)
    for box in BOXES:
        fold = f"{box} > details"
        assert not is_open(page, fold), box
        assert page.locator(f"{fold} > summary h3").is_visible()
    assert page.locator("#fig-softmax .main-svg").first.is_visible()
    assert page.locator("#candidates .candidate").first.is_visible()
    assert page.locator(".seven-hint").is_visible()
    height = page.evaluate("document.documentElement.scrollHeight")
    if lang == "en":  # 3,744 px with the test model (the shipped one: 6,726 px before folding)
        assert height < 4400, height
    page.locator("#box-cross > details > summary").click()
    assert is_open(page, "#box-cross > details")
    page.wait_for_function(FITS, arg="#fig-cross_attention")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    # stepping on redraws the open part and leaves the closed ones closed
    page.locator("#next-step").click()
    page.wait_for_function(FITS, arg="#fig-cross_attention")
    assert not is_open(page, "#box-self > details")
    shot(page, f"folds-decode-boxes-{lang}-390")
    page.close()
    assert errors == []
    page, errors = open_page(server, "/decode?max_len=6", WIDE, lang)
    assert all(is_open(page, f"{box} > details") for box in BOXES)
    assert page.locator(".seven-hint").is_hidden()
    page.close()
    assert errors == []


@pytest.mark.parametrize("legacy", [False, True], ids=["chromium", "display-none"])
def test_a_decoder_part_folded_on_a_phone_draws_to_its_width_when_opened(open_page, server, legacy):
    page, errors = open_page(server, "/decode?max_len=6", PHONE, legacy=legacy)
    assert page.locator("#box-ffn [data-waiting=fold]").count() == 2  # #fig-ffn, #fig-ffn_output
    assert page.locator("#box-ffn .main-svg").count() == 0
    page.locator("#box-ffn > details > summary").click()
    page.wait_for_function(FITS, arg="#fig-ffn")
    page.wait_for_function(FITS, arg="#fig-ffn_output")
    refits_when_shown_again(page, "#box-ffn > details", "#fig-ffn", PHONE)
    page.close()
    assert errors == []
