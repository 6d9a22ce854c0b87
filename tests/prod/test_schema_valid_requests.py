"""A request /openapi.json calls valid is served (issue 59, item 6): what the schema cannot state
is either accepted (a forced prefix longer than max_len raises max_len, one word has one order, a
pronoun may be its referent, unusual model sizes get a warning) or, for an index past the end of
the request's own sentence, answered 404 naming the largest value there is — never 422. Through
real HTTP (``python -m app`` on the tiny checkpoint)."""

from __future__ import annotations

import httpx
import pytest

from tests.waiting import PATIENCE_S

CAT = "The cat sits on the mat."


def post(server, path: str, body: dict) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=PATIENCE_S)


def test_a_forced_prefix_longer_than_max_len_raises_max_len(live_server):
    response = post(live_server, "/api/trace", {"text": CAT, "forced_prefix": ["猫", "坐", "在"],
                                                "max_len": 1})
    assert response.status_code == 200, response.text[:300]
    trace = response.json()
    assert trace["target_tokens"] == ["猫", "坐", "在"]
    assert trace["options"]["max_len"] == 3


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/api/figures/interpret", {"step": 127, "ig_steps": 2, "max_len": 3}, "step"),
    ("/api/figures/attention-detail", {"kind": "encoder", "layer": 0, "head": 0, "query": 128},
     "query"),
    ("/api/xray/block", {"side": "encoder", "block": "ffn", "position": 128}, "position"),
])
def test_an_index_past_the_end_of_the_sentence_is_404(live_server, path, body, field):
    response = post(live_server, path, {"text": CAT, **body})
    assert response.status_code == 404, response.text[:300]
    answer = response.json()
    assert answer["errors"] == [{"field": field, "message": answer["errors"][0]["message"]}]
    assert "must be between 0 and" in answer["message"]


def coreference(server, **query) -> httpx.Response:
    return httpx.get(server.url + "/api/coreference", params=query, timeout=PATIENCE_S)


def test_a_pronoun_may_be_its_referent(live_server):
    response = coreference(live_server, text="The woman said that she was tired.", pronoun="she",
                           referent="she")
    assert response.status_code == 200, response.text[:300]
    assert response.json()["pronoun"] == response.json()["referent"]


def test_a_word_not_in_the_text_is_404(live_server):
    response = coreference(live_server, text="The woman said that she was tired.", pronoun="he",
                           referent="woman")
    assert response.status_code == 404, response.text[:300]
    assert response.json()["errors"][0]["field"] == "pronoun"


@pytest.mark.parametrize(("query", "words"), [
    ({"d_model": 100, "heads": 3}, "do not divide"),
    ({"experts": 2, "active_experts": 3}, "cannot use 3 experts"),
])
def test_unusual_sizes_are_counted_with_a_warning(live_server, query, words):
    response = httpx.get(live_server.url + "/api/scale", params=query, timeout=PATIENCE_S)
    assert response.status_code == 200, response.text[:300]
    answer = response.json()
    assert len(answer["warnings"]) == 1 and words in answer["warnings"][0], answer["warnings"]
    assert answer["total"] > 0


def test_every_rule_past_the_end_is_documented_as_404(live_server):
    spec = httpx.get(live_server.url + "/openapi.json", timeout=PATIENCE_S).json()
    for path, words in [("/api/figures/interpret", "step must be below"),
                        ("/api/figures/attention-detail", "query must be below"),
                        ("/api/xray/block", "position must be below"),
                        ("/api/coreference", "must be words of text")]:
        method = "get" if path == "/api/coreference" else "post"
        assert words in spec["paths"][path][method]["responses"]["404"]["description"], path
