"""The page-independent JSON API (app/api.py) on the tiny random checkpoint: shapes, attention
invariants, limits."""

from __future__ import annotations

import re

import pytest

from app.schemas import LATIN_LETTER

CAT = "The cat sits on the mat."


SHORT = {"text": CAT, "max_len": 8}


def approx_one(row: list[float]) -> bool:
    return abs(sum(row) - 1.0) < 1e-3


def test_healthz(app_client):
    response = app_client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_model_info(app_client, tiny_translator):
    info = app_client.get("/api/model").json()
    config = info["config"]
    assert (config["d_model"], config["n_heads"], config["d_ff"]) == (32, 4, 64)
    assert config["n_encoder_layers"] == config["n_decoder_layers"] == 2
    assert config["src_vocab_size"] == tiny_translator.english.vocab_size
    assert config["tgt_vocab_size"] == len(tiny_translator.chinese.vocabulary)
    assert info["parameters"] == tiny_translator.parameter_counts()
    last = tiny_translator.history["epochs"][-1]
    assert info["training"]["epochs"] == len(tiny_translator.history["epochs"])
    assert info["training"]["steps"] == last["step"]  # the last epoch's, not the first's


def test_translate_shape(app_client):
    response = app_client.post("/api/translate", json=SHORT)
    assert response.status_code == 200
    body = response.json()
    assert body["source_tokens"][-1] == "<eos>"
    assert "cat" in body["source_tokens"]
    assert isinstance(body["translation"], str)
    assert len(body["steps"]) >= len(body["target_tokens"])
    for step in body["steps"]:
        assert 0 <= step["prob"] <= 1
        assert len(step["top"]) == 10
        probs = [candidate["prob"] for candidate in step["top"]]
        assert probs == sorted(probs, reverse=True)
    assert response.headers["server-timing"].startswith("model;dur=")


@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_trace_invariants(app_client, strategy):
    body = app_client.post("/api/trace", json={**SHORT, "strategy": strategy, "seed": 3}).json()
    S, T = len(body["source_tokens"]), len(body["decoder_input"])
    assert len(body["encoder"]) == len(body["decoder"]) == 2
    for layer in body["encoder"]:
        heads = layer["self_attention"]
        assert len(heads) == 4
        for head in heads:
            assert len(head) == S and all(len(row) == S and approx_one(row) for row in head)
    for layer in body["decoder"]:
        for head in layer["self_attention"]:
            assert len(head) == T
            for q, row in enumerate(head):
                assert len(row) == T and approx_one(row)
                assert all(weight == 0 for weight in row[q + 1:])  # the causal mask
        for head in layer["cross_attention"]:
            assert len(head) == T and all(len(row) == S and approx_one(row) for row in head)
    assert set(body["embeddings"]) == {"encoder", "decoder"}
    assert len(body["embeddings"]["encoder"]["sum"]) == S
    assert body["options"]["strategy"] == strategy
    assert len(body["steps"]) == T
    assert bool(body["beam"]) == (strategy == "beam")
    if strategy == "beam":
        node = body["beam"][0]
        assert set(node) >= {"id", "step", "token", "parent", "score", "finished", "selected"}


def test_forced_prefix_is_kept(app_client, tiny_translator):
    forced = ["猫", "坐"]
    body = app_client.post("/api/trace", json={**SHORT, "forced_prefix": forced}).json()
    assert body["target_tokens"][:2] == forced
    assert [step["forced"] for step in body["steps"][:3]] == [True, True, False]


LIMITS = [
    ({"text": ""}, "text"),
    ({"text": "   \n\t "}, "text"),
    ({"text": "x" * 601}, "text"),
    ({"text": "cat " * 140}, "text"),  # 560 characters, but 141 tokens
    ({"text": "猫坐在垫子上"}, "text"),
    ({"text": "🙂🙂"}, "text"),
    ({"text": CAT, "temperature": 0}, "temperature"),
    ({"text": CAT, "temperature": 5.5}, "temperature"),
    ({"text": CAT, "temperature": 1e-38, "strategy": "sample"}, "temperature"),  # was a 500
    ({"text": CAT, "temperature": 5.1e-230, "strategy": "sample"}, "temperature"),
    ({"text": CAT, "top_p": 0}, "top_p"),
    ({"text": CAT, "top_p": 1.5}, "top_p"),
    ({"text": CAT, "top_k": 0}, "top_k"),
    ({"text": CAT, "top_k": 1001}, "top_k"),
    ({"text": CAT, "beam_size": 0}, "beam_size"),
    ({"text": CAT, "beam_size": 9}, "beam_size"),
    ({"text": CAT, "max_len": 0}, "max_len"),
    ({"text": CAT, "max_len": 129}, "max_len"),
    ({"text": CAT, "strategy": "nucleus"}, "strategy"),
    ({"text": CAT, "seed": -1}, "seed"),
    ({"text": CAT, "seed": 2**31}, "seed"),
    ({"text": CAT, "colour": "red"}, "colour"),
    ({"text": 42}, "text"),
    ({}, "text"),
]


@pytest.mark.parametrize(("body", "field"), LIMITS)
@pytest.mark.parametrize("path", ["/api/translate", "/api/trace"])
def test_bad_input_is_a_422_naming_the_field(app_client, path, body, field):
    response = app_client.post(path, json=body)
    assert response.status_code == 422, response.text
    answer = response.json()
    assert answer["message"].startswith(f"{field}:")
    assert field in [error["field"] for error in answer["errors"]]
    assert "Traceback" not in response.text


def test_limit_messages_say_the_limit(app_client):
    def message(body):
        return app_client.post("/api/trace", json=body).json()["message"]

    assert "600" in message({"text": "x" * 601})
    assert "5" in message({"text": CAT, "temperature": 9})
    assert "8" in message({"text": CAT, "beam_size": 9})
    assert "128" in message({"text": CAT, "max_len": 500})
    assert "English" in message({"text": "猫坐在垫子上"})


def test_too_many_source_tokens(app_client):
    text = "a " * 150  # 300 characters, 150 words: past the 128-token limit
    answer = app_client.post("/api/translate", json={"text": text}).json()
    assert answer["errors"][0]["field"] == "text"
    assert "128" in answer["message"]


def test_mixed_text_is_translated(app_client):
    """English with a few other characters is fine; unknown pieces become <unk>."""
    response = app_client.post("/api/translate", json={"text": "The cat 猫 sits 🙂.", "max_len": 4})
    assert response.status_code == 200
    body = response.json()
    tokens = body["source_tokens"]
    # the words read as pieces, 猫 and 🙂 as <unk> (the tiny model's vocabulary may lack "." too)
    read = "".join("|" if t == "<unk>" else t.removeprefix("##") for t in tokens[:-1])
    assert read.startswith("thecat|sits|") and tokens[-1] == "<eos>", tokens
    assert 1 <= len(body["target_tokens"]) <= 4 and len(body["steps"]) == len(body["target_tokens"])
    assert body["translation"] == "".join(t for t in body["target_tokens"] if t != "<eos>")


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"forced_prefix": ["猫"] * 129}, "forced_prefix"),
        ({"forced_prefix": [""]}, "forced_prefix.0"),
        ({"forced_prefix": ["x" * 9]}, "forced_prefix.0"),
        ({"forced_prefix": ["<bos>"]}, "forced_prefix"),
        ({"forced_prefix": ["龘"]}, "forced_prefix"),  # not in the vocabulary
        ({"forced_prefix": "猫"}, "forced_prefix"),
    ],
)
def test_forced_prefix_limits(app_client, extra, field):
    response = app_client.post("/api/trace", json={"text": CAT, **extra})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == field


def test_openapi_documents_the_limits(app_client):
    spec = app_client.get("/openapi.json").json()
    for path in ("/api/translate", "/api/trace", "/api/attention-detail", "/api/model", "/healthz"):
        assert path in spec["paths"]
    fields = spec["components"]["schemas"]["TraceRequest"]["properties"]
    assert fields["text"]["maxLength"] == 600
    assert fields["forced_prefix"]["maxItems"] == 128
    assert spec["components"]["schemas"]["TraceRequest"]["additionalProperties"] is False


def test_openapi_states_the_loaded_models_limits(app_client, tiny_translator):
    """Maxima and the Chinese vocabulary come from the checkpoint served (2 layers, 4 heads)."""
    spec = app_client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    config = tiny_translator.config
    assert schemas["AttentionDetailRequest"]["properties"]["head"]["maximum"] == config.n_heads - 1
    assert schemas["FigureRequest"]["properties"]["layer"]["maximum"] == config.n_decoder_layers - 1
    kv = {p["name"]: p["schema"] for p in spec["paths"]["/api/kv-cache"]["get"]["parameters"]}
    assert kv["layer"]["maximum"] == config.n_decoder_layers - 1
    assert kv["head"]["maximum"] == config.n_heads - 1
    token = re.compile(schemas["ChineseToken"]["pattern"])  # one pattern, not an enum
    assert all(token.search(t) for t in ("猫", "<eos>", "<unk>"))
    assert not any(token.search(t) for t in ("<bos>", "<pad>", "猫猫", "x", ""))
    assert schemas["TraceRequest"]["properties"]["forced_prefix"]["items"] == {
        "$ref": "#/components/schemas/ChineseToken"}
    assert schemas["ScoreRequest"]["properties"]["text"]["pattern"] == LATIN_LETTER.pattern
    assert "at most 128 tokens" in spec["paths"]["/api/score"]["post"]["responses"]["422"]["description"]
    # before start-up (no model) the static limits stand
    from app.main import create_app
    from app.settings import Settings
    static = create_app(Settings()).openapi()
    assert static["components"]["schemas"]["FigureRequest"]["properties"]["layer"]["maximum"] == 63


@pytest.mark.parametrize(("max_len", "status"), [(4.0, 200), (4.5, 422), (True, 422), ("4", 422)])
def test_an_integer_field_takes_a_whole_float_as_json_schema_does(app_client, max_len, status):
    response = app_client.post("/api/translate", json={"text": CAT, "max_len": max_len})
    assert response.status_code == status, response.text


def test_a_long_sentence_up_to_128_tokens_translates(app_client):
    """Inputs between 64 and 128 tokens used to be refused; the model now reads up to 128."""
    text = " ".join(["The cat sits on the mat and the dog sleeps by the door."] * 4)
    response = app_client.post("/api/translate", json={"text": text, "max_len": 8})
    assert response.status_code == 200, response.text
    assert 64 < len(response.json()["source_tokens"]) <= 128


def test_a_large_vocabulary_is_described_not_listed(tiny_translator, monkeypatch):
    """Single characters are one pattern; a vocabulary of longer pieces is listed as an enum, and
    a Marian model's 65k pieces (~1 MB of /openapi.json) past MAX_SCHEMA_ENUM tokens are
    described: what a token is and that others get 422."""
    from app import schemas

    def token_schema() -> dict:
        return schemas.model_schema({}, tiny_translator)["components"]["schemas"]["ChineseToken"]

    tokens = schemas.chinese_tokens(tiny_translator)
    assert "pattern" in token_schema() and "enum" not in token_schema()
    monkeypatch.setattr(schemas, "MAX_PATTERN_WORDS", 1)  # as if <eos>, <unk> were many pieces
    listed = token_schema()
    assert listed["enum"] == tokens
    monkeypatch.setattr(schemas, "MAX_SCHEMA_ENUM", 10)
    described = token_schema()
    assert "enum" not in described and "pattern" not in described
    assert described["minLength"] == 1 and described["maxLength"] == schemas.MAX_TOKEN_CHARS
    assert f"{len(tokens):,} tokens" in described["description"]
