"""A chart's title is drawn as an HTML caption above it (common.js ``fitted``): it reads the tokens as
written ("<bos>"), not the escapes Plotly's title needed ("&lt;bos&gt;")."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import wait_idle

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_chart_captions_read_special_tokens_as_written(page, server, lang):
    page.goto(f"{server}/lang/{lang}?next=/tokens")
    wait_idle(page)
    captions = page.locator(".plot-title:not([hidden])").all_text_contents()
    assert captions, "no chart caption on /tokens"
    assert not [c for c in captions if "&lt;" in c or "&gt;" in c or "&amp;" in c], captions
    assert any("<bos>" in c for c in captions), captions
