"""Markup and script payloads through every page's inputs and URL never execute (headless Chromium).

Each page is opened on a real server with payloads in ``?text=`` and in every other URL setting,
and every text field on the page is filled with payloads and submitted. Afterwards nothing may have
run (``window.__pwned`` unset, no dialog), nothing may have been injected into the DOM (no element
with an on* handler, no blocked inline script), and the sentence box shows the payload literally.
"""

from __future__ import annotations

import pytest

from app.main import create_app
from app.settings import Settings
from tests.prod.test_security import html_pages

pytestmark = pytest.mark.e2e

PAYLOADS = [
    '<img src=x onerror=window.__pwned=1><script>window.__pwned=1</script>"><svg onload=window.__pwned=1>',
    "'><iframe src=javascript:window.top.__pwned=1></iframe><img src=x onerror=alert(1)> the cat",
    "</textarea><details open ontoggle=window.__pwned=1><a href=javascript:alert(1)>x</a> ${alert(1)}",
]
# URL settings the pages read besides ?text= (see static/js/common.js)
SETTINGS = ["strategy", "temperature", "top_k", "top_p", "beam_size", "max_len", "seed", "forced",
            "layer", "head", "kind", "step", "query", "lang"]
WATCH = """
window.__violations = [];
document.addEventListener('securitypolicyviolation',
    (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));
"""
INJECTED = """() => ({
    pwned: window.__pwned !== undefined || (window.top && window.top.__pwned !== undefined),
    handlers: [...document.querySelectorAll('*')].filter((el) =>
        [...el.attributes].some((a) => a.name.startsWith('on') ||
            /^\\s*javascript:/i.test(a.value) && ['href', 'src', 'action'].includes(a.name))
    ).map((el) => el.outerHTML.slice(0, 120)),
    inlineScripts: [...document.querySelectorAll('script:not([src])')]
        .filter((s) => s.type !== 'application/json').length,
    frames: document.querySelectorAll('iframe, details[ontoggle], svg[onload]').length,
    violations: window.__violations.filter((v) => v.startsWith('script')),
})"""


@pytest.fixture(scope="module")
def pages(tiny_checkpoint):
    return html_pages(create_app(Settings(checkpoint=tiny_checkpoint)))


def check(page, dialogs: list[str], where: str) -> None:
    state = page.evaluate(INJECTED)
    assert not dialogs, f"{where}: a dialog opened: {dialogs}"
    assert not state["pwned"], f"{where}: a payload ran"
    assert not state["handlers"], f"{where}: injected handlers {state['handlers']}"
    assert state["inlineScripts"] == 0 and state["frames"] == 0, f"{where}: injected elements {state}"
    assert not state["violations"], f"{where}: blocked scripts {state['violations']}"


def test_payloads_never_execute(browser, live_server, pages):
    """In the run's one Chromium (tests/conftest.py), every page, every payload."""
    payloads_in_every_page(browser, live_server.url, pages)


def payloads_in_every_page(browser, base_url: str, pages: list[str]) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_init_script(WATCH)
    page = context.new_page()
    dialogs: list[str] = []

    def on_dialog(dialog):
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    fields_tested = 0
    try:
        for path in pages:
            for payload in PAYLOADS:
                page.goto(base_url + path + "?" + _query({"text": payload}),
                          wait_until="networkidle")
                check(page, dialogs, f"{path}?text=")
                box = page.locator("#text")
                if box.count():
                    assert box.first.input_value() == payload, f"{path}: the text is not shown literally"

            page.goto(base_url + path + "?" + _query({name: PAYLOADS[0][:100] for name in SETTINGS}),
                      wait_until="networkidle")
            check(page, dialogs, f"{path} with every URL setting")

            page.goto(base_url + path, wait_until="networkidle")
            fields = page.locator(
                "input:is([type=text], [type=search], :not([type])):visible, textarea:visible")
            for index in range(fields.count()):
                for payload in PAYLOADS:
                    field = page.locator(
                        "input:is([type=text], [type=search], :not([type])):visible, textarea:visible"
                    ).nth(index)
                    if not field.count() or not field.is_editable():
                        break
                    field.fill(payload)
                    field.press("Enter")
                    fields_tested += 1
                    page.wait_for_load_state("networkidle")
                    check(page, dialogs, f"{path} field {index}")
    finally:
        context.close()
    assert len(pages) >= 3 and fields_tested >= len(PAYLOADS), (pages, fields_tested)


def _query(values: dict[str, str]) -> str:
    from urllib.parse import urlencode

    return urlencode(values)
