"""The sentence box's limits agree (issue 56, item 7): its maxlength and hint, the API's character
limit and the model's 128 pieces; a sentence is never cut to fit, and one the model cannot take is
refused on the page, before anything is sent, in words that say how much to cut."""

from __future__ import annotations

import html
import re

from app.schemas import MAX_TEXT_CHARS
from model.tokenizer import MAX_SOURCE_TOKENS

# 600 characters, one piece each for most of them: every digit and punctuation mark is a piece
TOO_MANY_PIECES = ("Count " + " ".join(f"{n}," for n in range(1, 300)))[:MAX_TEXT_CHARS]


def _box(page: str) -> tuple[str, str | None]:
    """The sentence box's value and the refusal under it (None when there is none)."""
    value = re.search(r'<input id="text"[^>]*?value="([^"]*)"', page, re.S).group(1)
    refused = re.search(r'id="text-refused"[^>]*>([^<]*)<', page)
    return html.unescape(value), html.unescape(refused.group(1)) if refused else None


def test_the_box_the_hint_and_the_api_state_the_same_limits(app_client):
    page = app_client.get("/pipeline").text
    assert f'maxlength="{MAX_TEXT_CHARS}"' in page
    assert f"Up to {MAX_TEXT_CHARS} characters and {MAX_SOURCE_TOKENS} pieces" in page
    schema = app_client.get("/openapi.json").json()["components"]["schemas"]["TraceRequest"]
    assert schema["properties"]["text"]["maxLength"] == MAX_TEXT_CHARS
    zh = app_client.get("/pipeline", headers={"Accept-Language": "zh-CN"}).text
    assert f"最多 {MAX_TEXT_CHARS} 个字符、{MAX_SOURCE_TOKENS} 个词元" in zh


def test_a_sentence_of_the_boxs_length_is_never_cut(app_client):
    """The page once cut the query to 400 characters without a word."""
    text = ("The cat sits on the mat and the dog sleeps. " * 20)[:MAX_TEXT_CHARS]
    assert len(text) == MAX_TEXT_CHARS
    value, refused = _box(app_client.get("/", params={"text": text}).text)
    assert value == text
    if refused is None:  # it fits the model: the API takes it whole
        answer = app_client.post("/api/translate", json={"text": text})
        assert answer.status_code == 200 and answer.json()["text"] == text


def test_too_many_pieces_are_refused_on_the_page_with_how_much_to_cut(app_client, tiny_translator):
    pieces = len(tiny_translator.english.encode(TOO_MANY_PIECES))
    assert pieces > MAX_SOURCE_TOKENS
    for lang, words in (("en", f"{pieces} pieces long, but the model reads at most {MAX_SOURCE_TOKENS}: "
                               f"{pieces - MAX_SOURCE_TOKENS} too many"),
                        ("zh", f"有 {pieces} 个词元，但模型最多读 {MAX_SOURCE_TOKENS} 个：多了 "
                               f"{pieces - MAX_SOURCE_TOKENS} 个")):
        page = app_client.get("/", params={"text": TOO_MANY_PIECES}, headers={"Accept-Language": lang}).text
        value, refused = _box(page)
        assert value == TOO_MANY_PIECES  # shown whole, to be shortened by the learner
        assert refused is not None and words in refused, refused
        assert 'aria-invalid="true" aria-describedby="text-refused"' in page
    # where what the model can read ends: the refusal quotes the last words that fit
    refused = _box(app_client.get("/", params={"text": TOO_MANY_PIECES}).text)[1]
    fit, words, end = re.search(r"the first (\d+) of its (\d+) words, up to “…([^”]*)”", refused).groups()
    assert int(words) == len(TOO_MANY_PIECES.split())
    assert " ".join(TOO_MANY_PIECES.split()[:int(fit)]).endswith(end)
    fitting = TOO_MANY_PIECES[:TOO_MANY_PIECES.index(end) + len(end)]  # every number is there once
    assert len(tiny_translator.english.encode(fitting)) <= MAX_SOURCE_TOKENS
    one_more = TOO_MANY_PIECES[:len(fitting)] + " " + TOO_MANY_PIECES[len(fitting):].split()[0]
    assert len(tiny_translator.english.encode(one_more)) > MAX_SOURCE_TOKENS


def test_too_many_characters_are_refused_not_cut(app_client):
    text = "word " * 130  # 650 characters: only a hand-made address can carry it
    value, refused = _box(app_client.get("/", params={"text": text}).text)
    assert value == text
    assert refused is not None and f"{len(text)} characters long" in refused
    assert f"{len(text) - MAX_TEXT_CHARS} too many" in refused


def test_a_sentence_that_fits_is_not_refused(app_client):
    assert _box(app_client.get("/", params={"text": "The cat sits on the mat."}).text)[1] is None


def test_the_api_says_how_many_pieces_to_cut(app_client, tiny_translator):
    pieces = len(tiny_translator.english.encode(TOO_MANY_PIECES))
    answer = app_client.post("/api/translate", json={"text": TOO_MANY_PIECES})
    assert answer.status_code == 422
    assert f"cut at least {pieces - MAX_SOURCE_TOKENS} to fit" in answer.json()["message"]
