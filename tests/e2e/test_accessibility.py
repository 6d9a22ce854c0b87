"""Every page passes axe-core (the accessibility engine, bundled in axe-playwright-python: nothing
is fetched), with the name-contains-visible-text rule on, in English and Chinese, at 1440 px and
on a 390 px phone; the x-ray also with a guided chapter and an opened block, on the shipped model."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from axe_playwright_python.sync_playwright import Axe

from tests.e2e.conftest import wait_idle

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


def sweep(browser, server, paths, lang, width, height, ready) -> dict:
    context = browser.new_context(viewport={"width": width, "height": height}, locale="en-US")
    page = context.new_page()
    page.goto(f"{server}/lang/{lang}?next=/tour")
    failed = {}
    for path in paths:
        page.goto(f"{server}{path}")
        ready(page)
        found = violations(page)
        if found:
            failed[path] = found
    context.close()
    return failed


@pytest.mark.parametrize(("lang", "width", "height"), SIZES)
def test_every_page_passes_axe(browser, server, lang, width, height):
    assert sweep(browser, server, PAGES, lang, width, height, wait_idle) == {}


@pytest.mark.parametrize(("lang", "width", "height"), SIZES)
def test_the_xray_passes_axe_landing_zoomed_and_in_a_chapter(browser, shipped_server, lang, width, height):
    def ready(page):
        page.locator("body[data-xray=ready]").wait_for()
        wait_idle(page)

    text = "&text=" + quote("The children were playing football in the park when it started to rain.")
    paths = [path + ("&" if "?" in path else "?") + text[1:] for path in XRAY]
    assert sweep(browser, shipped_server, paths, lang, width, height, ready) == {}
