"""The JSON API on the tiny random checkpoint: shapes, attention invariants, limits, the cache."""

from __future__ import annotations

import pytest

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
    assert info["training"]["epochs"] == 1
    assert info["training"]["final_dev_bleu"] == 1.0
    assert info["training"]["minutes"] == 0.1
    assert info["evaluation"] == {"test": {"bleu": 1.0, "chrf": 2.0}}


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


def test_attention_detail(app_client):
    detail = app_client.post(
        "/api/attention-detail", json={**SHORT, "kind": "cross", "layer": 1, "head": 2}
    ).json()
    trace = app_client.post("/api/trace", json=SHORT).json()
    assert detail["d_k"] == 8
    assert detail["key_tokens"] == trace["source_tokens"]
    assert detail["query_tokens"] == trace["decoder_input"]
    assert detail["weights"] == trace["decoder"][1]["cross_attention"][2]
    for name in ("q", "k", "v", "raw", "scaled", "masked", "weights", "output"):
        assert name in detail
    scaled, raw = detail["scaled"][0][0], detail["raw"][0][0]
    assert scaled == pytest.approx(raw / 8**0.5, abs=1e-3)

    causal = app_client.post(
        "/api/attention-detail", json={**SHORT, "kind": "decoder_self", "layer": 0, "head": 0}
    ).json()
    assert causal["masked"][0][1:] == [None] * (len(causal["key_tokens"]) - 1)  # −∞ → null


def test_attention_stage_figures(app_client):
    body = app_client.post(
        "/api/figures/attention-detail",
        json={**SHORT, "kind": "encoder", "layer": 0, "head": 1, "query": 2},
    ).json()
    assert set(body["figures"]) == {"raw", "scaled", "masked", "weights"}
    assert body["figures"]["weights"]["data"][0]["y"] == body["detail"]["weights"][2]


def test_figure_endpoints(app_client):
    pipeline = app_client.post("/api/figures/pipeline", json=SHORT).json()
    assert pipeline["figures"]["probabilities"]["data"][0]["type"] == "bar"
    attention = app_client.post("/api/figures/attention", json=SHORT).json()
    assert set(attention["kinds"]) == {"encoder", "decoder_self", "cross"}
    assert len(attention["kinds"]["encoder"]) == 2 * 4  # layers × heads
    decode = app_client.post("/api/figures/decode", json={**SHORT, "layer": 1}).json()
    assert decode["layer"] == 1 and decode["layers"] == 2
    assert len(decode["steps"]) == len(decode["decoder_input"])
    assert set(decode["steps"][0]["figures"]) == {
        "self_attention", "add_norm1", "cross_attention", "add_norm2", "ffn", "add_norm3", "softmax",
    }


def test_the_cache_serves_every_view(fresh_client):
    traces = fresh_client.app.state.traces
    request = {"text": "We are students.", "max_len": 6}
    first = fresh_client.post("/api/trace", json=request)
    assert traces.model_calls == 1
    assert not first.headers["server-timing"].startswith("model;dur=0.0")
    # The same sentence in other views, other spellings of the same request, and options the
    # greedy strategy ignores: no new model run.
    fresh_client.post("/api/translate", json=request)
    fresh_client.post("/api/figures/attention", json=request)
    fresh_client.post("/api/figures/decode", json={**request, "layer": 0})
    fresh_client.post("/api/attention-detail",
                      json={**request, "kind": "encoder", "layer": 0, "head": 0})
    again = fresh_client.post("/api/trace", json={**request, "text": "  We are   students. ",
                                                  "temperature": 2.0, "beam_size": 3})
    assert again.headers["server-timing"].startswith("model;dur=0.0")
    assert traces.model_calls == 1
    fresh_client.post("/api/trace", json={**request, "strategy": "beam"})
    assert traces.model_calls == 2


def test_cache_is_bounded(tiny_checkpoint, tiny_translator):
    from app.schemas import TraceRequest
    from app.traces import TraceCache

    cache = TraceCache(tiny_translator, size=2)
    for text in ("a cat", "a dog", "a mat"):
        cache.get(TraceRequest(text=text, max_len=2))
    assert len(cache._traces) == 2
    cache.get(TraceRequest(text="a cat", max_len=2))
    assert cache.model_calls == 4  # the oldest was evicted


LIMITS = [
    ({"text": ""}, "text"),
    ({"text": "   \n\t "}, "text"),
    ({"text": "x" * 201}, "text"),
    ({"text": "cat " * 70}, "text"),  # 280 characters
    ({"text": "猫坐在垫子上"}, "text"),
    ({"text": "🙂🙂"}, "text"),
    ({"text": CAT, "temperature": 0}, "temperature"),
    ({"text": CAT, "temperature": 5.5}, "temperature"),
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

    assert "200" in message({"text": "x" * 201})
    assert "5" in message({"text": CAT, "temperature": 9})
    assert "8" in message({"text": CAT, "beam_size": 9})
    assert "128" in message({"text": CAT, "max_len": 500})
    assert "English" in message({"text": "猫坐在垫子上"})


def test_too_many_source_tokens(app_client):
    text = "a " * 99  # 198 characters, 99 words: past the 64-token limit
    answer = app_client.post("/api/translate", json={"text": text}).json()
    assert answer["errors"][0]["field"] == "text"
    assert "64" in answer["message"]


def test_mixed_text_is_translated(app_client):
    """English with a few other characters is fine; unknown pieces become <unk>."""
    response = app_client.post("/api/translate", json={"text": "The cat 猫 sits 🙂.", "max_len": 4})
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"forced_prefix": ["猫"] * 129}, "forced_prefix"),
        ({"forced_prefix": [""]}, "forced_prefix.0"),
        ({"forced_prefix": ["x" * 9]}, "forced_prefix.0"),
        ({"forced_prefix": ["<bos>"]}, "forced_prefix"),
        ({"forced_prefix": ["龘"]}, "forced_prefix"),  # not in the vocabulary
        ({"forced_prefix": ["猫", "坐"], "max_len": 1}, "forced_prefix"),
        ({"forced_prefix": "猫"}, "forced_prefix"),
    ],
)
def test_forced_prefix_limits(app_client, extra, field):
    response = app_client.post("/api/trace", json={"text": CAT, **extra})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == field


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"kind": "encoder", "layer": 2, "head": 0}, "layer"),
        ({"kind": "cross", "layer": 0, "head": 4}, "head"),
        ({"kind": "cross", "layer": -1, "head": 0}, "layer"),
        ({"kind": "keys", "layer": 0, "head": 0}, "kind"),
        ({"layer": 0, "head": 0}, "kind"),
    ],
)
def test_attention_detail_limits(app_client, extra, field):
    response = app_client.post("/api/attention-detail", json={**SHORT, **extra})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == field


def test_bodies_that_are_not_json(app_client):
    for content in (b"not json", b"[1, 2]", b"null", b'{"text": NaN}'):
        response = app_client.post("/api/trace", content=content,
                                   headers={"content-type": "application/json"})
        assert response.status_code == 422
        assert "message" in response.json()
    for value in (b"NaN", b"Infinity", b"1e999"):
        response = app_client.post(
            "/api/trace", content=b'{"text": "a cat", "temperature": ' + value + b"}",
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 422
        assert response.json()["errors"][0]["field"] == "temperature"


def test_body_size_limit(app_client):
    big = b'{"text": "' + b"a" * 20_000 + b'"}'
    response = app_client.post("/api/trace", content=big,
                                headers={"content-type": "application/json"})
    assert response.status_code == 413

    def chunks():  # no Content-Length: the limit still holds
        for _ in range(20):
            yield b"a" * 1024

    response = app_client.post("/api/trace", content=chunks(),
                               headers={"content-type": "application/json"})
    assert response.status_code == 413


def test_unexpected_errors_are_a_bare_500(tiny_checkpoint, tiny_translator, monkeypatch):
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(checkpoint=tiny_checkpoint), translator=tiny_translator)

    def explode(*args, **kwargs):
        raise RuntimeError("secret internals")

    with TestClient(app, raise_server_exceptions=False) as client:
        monkeypatch.setattr(client.app.state.traces, "get", explode)
        response = client.post("/api/trace", json=SHORT)
    assert response.status_code == 500
    assert "secret" not in response.text and "Traceback" not in response.text
    assert response.json() == {"message": "internal server error"}


def test_openapi_documents_the_limits(app_client):
    spec = app_client.get("/openapi.json").json()
    for path in ("/api/translate", "/api/trace", "/api/attention-detail", "/api/model", "/healthz"):
        assert path in spec["paths"]
    fields = spec["components"]["schemas"]["TraceRequest"]["properties"]
    assert fields["text"]["maxLength"] == 200
    assert fields["forced_prefix"]["maxItems"] == 128
    assert spec["components"]["schemas"]["TraceRequest"]["additionalProperties"] is False


def test_identical_concurrent_requests_run_the_model_once(tiny_translator):
    from concurrent.futures import ThreadPoolExecutor

    from app.schemas import TraceRequest
    from app.traces import TraceCache

    cache = TraceCache(tiny_translator, size=8)
    request = TraceRequest(text="Where is the station?", max_len=8)
    with ThreadPoolExecutor(max_workers=6) as pool:
        traces = list(pool.map(lambda _: cache.get(request)[0], range(12)))
    assert cache.model_calls == 1
    assert all(trace is traces[0] for trace in traces)


def test_malformed_json_is_a_422_about_the_body(app_client):
    response = app_client.post(
        "/api/translate", content=b'{"text": "hi"', headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "body"
    assert response.json()["message"].startswith("body: the request body is not valid JSON")


def test_refused_requests_leave_no_lock_behind(tiny_translator):
    from app.schemas import TranslateRequest
    from app.traces import TraceCache
    from model.translator import InputError

    cache = TraceCache(tiny_translator, size=4)
    request = TranslateRequest(text="a " * 70)  # 140 characters but 71 tokens: the model refuses
    with pytest.raises(InputError):
        cache.get(request)
    assert cache._key_locks == {} and cache.model_calls == 0
