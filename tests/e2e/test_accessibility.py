"""Every page passes axe-core (the accessibility engine, bundled in axe-playwright-python: nothing
is fetched), with the name-contains-visible-text rule on, in English and Chinese, at 1440 px and
on a 390 px phone; the x-ray also with a guided chapter and an opened block, on the shipped model."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from axe_playwright_python.sync_playwright import Axe

from tests.conftest import track_requests
from tests.e2e.conftest import wait_idle
from tests.waiting import PATIENCE_S

pytestmark = pytest.mark.e2e

PAGES = ["/pipeline", "/tokens", "/embeddings", "/attention", "/coreference", "/ablation", "/decode",
         "/kv-cache", "/training", "/timeline", "/scale", "/tour"]
XRAY = ["/", "/?chapter=3", "/?zoom=d-0&frame=37&open=d-0-cross_attention", "/?chapter=11&strategy=beam"]
SIZES = [("en", 1440, 900), ("zh", 1440, 900), ("en", 390, 844), ("zh", 390, 844)]
AXE = Axe()
# WCAG 2.x A/AA and axe's best practices (its defaults), plus one experimental rule: a control's
# accessible name must contain the text it shows (WCAG 2.5.3, Label in Name), so a speech-input
# user who says what they see reaches it.
OPTIONS = {"resultTypes": ["violations"], "rules": {"label-content-name-mismatch": {"enabled": True}}}


def violations(page) -> list[tuple]:
    found = AXE.run(page, options=OPTIONS).response["violations"]
    return [(v["id"], v["impact"], [n["target"] for n in v["nodes"][:3]], len(v["nodes"])) for v in found]


@pytest.fixture(scope="module")
def sized_pages(browser):
    """One page per server, language and viewport, reused by every test of that size on this
    worker: its cache keeps plotly.js compiled, which a fresh context would load and compile again."""
    pages = {}

    def sized_page(server, lang, width, height):
        key = (server, lang, width, height)
        if key not in pages:
            context = browser.new_context(viewport={"width": width, "height": height}, locale="en-US")
            context.add_cookies([{"name": "lang", "value": lang, "url": server}])
            pages[key] = context.new_page()
            pages[key].in_flight = track_requests(pages[key])  # wait_idle: no fixed 500 ms
            # a load may wait on a server busy with another worker's burst (a /pipeline load once
            # took over 30 s beside tests/prod/test_nginx.py's): the patience of every other wait
            pages[key].set_default_timeout(PATIENCE_S * 1000)
        return pages[key]

    yield sized_page
    for page in pages.values():
        page.context.close()


# one test per page and size, so that pytest-xdist can spread them (tests/conftest.py's SPREAD)
@pytest.mark.parametrize(("lang", "width", "height"), SIZES)
@pytest.mark.parametrize("path", PAGES)
def test_every_page_passes_axe(sized_pages, server, path, lang, width, height):
    page = sized_pages(server, lang, width, height)
    page.goto(f"{server}{path}")
    wait_idle(page)
    assert violations(page) == []


@pytest.mark.parametrize(("lang", "width", "height"), SIZES)
@pytest.mark.parametrize("path", XRAY)
def test_the_xray_passes_axe_landing_zoomed_and_in_a_chapter(sized_pages, shipped_server, path, lang,
                                                             width, height):
    text = "text=" + quote("The children were playing football in the park when it started to rain.")
    page = sized_pages(shipped_server, lang, width, height)
    page.goto(shipped_server + path + ("&" if "?" in path else "?") + text)
    page.locator("body[data-xray=ready]").wait_for()
    wait_idle(page)
    assert violations(page) == []
