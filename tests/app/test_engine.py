"""app/engine.py: one trace per distinct request, every model call on the one model thread."""

from __future__ import annotations

import threading

import pytest


def test_the_cache_serves_every_view(fresh_client):
    engine = fresh_client.app.state.engine
    request = {"text": "We are students.", "max_len": 6}
    first = fresh_client.post("/api/trace", json=request)
    assert engine.model_calls == 1
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
    assert engine.model_calls == 1
    fresh_client.post("/api/trace", json={**request, "strategy": "beam"})
    assert engine.model_calls == 2


def test_cache_is_bounded(tiny_checkpoint, tiny_translator):
    from app.engine import Engine
    from app.schemas import TraceRequest

    cache = Engine(tiny_translator, cache_size=2)
    for text in ("a cat", "a dog", "a mat"):
        cache.trace(TraceRequest(text=text, max_len=2))
    assert len(cache._traces) == 2
    cache.trace(TraceRequest(text="a cat", max_len=2))
    assert cache.model_calls == 4  # the oldest was evicted


def test_identical_concurrent_requests_run_the_model_once(tiny_translator):
    from concurrent.futures import ThreadPoolExecutor

    from app.engine import Engine
    from app.schemas import TraceRequest

    cache = Engine(tiny_translator, cache_size=8)
    request = TraceRequest(text="Where is the station?", max_len=8)
    with ThreadPoolExecutor(max_workers=6) as pool:
        traces = list(pool.map(lambda _: cache.trace(request)[0], range(12)))
    assert cache.model_calls == 1
    assert all(trace is traces[0] for trace in traces)


def test_refused_requests_leave_no_lock_behind(tiny_translator):
    from app.engine import Engine
    from app.schemas import TranslateRequest
    from model.translator import InputError

    cache = Engine(tiny_translator, cache_size=4)
    request = TranslateRequest(text="a " * 70)  # 140 characters but 71 tokens: the model refuses
    with pytest.raises(InputError):
        cache.trace(request)
    assert cache._key_locks == {} and cache.model_calls == 0


def test_moving_between_pages_never_runs_the_model_twice(fresh_client):
    """What the README promises: every page's JSON route for one sentence reads one trace."""
    engine = fresh_client.app.state.engine
    text = {"text": "The woman said that she was tired."}
    fresh_client.post("/api/figures/pipeline", json=text)
    assert engine.model_calls == 1
    for path in ("/api/figures/tokens", "/api/figures/embeddings", "/api/figures/attention",
                 "/api/figures/decode", "/api/translate", "/api/trace"):
        assert fresh_client.post(path, json=text).status_code == 200, path
    detail = {**text, "kind": "cross", "layer": 0, "head": 1, "query": 0}
    fresh_client.post("/api/figures/attention-detail", json=detail)
    fresh_client.get("/api/coreference", params={**text, "pronoun": "she", "referent": "woman"})
    fresh_client.post("/api/score", json={**text, "reference": "那个女人说她累了。"})
    assert engine.model_calls == 1


def test_every_model_call_runs_on_the_model_thread(fresh_client, monkeypatch):
    """The trace, the training score and the KV-cache race all run on the engine's one thread."""
    translator = fresh_client.app.state.translator
    threads = {}

    def recording(name):
        original = getattr(translator, name)

        def call(*args, **kwargs):
            threads[name] = threading.current_thread().name
            return original(*args, **kwargs)

        monkeypatch.setattr(translator, name, call)

    for name in ("trace", "score", "kv_cache_race"):
        recording(name)
    fresh_client.post("/api/translate", json={"text": "I like green tea."})
    fresh_client.post("/api/score", json={"text": "I like green tea.", "reference": "我喜欢绿茶。"})
    fresh_client.get("/api/kv-cache", params={"text": "I like green tea.", "steps": 3})
    assert set(threads) == {"trace", "score", "kv_cache_race"}
    assert all(name.startswith("model") for name in threads.values()), threads
