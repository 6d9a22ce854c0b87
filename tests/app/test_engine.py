"""app/engine.py: one trace per distinct request, every model call on the one model thread."""

from __future__ import annotations

import threading
import time

import pytest

from tests.waiting import PATIENCE_S, wait_until


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
    assert len(cache.cache.traces) == 2
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
    assert all(trace.encoder is traces[0].encoder for trace in traces)


def test_refused_requests_leave_no_lock_behind(tiny_translator):
    from app.engine import Engine
    from app.schemas import TranslateRequest
    from model.translator import InputError

    cache = Engine(tiny_translator, cache_size=4)
    request = TranslateRequest(text="a " * 150)  # 300 characters but 151 tokens: the model refuses
    with pytest.raises(InputError):
        cache.trace(request)
    assert cache.cache.key_locks == {} and cache.model_calls == 0


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


# -- a classroom at once: admission, cancellation, a cache bounded by bytes ----------------------


def block(engine, seconds: float = PATIENCE_S) -> tuple[threading.Event, threading.Thread]:
    """Occupy the model thread until the returned event is set (or ``seconds`` pass)."""
    release, started = threading.Event(), threading.Event()

    def hold():
        started.set()
        release.wait(seconds)

    thread = threading.Thread(target=engine.run, args=(hold,), daemon=True)
    thread.start()
    assert started.wait(PATIENCE_S)
    return release, thread


def test_a_call_past_its_deadline_stops_computing(tiny_translator):
    """Decoding stops at its next step once the request's time is up (its ``should_stop`` asks
    the ticket): the counted steps stop increasing, instead of running on for an answer nobody
    reads."""
    from app.engine import CURRENT_TICKET, Cancelled, Engine, Ticket
    from model.decoding import Stopped

    engine = Engine(tiny_translator)
    runs, stopped = [], []

    def keep_translating():  # model work for as long as the test lasts, unless something stops it
        end = time.monotonic() + 2 * PATIENCE_S
        while time.monotonic() < end:
            try:
                tiny_translator.kv_cache_race("The cat sits on the mat.", 16)
            except Stopped:  # raised by the check before a decoding step
                stopped.append(engine.stop_checks)
                raise
            runs.append(1)

    token = CURRENT_TICKET.set(Ticket(timeout_s=2.0))  # an unknown call is expected to take 1 s
    try:
        with pytest.raises(Cancelled):
            engine.run(keep_translating)
    finally:
        CURRENT_TICKET.reset(token)
    # the running call stops by itself, inside a model call, long before its own end
    wait_until(lambda: engine.pending == 0, "the call past its deadline to stop")
    assert len(stopped) == 1
    # the model thread is free: the next call runs at once, and no step ran after the stop
    engine.run(lambda: None)
    assert engine.stop_checks == stopped[0] > 0


def test_a_cancelled_call_stops_at_its_next_decoding_step(tiny_translator):
    """The client leaves during decoding: the step after is never run. The engine runs the call
    with a ``should_stop`` that asks the request's ticket, and the decoding loop asks it before
    every step; no layer of the model is hooked."""
    import torch

    from app.engine import CURRENT_TICKET, Cancelled, Engine, Ticket
    from model.decoding import DecodingOptions, generate

    model = tiny_translator.model
    engine = Engine(tiny_translator)
    ticket = Ticket(timeout_s=60)
    steps = []

    def leave_after_three(decoder):  # called after every step: the client leaves after the third
        steps.append(engine.stop_checks)
        if len(steps) == 3:
            ticket.cancel("the client disconnected")

    def translate():
        src = torch.tensor([tiny_translator.source_ids("The cat sits on the mat.")])
        return generate(model, src, DecodingOptions(max_len=32), min_len=32, on_step=leave_after_three)

    token = CURRENT_TICKET.set(ticket)
    try:
        with pytest.raises(Cancelled, match="the client disconnected"):
            engine.run(translate)
    finally:
        CURRENT_TICKET.reset(token)
    assert steps == [1, 2, 3]  # each step asked its ticket first
    assert engine.stop_checks == 3  # the fourth step asked, was told to stop, and never ran
    layers = [*model.encoder_layers, *model.decoder_layers]
    assert not any(layer._forward_pre_hooks for layer in layers)


def test_a_queued_call_whose_client_left_never_runs(tiny_translator):
    from app.engine import CURRENT_TICKET, Cancelled, Engine, Ticket

    engine = Engine(tiny_translator)
    release, holder = block(engine)
    ran, outcome = [], []
    ticket = Ticket(timeout_s=30)

    def client():
        CURRENT_TICKET.set(ticket)
        try:
            engine.run(lambda: ran.append(1))
        except Cancelled as error:
            outcome.append(error)

    waiting = threading.Thread(target=client)
    waiting.start()
    wait_until(lambda: engine.pending == 2, "the client's call to queue behind the blocker")
    ticket.cancel("the client disconnected")
    waiting.join(PATIENCE_S)
    # the waiting request is answered while the blocker still has the model thread
    assert not waiting.is_alive() and outcome and holder.is_alive()
    release.set()
    holder.join(PATIENCE_S)
    engine.run(lambda: None)  # one thread, first come first served: the dropped call's turn is past
    assert ran == [] and engine.pending == 0


def test_a_full_queue_answers_busy_at_once(tiny_translator):
    from app.engine import Busy, Engine

    engine = Engine(tiny_translator, max_queue=2)
    release, holders = [], []
    for _ in range(2):
        event, thread = block(engine) if not holders else (None, None)
        if event is None:  # the second blocker waits in the queue behind the first
            thread = threading.Thread(target=engine.run, args=(time.sleep, 0), daemon=True)
            thread.start()
            wait_until(lambda: engine.pending == 2, "the second call to queue")
        else:
            release.append(event)
        holders.append(thread)
    with pytest.raises(Busy) as refused:
        engine.run(tiny_translator.kv_cache_race, "a cat", 4)
    # refused without waiting: the first call still holds the model thread, the second still waits
    assert engine.pending == 2 and all(thread.is_alive() for thread in holders)
    assert refused.value.retry_after >= 1 and engine.shed == 1
    release[0].set()
    for thread in holders:
        thread.join(PATIENCE_S)
    assert engine.pending == 0
    engine.run(tiny_translator.kv_cache_race, "a cat", 4)  # room again


def test_a_full_queue_is_a_503_with_retry_after_on_every_model_route(tiny_checkpoint,
                                                                    tiny_translator):
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(checkpoint=tiny_checkpoint, max_queue=1, access_log=False),
                     translator=tiny_translator)
    with TestClient(app) as client:
        release, holder = block(client.app.state.engine)
        try:
            calls = [
                client.post("/api/trace", json={"text": "The dog runs in the park."}),
                client.post("/api/translate", json={"text": "The dog runs in the park."}),
                client.get("/api/kv-cache", params={"text": "a cat", "steps": 128}),
                client.post("/api/score", json={"text": "a cat", "reference": "猫"}),
            ]
            health = client.get("/healthz")
        finally:
            release.set()
            holder.join(PATIENCE_S)
        for response in calls:
            assert response.status_code == 503, response.text
            assert int(response.headers["retry-after"]) >= 1
            assert "busy" in response.json()["message"]
        assert health.status_code == 200
        assert client.post("/api/trace", json={"text": "The dog runs in the park."}).status_code == 200


def test_server_timing_splits_queue_wait_from_model_time(fresh_client):
    engine = fresh_client.app.state.engine
    running = threading.Event()

    def hold() -> None:  # has the model thread until the trace has queued behind it, then 1 s more
        running.set()
        wait_until(lambda: engine.pending >= 2, "the trace to queue behind the holder")
        time.sleep(1.0)  # the queue wait the trace must report (what is measured, not awaited)

    holder = threading.Thread(target=engine.run, args=(hold,))
    holder.start()
    assert running.wait(PATIENCE_S)  # a busy machine may start the holder late: never race it
    response = fresh_client.post("/api/trace", json={"text": "We are students.", "max_len": 4})
    holder.join()
    timing = dict(part.strip().split(";dur=") for part in response.headers["server-timing"].split(","))
    assert float(timing["queue"]) >= 1000  # it waited for the sleeping call
    assert float(timing["model"]) < float(timing["queue"])
    assert float(timing["app"]) >= float(timing["queue"])


def test_cache_bytes_stay_under_the_bound_with_huge_sampled_traces(tiny_translator):
    import orjson

    from app.engine import Engine, trace_bytes
    from app.schemas import TraceRequest

    engine = Engine(tiny_translator, cache_size=4096, cache_mb=8)  # ~3 MB each on the tiny model
    for seed in range(16):
        trace, _ = engine.trace(TraceRequest(text="The cat sits on the mat.", strategy="sample",
                                             temperature=5, max_len=128, seed=seed))
        assert engine.cache.bytes <= engine.cache.max_bytes
    assert engine.model_calls == 16 and 1 <= len(engine.cache.traces) < 16
    assert engine.cache.bytes == sum(size for _, size in engine.cache.traces.values())
    # the estimate is not an under-count: at least the trace's JSON size
    assert trace_bytes(trace) >= len(orjson.dumps(trace.to_dict()))


def test_a_cached_trace_echoes_the_requests_own_options(fresh_client):
    first = {"text": "We are students.", "max_len": 6, "temperature": 1.0}
    fresh_client.post("/api/trace", json=first)
    again = fresh_client.post("/api/trace", json={**first, "temperature": 2.5, "beam_size": 3})
    assert again.headers["server-timing"].startswith("model;dur=0.0")  # from the cache
    assert again.json()["options"]["temperature"] == 2.5
    assert again.json()["options"]["beam_size"] == 3
    sample = {**first, "strategy": "sample"}
    fresh_client.post("/api/trace", json={**sample, "seed": 0})
    echoed = fresh_client.post("/api/figures/decode", json={**sample, "layer": 0}).json()
    assert echoed["options"]["seed"] is None


def test_a_call_that_cannot_finish_in_time_is_refused_at_once(tiny_translator):
    """Admission learns how long each kind of call takes: once a slow kind is known, a request
    with less time left than the queue ahead plus its own call is refused before it waits."""
    from app.engine import CURRENT_TICKET, Busy, Engine, Ticket

    engine = Engine(tiny_translator)
    engine.run(time.sleep, 0.3)  # learns that this kind of call takes 0.3 s
    token = CURRENT_TICKET.set(Ticket(timeout_s=0.2))
    try:
        with pytest.raises(Busy):
            engine.run(time.sleep, 0.3)
    finally:
        CURRENT_TICKET.reset(token)
    assert engine.shed == 1 and engine.pending == 0


def test_what_a_page_derives_from_a_trace_is_kept_with_it_and_counted(tiny_translator):
    from app.engine import Engine
    from app.schemas import TraceRequest

    engine = Engine(tiny_translator, cache_size=4)
    request = TraceRequest(text="a cat", max_len=3)
    trace, _ = engine.trace(request)
    before = engine.cache.bytes
    runs = []

    def derive(text: str) -> bytes:
        runs.append(threading.get_ident())
        return text.encode() * 1000

    first, _ = engine.derived(request, trace, "payload", derive, "x")
    again, elapsed = engine.derived(request, engine.trace(request)[0], "payload", derive, "y")
    assert first == again == b"x" * 1000 and len(runs) == 1 and elapsed == 0.0
    assert runs[0] != threading.get_ident()  # computed on the model thread
    assert engine.cache.bytes >= before + 1000
    # evicting the trace drops what was derived from it, bytes and all
    for text in ("a dog", "a mat", "a hat", "a bat"):
        engine.trace(TraceRequest(text=text, max_len=3))
    assert request.cache_key() not in engine.cache.traces
    assert engine.cache.bytes == sum(size for _, size in engine.cache.traces.values())


def test_an_answered_call_leaves_nothing_for_the_cycle_collector(tiny_translator):
    """A trace (tensors and all) is freed when its request lets go of it, not held in a
    reference cycle until Python's cyclic collector runs: the server freezes what it loads at
    start-up, full collections are rare, and a burst's traces once piled up ~100 MB before one
    came (a job held its future, whose done-callback held the job; a failed call's traceback
    held the frame holding the job; a cached decoder's per-layer steps held the decoder and its
    KV buffers). Nothing of a finished call, answered or failed, is garbage
    that only the cyclic collector can free."""
    import gc

    from app.engine import Engine
    from model.decoding import DecodingOptions

    engine = Engine(tiny_translator)

    def fails() -> None:
        raise ValueError("a call that fails")

    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds stays in gc.garbage to be looked at
    try:
        engine.run(tiny_translator.trace, "The cat sits on the mat.",
                   DecodingOptions(strategy="beam", beam_size=4), None)
        with pytest.raises(ValueError):
            engine.run(fails)
        gc.collect()
        kept = {type(o).__name__ for o in gc.garbage} & {
            "Job", "Future", "Claim", "Trace", "RecordedPass", "Decoder", "KVCache", "ValueError"}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert not kept, kept
