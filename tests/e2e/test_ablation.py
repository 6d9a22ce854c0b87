"""/ablation and the importance grid on /attention in headless Chromium against a real server on the
tiny checkpoint (and one check on the tiny Hugging Face Marian model): switching a cross-attention
head off shows the changed or unchanged translation with its numbers, the state lives in the URL,
bad parts are answered 422 with the rule named; screenshots in both languages at 1440 and 390 px."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from model.explain.ablation import MAX_PARTS
from tests.e2e.conftest import shot, wait_idle

pytestmark = pytest.mark.e2e
TEXT = "He gave her a flower because she was sad."
NUMBER = re.compile(r"★?[−+]?\d+\.\d\d$")


def query(page) -> dict:
    return parse_qs(urlsplit(page.url).query)


def grid_values(page) -> list[str]:
    return page.locator(".importance-grid .head-switch .value").all_text_contents()


def test_the_importance_grid_is_drawn_beside_the_heatmaps(page, server):
    page.goto(f"{server}/attention?text={quote(TEXT)}")
    wait_idle(page)
    values = grid_values(page)
    assert len(values) == 4 * (2 + 2 + 2) and all(NUMBER.match(v) for v in values), values
    assert sum(v.startswith("★") for v in values) == 3
    # a cell opens that head's pattern, and the page's link switches it off on /ablation
    page.locator('.importance-grid .head-switch[data-part="cross.2.3"]').click()
    wait_idle(page)
    assert query(page)["kind"] == ["cross"] and query(page)["layer"] == ["1"]
    assert query(page)["head"] == ["2"]
    assert "Cross-attention" in page.locator("#enlarged-label").text_content()
    pressed = page.locator('.importance-grid .head-switch[aria-pressed="true"]')
    assert pressed.count() == 1 and pressed.get_attribute("data-part") == "cross.2.3"
    link = page.locator("#ablate-link").get_attribute("href")
    assert parse_qs(urlsplit(link).query)["off"] == ["cross.2.3"]
    page.locator("#ablate-link").click()
    wait_idle(page)
    assert urlsplit(page.url).path == "/ablation"
    assert page.locator('.head-switch[data-part="cross.2.3"]').get_attribute("aria-pressed") == "true"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_switching_a_cross_attention_head_off(page, server, lang):
    page.context.add_cookies([{"name": "lang", "value": lang, "url": server}])
    page.goto(f"{server}/ablation?text={quote(TEXT)}")
    wait_idle(page)
    assert all(NUMBER.match(v) for v in grid_values(page))
    nothing = page.locator("#off-list").text_content()
    original = page.locator("#original-translation").text_content()
    assert original.strip()

    page.locator('.head-switch[data-part="cross.1.2"]').click()
    wait_idle(page)
    assert query(page)["off"] == ["cross.1.2"]
    assert page.locator('.head-switch[data-part="cross.1.2"]').get_attribute("aria-pressed") == "true"
    verdict = page.locator("#verdict").text_content()
    if lang == "en":
        assert "same translation" in verdict or "part at token" in verdict, verdict
    else:
        assert "译文没有变" in verdict or "开始不同" in verdict, verdict
    numbers = [float(n) for n in re.findall(r"-?\d+\.\d{3}", page.locator("#log-prob").text_content())]
    with_all, without, delta = numbers  # log p with every part, with the part off, and |Δ|
    assert abs(abs(without - with_all) - delta) < 2e-3
    assert page.locator("#step-figure .main-svg").count() > 0
    assert page.locator("#new-chars li").count() > 0
    assert page.locator("#ablated-translation").text_content().strip()
    assert page.locator("#off-list .chip-off").count() == 1
    assert page.locator("#word-order #order-table tbody tr").count() == 4
    shot(page, f"ablation-{lang}-1440")

    # a second part, the mean mode, then phones
    page.locator('.sublayer-switch[data-part="enc.1"]').click()
    page.locator('input[name="mode"][value="mean"]').check()
    wait_idle(page)
    assert query(page)["off"] == ["cross.1.2,enc.1"] and query(page)["mode"] == ["mean"]
    assert page.locator('.head-switch[data-part="enc.1.3"]').evaluate("b => b.classList.contains('covered')")
    page.set_viewport_size({"width": 390, "height": 844})
    wait_idle(page)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, width
    shot(page, f"ablation-{lang}-390")

    # reset: everything back on, the URL says so
    page.locator("#reset").click()
    wait_idle(page)
    assert "off" not in query(page)
    assert page.locator("#off-list").text_content() == nothing


def test_the_url_restores_the_state_and_history_steps_back(page, server):
    page.goto(f"{server}/ablation?text={quote(TEXT)}&off=pos.enc,decffn.2&step=1&shuffle=3")
    wait_idle(page)
    assert page.locator('[data-part="pos.enc"]').get_attribute("aria-pressed") == "true"
    assert page.locator('[data-part="decffn.2"]').get_attribute("aria-pressed") == "true"
    assert page.locator("#step-select").input_value() == "1"
    page.locator('.head-switch[data-part="dec.2.1"]').click()
    wait_idle(page)
    page.go_back()
    wait_idle(page)
    assert query(page)["off"] == ["pos.enc,decffn.2"]
    assert page.locator('.head-switch[data-part="dec.2.1"]').get_attribute("aria-pressed") == "false"


def test_bad_parts_are_422_with_the_rule_named(page, server):
    page.goto(f"{server}/ablation?text={quote(TEXT)}&off=cross.9.1")
    wait_idle(page)
    error = page.locator("#error")
    assert error.is_visible() and "the decoder has layers 1 to 2" in error.text_content()
    assert page.watch.errors and all("422" in e for e in page.watch.errors)
    page.watch.errors.clear()  # the browser logs the 422 response itself
    for off, words in ((["enc.1.7"], "heads 1 to 4"), (["enc.1"] * (MAX_PARTS + 1),
                                                         f"at most {MAX_PARTS} parts")):
        answer = page.request.post(f"{server}/api/ablation", data={"text": TEXT, "off": off})
        assert answer.status == 422 and words in answer.json()["message"]


def test_the_page_works_on_a_marian_model(page, marian_server):
    """The tiny Marian model: 2 + 2 layers of 2 heads, every number from it."""
    page.goto(f"{marian_server}/ablation?text={quote(TEXT)}&off=cross.2.1")
    wait_idle(page)
    assert page.locator("#error").is_hidden(), page.locator("#error").text_content()
    assert len(grid_values(page)) == 2 * (2 + 2 + 2)
    assert all(NUMBER.match(v) for v in grid_values(page))
    assert page.locator("#step-figure .main-svg").count() > 0
    assert "Marian" in page.locator("#model-line").text_content()
    shot(page, "ablation-marian")
