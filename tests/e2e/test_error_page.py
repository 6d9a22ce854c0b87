"""The error page a reader sees for a wrong address (issue 59, item 5) runs the site's scripts
without an error, under the strict Content-Security-Policy, in both languages."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("lang", ["en-US", "zh-CN"])
@pytest.mark.parametrize(("path", "status"), [("/nope", 404), ("/tour?step=12345", 422)])
def test_the_error_page_works_in_the_browser(browser, server, path, status, lang):
    context = browser.new_context(locale=lang)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error"
            and "status of " + str(status) not in m.text else None)  # the page's own status
    response = page.goto(server + path)
    assert response.status == status
    heading = page.locator("#error-title")
    assert heading.inner_text() == ("错误 " if lang == "zh-CN" else "Error ") + str(status)
    page.get_by_role("link", name="回到透视页" if lang == "zh-CN" else "Go to the x-ray").click()
    page.wait_for_url(server + "/")
    context.close()
    assert errors == []


def test_a_sentence_with_combining_marks_is_drawn(page, server):
    """/?text=A%CC%80 ("A" + a combining grave accent) is an x-ray, not "Something went wrong"
    (issue 59, item 1)."""
    page.goto(server + "/?text=A%CC%80&max_len=4")
    page.locator("body[data-xray=ready]").wait_for()
    assert page.locator("#error").is_hidden()
    assert page.locator('.xr-row[data-key="enc-tokens"] .xr-token').count() >= 1
