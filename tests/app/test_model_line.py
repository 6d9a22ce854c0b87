"""The footer's model line names the languages with the glossary's words (英文, not 英语) for our
model; the Marian line is checked in test_marian_app."""

import re


def test_the_model_line_uses_the_glossarys_name_for_english(app_client):
    app_client.cookies.clear()
    app_client.cookies.set("lang", "zh")
    try:
        html = app_client.get("/pipeline").text
    finally:
        app_client.cookies.clear()
    line = re.search(r'<p class="model-line"[^>]*>(.*?)</p>', html, re.S).group(1)
    assert "英文 → 中文" in line and "英语" not in line, line
