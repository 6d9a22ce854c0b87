"""app/i18n.py and app/locales/: both languages everywhere, each page sends only its own strings."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from app import i18n
from app.i18n import COMMON, LANGUAGES, choose_language, page_strings

PAGES = i18n.pages()
PATHS = {"xray": "/", "kv_cache": "/kv-cache"}


def test_every_page_has_the_same_keys_in_both_languages():
    for page in [COMMON, *PAGES]:
        zh, en = page_strings("zh", page), page_strings("en", page)
        assert zh and set(zh) == set(en), page
        assert all(zh[key].strip() and en[key].strip() for key in zh), page
        for key in zh:  # the same placeholders, so t(key, n=…) works in both
            assert set(re.findall(r"\{(\w*)\}", zh[key])) == set(re.findall(r"\{(\w*)\}", en[key])), key


def test_a_key_lives_in_one_file():
    counts = Counter(key for page in [COMMON, *PAGES] for key in page_strings("en", page))
    assert [key for key, n in counts.items() if n > 1] == []


@pytest.mark.parametrize("page", PAGES)
def test_a_page_sends_only_common_and_its_own_strings(app_client, page):
    html = app_client.get(PATHS.get(page, f"/{page}")).text
    block = re.search(r'<script type="application/json" id="i18n">(.*?)</script>', html, re.S)
    sent = json.loads(block.group(1))
    assert set(sent) == set(page_strings("en", COMMON)) | set(page_strings("en", page))


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_page_shows_a_bare_key(fresh_client, page, lang):
    """t() shows an unknown key as itself; no rendered page may contain one."""
    fresh_client.cookies.set("lang", lang)
    html = fresh_client.get(PATHS.get(page, f"/{page}")).text
    prefixes = {key.split(".")[0] for p in [COMMON, *PAGES] for key in page_strings(lang, p)}
    text = re.sub(r"<[^>]+>", " ", re.sub(r"<script.*?</script>", " ", html, flags=re.S))
    bare = [m for m in re.findall(r"\b([a-z_]+\.[a-z_.\-]+)\b", text) if m.split(".")[0] in prefixes]
    assert bare == []


def test_choose_language():
    assert choose_language(None, None) == "en"
    assert choose_language(None, "zh-TW,zh;q=0.9") == "zh"
    assert choose_language(None, "de, en;q=0.5, zh;q=0.7") == "zh"
    assert choose_language("en", "zh") == "en"
    assert choose_language("xx", "garbage;q=abc") == "en"
