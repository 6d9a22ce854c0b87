"""/decode's "why this character?" panel in headless Chromium: the logit lens and the attributions
are drawn for the step shown, follow the stepper, and live in the URL."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.e2e.conftest import shot
from tests.e2e.test_browser import wait_idle

pytestmark = pytest.mark.e2e
SENTENCE = "The dog runs in the park."


def labels(page, figure: str, axis: str) -> list[str]:
    """An axis's tick labels as drawn (Plotly also keeps empty placeholder ticks)."""
    ticks = page.locator(f"{figure} .{axis}axislayer-above .{axis}tick").all_text_contents()
    return [tick for tick in ticks if tick]


def test_open_the_why_panel_and_step_through(page, server):
    page.goto(f"{server}/decode?text={SENTENCE}&max_len=6")
    wait_idle(page)
    assert page.locator("#why[open]").count() == 0
    assert page.locator("#fig-lens .main-svg").count() == 0  # nothing computed while closed
    page.locator("#fig-softmax .main-svg").first.wait_for(state="attached")  # the layout stops moving
    assert page.locator("#fig-residual[data-waiting]").count() == 1  # folded: drawn when opened
    page.locator("#why summary").click()
    page.wait_for_url(re.compile(r"[?&]why=1"))  # the toggle event is dispatched asynchronously
    wait_idle(page)
    assert parse_qs(urlsplit(page.url).query)["why"] == ["1"]
    for figure in ("#fig-lens", "#fig-attribution", "#fig-lens-steps"):
        assert page.locator(f"{figure} .main-svg").count() > 0, figure
    assert labels(page, "#fig-lens", "y") == ["Layer 1", "Layer 2"]  # one row per decoder layer
    assert sorted(labels(page, "#fig-attribution", "y")) == [  # both methods and each layer's attention
        "cross-attention · Layer 1", "cross-attention · Layer 2", "gradient × input",
        "integrated gradients"]
    assert "integrated gradients" in page.locator("#fig-attribution").text_content()
    # greedy: the last layer's top is the choice, so some layer ranks it first
    assert re.search(r"top candidate at layer [12] of 2\.$", page.locator("#lens-note").text_content())
    assert "add up to" in page.locator("#complete-note").text_content()
    assert "attention is not explanation" in page.locator("#why-disagree").text_content()

    first = labels(page, "#fig-lens", "x")[0]
    assert first.endswith(" ✓") and first.split(" ")[0] in page.locator("#chosen").text_content()
    page.locator("h1").click()
    page.keyboard.press("ArrowRight")  # the panel follows the step
    wait_idle(page)
    chosen = page.locator("#chosen").text_content()
    assert labels(page, "#fig-lens", "x")[0].split(" ")[0] in chosen
    assert "step=1" in page.url
    shot(page, "decode-why")

    page.fill("#ig-steps", "8")
    page.press("#ig-steps", "Tab")  # leaving the field commits it
    wait_idle(page)
    assert parse_qs(urlsplit(page.url).query)["ig_steps"] == ["8"]
    assert "8 steps" in page.locator("#complete-note").text_content()


def test_the_panel_opens_from_the_url_in_chinese(page, server):
    page.context.add_cookies([{"name": "lang", "value": "zh", "url": server}])
    page.goto(f"{server}/decode?text={SENTENCE}&max_len=4&why=1&step=1&ig_steps=4")
    wait_idle(page)
    assert page.locator("#why[open]").count() == 1
    assert page.locator("#fig-attribution .main-svg").count() > 0
    assert "积分梯度" in page.locator("#fig-attribution").text_content()
    assert page.locator("#step-title").text_content().startswith("第 2 /")
