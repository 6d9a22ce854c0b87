"""What a client sends is normalised once, where it arrives (issue 59, item 1): text with
combining marks ("A" + U+0300) is NFC-normalised before any check, so the rule that text has a
Latin letter reads the text the model will read, and a route that derives a second request from
it never validates it again. Through real HTTP (``python -m app`` on the tiny checkpoint)."""

from __future__ import annotations

import httpx
import pytest

from tests.waiting import PATIENCE_S

COMBINING = ["A\u0300", "e\u0301 o\u0302", "The cafe\u0301 is open."]
ROUTES = ["/api/translate", "/api/trace", "/api/xray/view", "/api/figures/embeddings",
          "/api/figures/pipeline", "/api/figures/tokens", "/api/ablation/word-order"]


@pytest.mark.parametrize("text", COMBINING)
@pytest.mark.parametrize("path", ROUTES)
def test_combining_marks_are_translated(live_server, path, text):
    response = httpx.post(live_server.url + path, json={"text": text}, timeout=PATIENCE_S)
    assert response.status_code == 200, response.text[:300]


@pytest.mark.parametrize("text", COMBINING)
def test_a_scored_pair_with_combining_marks(live_server, text):
    # 猫 + a compatibility ideograph (U+F900, which NFC maps to U+8C48)
    body = {"text": text, "reference": "\uf900猫坐在垫子上。"}
    response = httpx.post(live_server.url + "/api/score", json=body, timeout=PATIENCE_S)
    assert response.status_code == 200, response.text[:300]


def test_coreference_with_combining_marks(live_server):
    query = {"text": "The woman\u0300 said that she was tired.", "pronoun": "she",
             "referent": "said"}
    response = httpx.get(live_server.url + "/api/coreference", params=query, timeout=PATIENCE_S)
    assert response.status_code == 200, response.text[:300]


def test_the_normalised_text_is_what_comes_back(live_server):
    response = httpx.post(live_server.url + "/api/translate", json={"text": "  A\u0300  b "},
                          timeout=PATIENCE_S)
    assert response.json()["text"] == "\u00c0 b"


@pytest.mark.parametrize("text", ["\u0300", "猫", "123", " \u0301 "])
def test_text_without_a_latin_letter_is_still_refused(live_server, text):
    response = httpx.post(live_server.url + "/api/xray/view", json={"text": text},
                          timeout=PATIENCE_S)
    assert response.status_code == 422, response.text[:300]
    assert response.json()["errors"][0]["field"] == "text"


def test_one_word_has_one_order(live_server):
    """A one-word text is schema-valid: the word-order test answers that it has one order."""
    response = httpx.post(live_server.url + "/api/ablation/word-order", json={"text": "Hello"},
                          timeout=PATIENCE_S)
    assert response.status_code == 200, response.text[:300]
    answer = response.json()
    assert answer["shuffled"] is False
    assert answer["shuffled_words"] == answer["words"]
