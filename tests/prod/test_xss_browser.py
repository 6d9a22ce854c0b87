"""Markup and script payloads through every page's inputs and URL never execute (headless Chromium).

Each page is opened on a real server with payloads in ``?text=`` and in every other URL setting,
and every text field on the page is filled with payloads and submitted. Afterwards nothing may have
run (``window.__pwned`` unset, no dialog), nothing may have been injected into the DOM (no element
with an on* handler, no blocked inline script), and the sentence box shows the payload literally.
"""

from __future__ import annotations

import pytest

from app.main import create_app
from app.schemas import MAX_TEXT_CHARS
from app.settings import Settings
from tests.conftest import warm_page
from tests.e2e.conftest import settle
from tests.prod.test_security import html_pages
from tests.waiting import PATIENCE_S

pytestmark = pytest.mark.e2e

PAYLOADS = [
    '<img src=x onerror=window.__pwned=1><script>window.__pwned=1</script>"><svg onload=window.__pwned=1>',
    "'><iframe src=javascript:window.top.__pwned=1></iframe><img src=x onerror=alert(1)> the cat",
    "</textarea><details open ontoggle=window.__pwned=1><a href=javascript:alert(1)>x</a> ${alert(1)}",
]
# All three in one text (289 characters, within the 600 a sentence may have): each breaks out of a
# different context (a double-quoted attribute, a single-quoted one, a textarea), so one load or
# one submission tries every way out at once; three loads per box cost a third of the sweep's time.
PAYLOAD = " ".join(PAYLOADS)
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


# every page, known without a model (the routes are the same whatever the checkpoint)
PAGES = html_pages(create_app(Settings(access_log=False)))
FIELDS = "input:is([type=text], [type=search], :not([type])):visible, textarea:visible"


def check(page, dialogs: list[str], where: str) -> None:
    state = page.evaluate(INJECTED)
    assert not dialogs, f"{where}: a dialog opened: {dialogs}"
    assert not state["pwned"], f"{where}: a payload ran"
    assert not state["handlers"], f"{where}: injected handlers {state['handlers']}"
    assert state["inlineScripts"] == 0 and state["frames"] == 0, f"{where}: injected elements {state}"
    assert not state["violations"], f"{where}: blocked scripts {state['violations']}"


def test_the_sweep_reaches_every_page():
    assert len(PAGES) >= 3 and "/" in PAGES and "/tokens" in PAGES, PAGES
    assert len(PAYLOAD) <= MAX_TEXT_CHARS and all(p in PAYLOAD for p in PAYLOADS)


@pytest.mark.parametrize("path", PAGES)
def test_payloads_never_execute(warm_context, live_server, path):
    """In the worker's warm Chromium (tests/conftest.py), every payload on one page: a test per
    page, so that pytest-xdist can spread the pages over its workers."""
    page = warm_page(warm_context)
    page.add_init_script(WATCH)
    # a page's load may wait on a server busy with another worker's tests (an /ablation load took
    # over 30 s, Playwright's default, beside a training run): the patience of every other wait
    page.set_default_timeout(PATIENCE_S * 1000)
    in_flight = page.in_flight  # warm_page tracks its requests
    dialogs: list[str] = []

    def on_dialog(dialog):
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    base_url = live_server.url
    fields_tested = 0
    try:
        page.goto(base_url + path + "?" + _query({"text": PAYLOAD}))
        settle(page, in_flight)
        check(page, dialogs, f"{path}?text=")
        box = page.locator("#text")
        if box.count():
            assert box.first.input_value() == PAYLOAD, f"{path}: the text is not shown literally"

        page.goto(base_url + path + "?" + _query({name: PAYLOADS[0][:100] for name in SETTINGS}))
        settle(page, in_flight)
        check(page, dialogs, f"{path} with every URL setting")

        page.goto(base_url + path)
        settle(page, in_flight)
        has_text_box = page.locator("#text").count() > 0
        for index in range(page.locator(FIELDS).count()):
            field = page.locator(FIELDS).nth(index)
            if not field.count() or not field.is_editable():
                continue
            # a box shorter than the joined text keeps only its start: it gets each payload alone
            fits = field.evaluate("(box, n) => box.maxLength < 0 || box.maxLength >= n", len(PAYLOAD))
            for payload in [PAYLOAD] if fits else PAYLOADS:
                field = page.locator(FIELDS).nth(index)
                if not field.count() or not field.is_editable():
                    break
                field.fill(payload)
                field.press("Enter")
                fields_tested += 1
                settle(page, in_flight)
                check(page, dialogs, f"{path} field {index}")
    finally:
        page.close()
    if has_text_box:  # a page with a sentence box has at least that field to type payloads into
        assert fields_tested >= 1, (path, fields_tested)


def _query(values: dict[str, str]) -> str:
    from urllib.parse import urlencode

    return urlencode(values)
