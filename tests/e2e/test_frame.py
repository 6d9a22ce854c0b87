"""The frame every page shares (static/js/layout.js): the phone's menu button, and the "on this
page" list that opens a long page."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import shot, wait_idle


def test_on_a_phone_the_pages_fold_behind_a_menu_button(phone, server):
    phone.goto(f"{server}/attention")
    wait_idle(phone)
    nav, button = phone.locator("#site-nav"), phone.locator("#menu-toggle")
    assert nav.is_hidden() and button.is_visible()
    assert button.get_attribute("aria-expanded") == "false"
    # the whole header is one short line: the page starts on the first screen
    assert phone.locator("header.site").bounding_box()["height"] < 70
    button.click()
    assert nav.is_visible() and button.get_attribute("aria-expanded") == "true"
    assert nav.locator('a[href="/decode"]').is_visible()
    shot(phone, "menu-open-390")
    phone.keyboard.press("Escape")
    assert nav.is_hidden() and button.get_attribute("aria-expanded") == "false"
    button.click()
    nav.locator('a[href="/decode"]').click()
    phone.wait_for_url("**/decode**")
    wait_idle(phone)
    assert phone.locator("#site-nav").is_hidden()


def test_on_a_wide_screen_the_pages_are_listed_and_the_button_is_gone(page, server):
    page.goto(f"{server}/tokens")
    wait_idle(page)
    assert page.locator("#menu-toggle").is_hidden()
    assert page.locator("#site-nav a").count() >= 13
    assert page.locator("#site-nav").is_visible()


def test_a_long_page_lists_its_sections_and_each_link_reaches_one(page, server):
    page.goto(f"{server}/training")
    wait_idle(page)
    toc = page.locator("#toc")
    assert toc.is_visible()
    links = toc.locator("a")
    # sections, folded ones too (their heading is in the <summary>)
    headings = page.locator("#main > section.card:not([hidden]) > h2[id], "
                            "#main > details.card:not([hidden]) > summary > h2[id]")
    assert links.count() == headings.count() >= 5
    assert links.all_text_contents() == [h.strip() for h in headings.all_text_contents()]
    # below the title and the introduction, above the first section
    assert page.locator("p.lead").bounding_box()["y"] < toc.bounding_box()["y"]
    last = links.nth(links.count() - 1)
    target = last.get_attribute("href")
    last.click()
    page.wait_for_url(f"**{target}")
    box = page.locator(target).bounding_box()
    assert 0 <= box["y"] < page.viewport_size["height"]


def test_sections_that_appear_later_join_the_list(page, server):
    page.goto(f"{server}/decode?text=The+cat+sits+on+the+mat.&max_len=6")
    wait_idle(page)
    links = page.locator("#toc a")
    assert page.locator("#beam").is_hidden()
    assert "#beam-title" not in [links.nth(i).get_attribute("href") for i in range(links.count())]
    page.goto(f"{server}/decode?text=The+cat+sits+on+the+mat.&max_len=6&strategy=beam&beam_size=2")
    wait_idle(page)
    assert page.locator("#beam").is_visible()
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert hrefs[0] == "#beam-title", hrefs


def test_short_pages_have_no_list(page, server):
    page.goto(f"{server}/tokens")
    wait_idle(page)
    assert page.locator("#toc").count() == 0


@pytest.mark.parametrize("path", ["/", "/decode"])
def test_keyboard_hints_are_for_keyboards_only(browser, server, path):
    for touch, shown in [(False, True), (True, False)]:
        context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=touch,
                                      is_mobile=touch, locale="en-US")
        page = context.new_page()
        page.goto(f"{server}{path}?text=The+cat+sits+on+the+mat.&max_len=6")
        hints = page.locator(".keys-hint")
        assert hints.count() == 1
        assert hints.first.is_visible() is shown, (path, touch)
        # the always-shown introduction no longer names keys, nor a side a phone does not have
        lead = page.locator("p.lead").first.text_content()
        assert "←" not in lead.replace(hints.first.text_content(), "")
        assert "(left)" not in lead
        context.close()
