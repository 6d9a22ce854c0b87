"""What the sentence box promises is true (issue 59, item 9): 600 characters of short words are
more than the model's 128 pieces, so the hint says the pieces can run out first, in both
languages, and such a sentence is still refused with words that say how much to cut."""

from __future__ import annotations

import html
import json

import httpx
import pytest

from app.i18n import LOCALES
from app.schemas import MAX_TEXT_CHARS, TOKENS_RULE
from model.tokenizer import MAX_SOURCE_TOKENS, EnglishTokenizer
from tests.conftest import SHIPPED_CHECKPOINT
from tests.waiting import PATIENCE_S

SHORT_WORDS = ("I am in it. He is at my car. We go up to it. " * 20)[:MAX_TEXT_CHARS].strip()


def test_short_words_run_out_of_pieces_before_characters():
    english = EnglishTokenizer.load(SHIPPED_CHECKPOINT / "tokenizer_en.json")
    assert len(SHORT_WORDS) <= MAX_TEXT_CHARS
    assert len(english.encode(SHORT_WORDS)) > MAX_SOURCE_TOKENS


@pytest.mark.parametrize(("lang", "words"), [("en", "more than"), ("zh", "超过")])
def test_the_hint_says_the_pieces_can_run_out_first(lang, words):
    hint = json.loads((LOCALES / lang / "common.json").read_text(encoding="utf-8"))["form.hint"]
    assert words in hint and "{chars}" in hint and "{pieces}" in hint, hint
    assert "ordinary" not in TOKENS_RULE  # the API's rule makes no promise for "ordinary" text


@pytest.mark.parametrize(("lang", "refused"), [("en", "pieces long"), ("zh", "个词元")])
def test_such_a_sentence_is_refused_clearly(live_server, lang, refused):
    response = httpx.get(live_server.url + "/", params={"text": SHORT_WORDS},
                         cookies={"lang": lang}, timeout=PATIENCE_S)
    assert response.status_code == 200
    page = html.unescape(response.text)
    assert 'id="text-refused"' in page and refused in page
