"""Long pages on a phone (issue 56, item 9): each page folds its secondary sections on a 390 px
screen (open on a wide one), so none runs more than about four screens before its first fold;
wide tables of a few rows become stacked cards with their column's heading on every value."""

from __future__ import annotations

import pytest

from tests.conftest import warm_page
from tests.e2e.conftest import BATCH_CELLS

pytestmark = pytest.mark.e2e

# page → its sections that fold on a phone only
PHONE_FOLDS = {
    "/pipeline": ["#recurrence"],
    "/tokens": ["#masks"],
    "/attention": ["#importance", "#detail"],
    "/ablation": ["#word-order"],
    "/timeline": ["#curve-card", "#honest"],
}
SCREEN = 844


@pytest.fixture()
def server(shipped_server):
    """The shipped model: its real translations give the pages their real heights."""
    return shipped_server


def first_fold(page) -> float:
    """The page y of the first closed fold, else the page's height."""
    return page.evaluate("""() => {
      const folds = [...document.querySelectorAll('main details.fold')].filter((d) => !d.open);
      const tops = folds.map((d) => d.getBoundingClientRect().top + scrollY);
      return tops.length ? Math.min(...tops) : document.documentElement.scrollHeight;
    }""")


@pytest.mark.parametrize("path", sorted(PHONE_FOLDS))
def test_a_phone_folds_the_secondary_sections_a_wide_screen_shows(warm_context, server, path):
    for width, height, folded in ((390, SCREEN, True), (1440, 900, False)):
        page = warm_page(warm_context, width, height)
        page.goto(f"{server}{path}")
        page.wait_for_load_state("networkidle")
        for selector in PHONE_FOLDS[path]:
            is_open = page.locator(selector).evaluate("d => d.open")
            assert is_open is (not folded), (path, width, selector)
        if folded:
            assert first_fold(page) <= 4.5 * SCREEN, (path, first_fold(page))
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            # its heading still opens it
            page.locator(f"{PHONE_FOLDS[path][0]} > summary").click()
            assert page.locator(PHONE_FOLDS[path][0]).evaluate("d => d.open")
        page.close()


def test_a_link_into_a_folded_section_opens_it_on_a_phone(warm_context, server):
    page = warm_page(warm_context, 390, SCREEN)
    page.goto(f"{server}/timeline#honest")
    page.wait_for_load_state("networkidle")
    assert page.locator("#honest").evaluate("d => d.open")
    assert not page.locator("#curve-card").evaluate("d => d.open")
    page.close()


def test_stacked_tables_label_every_value(warm_context, server):
    """Whatever a page stacks on a phone, every value says its column, and nothing scrolls
    sideways but the charts too wide to shrink (/tokens' batch, each cell a piece and its id)."""
    page = warm_page(warm_context, 390, SCREEN)
    stacked = 0
    for path in ("/tokens", "/training", "/scale", "/coreference", "/ablation", "/timeline"):
        page.goto(f"{server}{path}")
        page.wait_for_load_state("networkidle")
        unlabelled = page.locator("table.stack-on-phone td:not([data-label])").count()
        assert unlabelled == 0, path
        stacked += page.locator("table.stack-on-phone").count()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, path
        if path == "/tokens":  # the batch's cells keep their width: the charts scroll instead
            for chart in page.evaluate(BATCH_CELLS):
                assert chart["column"] >= 44 and chart["scrolls"] and chart["focusable"], chart
    page.close()
    # on a wide screen nothing is stacked
    page = warm_page(warm_context, 1440, 900)
    page.goto(f"{server}/training")
    page.wait_for_load_state("networkidle")
    assert page.locator("table.stack-on-phone").count() == 0
    page.close()
    assert stacked >= 1  # the training page's short wide tables are cards on a phone
