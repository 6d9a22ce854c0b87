"""Readable on a phone and a wide screen (issue 75, item 8): no text under 12 CSS px on any page,
in English and Chinese, at 1440×900 and 390×844 — the page's own text and the SVG text of its
Plotly charts (tick labels, annotations, legends) alike, every fold opened, on the shipped model.

/decode and the x-ray (/) are measured by their own tests (their owners' areas), so the walk
below leaves them out of the nav's list."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from app.i18n import strings
from app.layout import NAV
from tests.conftest import track_requests, warm_page
from tests.e2e.conftest import shot, wait_idle
from tests.waiting import PATIENCE_S

pytestmark = pytest.mark.e2e

ELSEWHERE = {"/", "/decode"}
PAGES = [path for path, _ in NAV if path not in ELSEWHERE]
SIZES = [("en", 1440, 900), ("zh", 1440, 900), ("en", 390, 844), ("zh", 390, 844)]
SMALLEST_PX = 12
# a sentence of this test's own, longer than the examples, with a pronoun (so /coreference draws
# its charts): the pages that read a sentence are walked with it as well as with their default
SENTENCE = "The old teacher told the boy that he should read more books."
TEXT_PAGES = ["/pipeline", "/tokens", "/embeddings", "/attention", "/coreference", "/ablation",
              "/kv-cache", "/timeline"]

# Every visible text node's rendered size: an HTML text's computed font-size, an SVG text's
# font-size times its element's scale on screen (a chart drawn smaller than its own size shrinks
# its text too). Hidden text (display:none, a closed fold, a screen-reader-only label clipped to
# 1 px) does not count; what a fold holds counts once the test has opened it.
SMALL_TEXT = """(smallest) => {
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent.trim();
    const element = node.parentElement;
    if (!text || !element || element.closest('script, style, noscript, title')) continue;
    if (!element.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true })) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const box = range.getBoundingClientRect();
    if (box.width < 2 || box.height < 2) continue;  // clipped away (.visually-hidden)
    let size = parseFloat(getComputedStyle(element).fontSize);
    if (element instanceof SVGElement) {
      const ctm = element.getScreenCTM();
      if (ctm) size *= Math.hypot(ctm.a, ctm.b);
    }
    if (size < smallest - 0.05) {
      const where = element.closest('[id]');
      const name = `${element.tagName.toLowerCase()}.${element.getAttribute('class') || ''}`;
      const px = Math.round(size * 10) / 10;
      found.push(`${px}px ${name} in #${where ? where.id : '?'}: ${text.slice(0, 30)}`);
    }
  }
  return found;
}"""


@pytest.fixture()
def server(shipped_server):
    """The shipped model: its real sentences give the charts their real labels."""
    return shipped_server


@pytest.fixture(scope="module")
def sized_pages(browser):
    """One page per server, language and viewport, reused by the pages of that size."""
    pages = {}

    def sized_page(server, lang, width, height):
        key = (server, lang, width, height)
        if key not in pages:
            context = browser.new_context(viewport={"width": width, "height": height}, locale="en-US")
            context.add_cookies([{"name": "lang", "value": lang, "url": server}])
            pages[key] = context.new_page()
            pages[key].in_flight = track_requests(pages[key])
            pages[key].set_default_timeout(PATIENCE_S * 1000)
        return pages[key]

    yield sized_page
    for page in pages.values():
        page.context.close()


def open_every_fold(page) -> None:
    """Open each closed fold as a reader does (its summary), and wait for what it draws."""
    for summary in page.locator("main details:not([open]) > summary").all():
        if summary.is_visible():
            summary.click()
    wait_idle(page)


WALK = [(path, None) for path in PAGES] + [(path, SENTENCE) for path in TEXT_PAGES]


@pytest.mark.parametrize(("lang", "width", "height"), SIZES)
@pytest.mark.parametrize(("path", "text"), WALK)
def test_no_text_under_12_px(sized_pages, server, path, text, lang, width, height):
    page = sized_pages(server, lang, width, height)
    page.goto(f"{server}{path}" + (f"?text={quote(text)}" if text else ""))
    wait_idle(page)
    open_every_fold(page)
    small = page.evaluate(SMALL_TEXT, SMALLEST_PX)
    if small:
        shot(page, f"small-text-{path.strip('/')}-{lang}-{width}")
    assert small == [], f"{path} {lang} {width}px: {len(small)} texts under {SMALLEST_PX} px: {small[:12]}"


def test_the_walk_covers_the_nav():
    """Every nav page but the two measured elsewhere is walked, the docs and the tour included."""
    assert set(PAGES) | ELSEWHERE == {path for path, _ in NAV}
    assert len(PAGES) >= 11 and set(TEXT_PAGES) <= set(PAGES)


IN_VIEW = """(id) => {
  const box = document.getElementById(id).getBoundingClientRect();
  return { top: box.top, bottom: box.bottom, screen: innerHeight, scrolled: scrollY };
}"""


def tap_and_look(page, button, head: str, name: str) -> None:
    """Tap ``button`` (a head) from where it sits, the enlarged chart below the screen, and check
    that the chart, redrawn for that head, is then wholly on the screen."""
    button.scroll_into_view_if_needed()
    label = page.locator("#enlarged-label")
    before = label.text_content()
    assert page.evaluate(IN_VIEW, "enlarged")["top"] > 844, "the chart was on screen already"
    button.click()
    label.filter(has_not_text=before).wait_for()
    wait_idle(page)
    view = page.evaluate(IN_VIEW, "enlarged")
    assert view["top"] >= 0 and view["bottom"] <= view["screen"], view
    assert head in label.text_content()
    shot(page, name)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_tapping_a_head_on_a_phone_brings_its_chart_into_view(warm_context, server, lang):
    """On a phone the enlarged head sits below every grid: tapping a head in a grid, or in the
    importance table, scrolls the chart it redrew onto the screen; on a wide screen (the chart
    sticky beside the grids) a tap leaves the page where it was."""
    page = warm_page(warm_context, 390, 844, lang=lang, server=server)
    page.goto(f"{server}/attention?text={quote(SENTENCE)}")
    wait_idle(page)
    tap_and_look(page, page.locator('.head-cell[data-kind="cross"][data-layer="1"][data-head="2"]'), "3",
                 f"attention-tapped-grid-{lang}")
    page.evaluate("window.scrollTo(0, 0)")
    open_every_fold(page)
    tap_and_look(page, page.locator('.importance-grid .head-switch[data-part="enc.1.4"]'), "4",
                 f"attention-tapped-importance-{lang}")
    page.close()

    wide = warm_page(warm_context, 1440, 900, lang=lang, server=server)
    wide.goto(f"{server}/attention")
    wait_idle(wide)
    cell = wide.locator('.head-cell[data-kind="cross"][data-layer="1"][data-head="3"]')
    cell.scroll_into_view_if_needed()
    scrolled = wide.evaluate("scrollY")
    cell.click()
    wide.locator("#enlarged-label").filter(has_text="4").wait_for()
    wait_idle(wide)
    assert wide.evaluate("scrollY") == scrolled
    view = wide.evaluate(IN_VIEW, "enlarged")
    assert view["top"] >= 0 and view["bottom"] <= view["screen"], view
    wide.close()


# In the reference form and the two cards that need a reference: any visible HTML element drawn in
# a red (text, border or outline), and any visible table with no rows or chart with no drawing.
ALARMS = """() => {
  const red = (colour) => {
    const m = colour.match(/rgba?\\((\\d+), (\\d+), (\\d+)(?:, ([\\d.]+))?\\)/);
    return m && (m[4] === undefined || Number(m[4]) > 0) && +m[1] > 170 && +m[2] < 120 && +m[3] < 90;
  };
  const out = [];
  for (const box of document.querySelectorAll('#reference-form, #shift-title, #teacher-title')) {
    const scope = box.closest('form, section');
    for (const el of [scope, ...scope.querySelectorAll('*')]) {
      if (el instanceof SVGElement || !el.checkVisibility()) continue;
      const style = getComputedStyle(el);
      const colours = [style.color, style.borderTopColor, style.borderLeftColor];
      if (style.outlineStyle !== 'none') colours.push(style.outlineColor);
      if (colours.some(red)) out.push(`red ${el.tagName} #${el.id}`);
      if (el.tagName === 'TABLE' && !el.querySelector('tr')) out.push(`empty table #${el.id}`);
      if (el.classList.contains('plot') && !el.querySelector('svg')) out.push(`empty chart #${el.id}`);
    }
  }
  return out;
}"""


@pytest.mark.parametrize(("lang", "width", "height"), SIZES)
def test_training_without_a_reference_is_a_calm_explained_state(warm_context, server, lang, width, height):
    """A sentence with no human translation: no red, no empty table or chart; each card that needs a
    reference says so in the page's language, and a typed reference fills them in."""
    page = warm_page(warm_context, width, height, lang=lang, server=server)
    page.goto(f"{server}/training?text={quote(SENTENCE)}")
    wait_idle(page)
    assert page.locator("#reference").input_value() == ""
    # (no focus ring unasked: ALARMS finds the focused field's vermilion outline)
    assert page.evaluate(ALARMS) == []
    notes = page.locator(".needs-reference-note")
    assert notes.count() == 2
    wanted = strings(lang, "training")["training.needs_reference"]
    for index in range(2):
        assert notes.nth(index).is_visible() and notes.nth(index).text_content().strip() == wanted
    shot(page, f"training-no-reference-{lang}-{width}")

    page.locator("#reference").fill("老师告诉男孩他应该多读书。")
    page.locator("#score-button").click()
    page.locator("#teacher-table tbody tr").first.wait_for()
    wait_idle(page)
    assert notes.first.is_hidden() and notes.nth(1).is_hidden()
    assert page.locator("#shift-table tbody tr").count() == 4
    assert page.locator("#score-figure svg").count() > 0
    assert page.evaluate(ALARMS) == []
    page.close()
