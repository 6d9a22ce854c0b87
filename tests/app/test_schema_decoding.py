"""The decoding options' rules are the model's (``DecodingOptions``, model/decoding.py): the
request schema takes its limits from there, its cache key is the options' own, and every page
carries the strategies and their options as JSON for its scripts."""

from __future__ import annotations

import html
import json
import re

from app.schemas import MAX_LEN, TraceRequest, decoding_contract
from model.decoding import LIMITS, STRATEGIES, DecodingOptions


def test_the_request_schema_takes_the_models_limits():
    properties = TraceRequest.model_json_schema()["properties"]
    assert properties["strategy"]["enum"] == list(STRATEGIES)
    for name, limit in LIMITS.items():
        field = properties[name]
        rules = field["anyOf"][0] if limit.optional else field
        low = rules["exclusiveMinimum"] if limit.above else rules["minimum"]
        assert low == limit.minimum, name
        assert rules["maximum"] == (MAX_LEN if name == "max_len" else limit.maximum), name
        readers = [s for s in STRATEGIES if name in DecodingOptions.reads(s)]
        if len(readers) == len(STRATEGIES):
            assert "every strategy" in field["description"], name
        else:
            assert all(reader in field["description"] for reader in readers), name


def test_the_cache_key_is_the_decoding_options_own():
    plain = TraceRequest(text="We are students.", max_len=6)
    ignored = TraceRequest(text="We are students.", max_len=6, temperature=2.0, beam_size=3)
    assert plain.cache_key() == ignored.cache_key()
    assert plain.cache_key()[1] == plain.decoding().cache_key()
    sampled = TraceRequest(text="We are students.", max_len=6, strategy="sample", temperature=2.0)
    assert sampled.cache_key() != TraceRequest(text="We are students.", max_len=6,
                                               strategy="sample").cache_key()


def test_every_page_carries_the_strategies_and_their_options(app_client):
    for path in ("/", "/xray", "/decode"):
        page = app_client.get(path)
        assert page.status_code == 200, path
        found = re.search(r'<script type="application/json" id="decoding">(.*?)</script>',
                          page.text, re.S)
        assert found, path
        contract = json.loads(html.unescape(found.group(1)))
        assert contract == json.loads(json.dumps(decoding_contract())), path
        assert contract["strategies"] == list(STRATEGIES)
        assert contract["options"]["max_len"]["max"] == MAX_LEN
