"""/ablation and its JSON routes on the tiny random model: the answers are model/explain/ablation.py's
numbers for the engine's trace, computed once per trace on the model thread (admission and
cancellation as every model call), every request field limited, bad parts a 422 naming the rule."""

from __future__ import annotations

import re
import threading

import pytest

from app.admission import Busy
from app.engine import CURRENT_TICKET, Cancelled, Engine, Ticket, options
from app.schemas import TraceRequest
from model.explain import ablation as ablate
from model.translator import InputError

TEXT = {"text": "He gave her a flower because she was sad.", "max_len": 12}


def heads(config) -> int:
    return config.n_heads * (config.n_encoder_layers + 2 * config.n_decoder_layers)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_draws_every_switch(app_client, lang):
    app_client.cookies.set("lang", lang)
    try:
        html = app_client.get("/ablation").text
    finally:
        app_client.cookies.clear()
    config = app_client.app.state.translator.config
    parts = re.findall(r'data-part="([^"]+)"', html)
    assert len([p for p in parts if p.count(".") == 2]) == heads(config)
    assert {"enc.1", "dec.2", "cross.2", "encffn.1", "decffn.2", "pos.enc", "pos.dec"} <= set(parts)
    assert all(re.match(ablate.PART_PATTERN, part) for part in parts)
    assert ('交叉注意力' if lang == "zh" else "Cross-attention") in html
    assert 'href="/ablation"' in app_client.get("/attention").text  # in the nav of every page


def test_ablation_answer_is_the_retranslation_of_the_engines_trace(fresh_client):
    body = {**TEXT, "off": ["cross.1.2", "enc.2", "pos.dec"]}
    answer = fresh_client.post("/api/ablation", json=body)
    assert answer.status_code == 200
    assert re.match(r"model;dur=[1-9]", answer.headers["Server-Timing"])
    data = answer.json()
    translator = fresh_client.app.state.translator
    trace = translator.trace(TEXT["text"], options(TraceRequest(**TEXT)))
    expected = ablate.retranslate(translator, trace, ablate.parse_parts(body["off"], translator.config))
    assert data["parts"] == ["enc.2", "pos.dec", "cross.1.2"]  # in the order the data meets them
    for key in ("original", "ablated", "same", "parted_at", "mode"):
        assert data[key] == expected[key], key
    assert data["translation"] == trace.translation and data["original"]["prob_with"] == \
        [step.prob for step in trace.steps]
    figure = data["figure"]
    assert [len(bar["y"]) for bar in figure["data"]] == [len(trace.steps)] * 2
    # the same parts again: kept with the trace, not recomputed
    again = fresh_client.post("/api/ablation", json={**body, "off": ["pos.dec", "enc.2", "cross.1.2"]})
    assert again.json()["ablated"] == data["ablated"]
    assert again.headers["Server-Timing"].startswith("model;dur=0.0")


def test_mean_mode_is_its_own_answer(app_client):
    zero = app_client.post("/api/ablation", json={**TEXT, "off": ["dec.1", "cross.2.1"]}).json()
    mean = app_client.post("/api/ablation", json={**TEXT, "off": ["dec.1", "cross.2.1"],
                                                  "mode": "mean"}).json()
    assert zero["mode"] == "zero" and mean["mode"] == "mean"
    assert zero["original"]["prob_without"] != mean["original"]["prob_without"]


def test_importance_answer_scores_every_head(app_client):
    answer = app_client.post("/api/ablation/importance", json=TEXT)
    assert answer.status_code == 200
    data = answer.json()
    translator = app_client.app.state.translator
    assert [h["name"] for h in data["heads"]] == [h.name for h in ablate.all_heads(translator.config)]
    assert len(data["heads"]) == heads(translator.config) and len(data["top"]) == ablate.TOP_HEADS
    assert all(len(h["delta_steps"]) == len(data["tokens"]) for h in data["heads"])
    assert {h["attention_kind"] for h in data["heads"]} == {"encoder", "decoder_self", "cross"}
    assert data["passes"] == 2 and data["rows"] == 1 + len(data["heads"])
    mean = app_client.post("/api/ablation/importance", json={**TEXT, "mode": "mean"}).json()
    assert mean["mode"] == "mean" and mean["heads"] != data["heads"]


def test_word_order_answer(app_client):
    data = app_client.post("/api/ablation/word-order", json={**TEXT, "shuffle": 5}).json()
    assert sorted(data["shuffled_words"]) == sorted(data["words"]) and data["seed"] == 5
    assert data["without_positions"]["max_difference"] < 1e-4 < data["with_positions"]["max_difference"]
    assert data["without_positions"]["same_translation"] is True


def test_every_ablation_call_runs_on_the_model_thread(fresh_client, monkeypatch):
    threads = {}
    for name in ("retranslate", "head_importance", "word_order"):
        original = getattr(ablate, name)

        def call(*args, _name=name, _original=original, **kwargs):
            threads[_name] = threading.current_thread().name
            return _original(*args, **kwargs)

        monkeypatch.setattr(ablate, name, call)
    fresh_client.post("/api/ablation", json={**TEXT, "off": ["enc.1.1"]})
    fresh_client.post("/api/ablation/importance", json=TEXT)
    fresh_client.post("/api/ablation/word-order", json=TEXT)
    assert set(threads) == {"retranslate", "head_importance", "word_order"}
    assert all(name.startswith("model") for name in threads.values()), threads


def test_the_scoring_is_admitted_like_every_model_call(fresh_client):
    """With the trace cached and the model thread taken by a request that fills the queue, the
    importance grid is refused at once (503 + Retry-After) instead of queueing behind it."""
    assert fresh_client.post("/api/trace", json=TEXT).status_code == 200
    engine = fresh_client.app.state.engine
    release, started = threading.Event(), threading.Event()

    def hold():
        started.set()
        release.wait(30)

    holder = threading.Thread(target=engine.run, args=(hold,), daemon=True)
    holder.start()
    assert started.wait(30)
    refused_at_the_door = []  # refused when admitted, not taken back later (as its deadline nears)
    admit = engine.admission.admit

    def watched(claim, now):
        try:
            admit(claim, now)
        except Busy:
            refused_at_the_door.append(claim.route)
            raise

    engine.admission.admit = watched
    engine.max_queue = 1
    try:
        answer = fresh_client.post("/api/ablation/importance", json=TEXT)
    finally:
        engine.max_queue = 16
        del engine.admission.admit
        release.set()
        holder.join(30)
    assert answer.status_code == 503 and "Retry-After" in answer.headers
    assert len(refused_at_the_door) == 1, refused_at_the_door
    assert fresh_client.post("/api/ablation/importance", json=TEXT).status_code == 200


def test_a_cancelled_scoring_stops_at_its_next_pass(tiny_translator, monkeypatch):
    """The client leaves while the batched scoring runs: it stops before its next pass (the
    engine's ``should_stop``, asked between passes), not at the end of the scoring."""
    monkeypatch.setattr(ablate, "LOGIT_BUDGET", 1)  # one row a pass: many passes
    engine = Engine(tiny_translator)
    trace = tiny_translator.trace(TEXT["text"])
    ticket = Ticket(timeout_s=60)
    layer = tiny_translator.model.decoder_layers[0]
    seen = []

    def leave(module, args):  # the test's own probe, counting the passes that start
        seen.append(engine.stop_checks)
        ticket.cancel("the client disconnected")

    hook = layer.register_forward_pre_hook(leave, prepend=True)
    token = CURRENT_TICKET.set(ticket)
    try:
        with pytest.raises(Cancelled):
            engine.run(ablate.head_importance, tiny_translator, trace)
    finally:
        CURRENT_TICKET.reset(token)
        hook.remove()
    assert len(seen) == 1 and engine.stop_checks == seen[0]  # no pass began after the cancel


@pytest.mark.parametrize(("body", "words"), [
    ({"off": ["cross.3.1"]}, "off: cross.3.1: the decoder has layers 1 to 2"),
    ({"off": ["enc.1.5"]}, "off: enc.1.5: each attention has heads 1 to 4"),
    ({"off": ["ffn.1"]}, "is not a part: write enc.L.H"),
    ({"off": [f"enc.1.{h}" for h in range(1, 5)] * 9}, f"at most {ablate.MAX_PARTS} parts"),
    ({"off": ["x" * 17]}, "off.0"),
    ({"off": "cross.1.1"}, "off"),
    ({"off": [], "mode": "half"}, "mode"),
])
def test_bad_ablation_requests_are_422_naming_the_rule(app_client, body, words):
    answer = app_client.post("/api/ablation", json={**TEXT, **body})
    assert answer.status_code == 422
    assert words in answer.json()["message"], answer.json()


@pytest.mark.parametrize(("path", "body", "words"), [
    ("/api/ablation/importance", {"mode": "max"}, "mode"),
    ("/api/ablation/importance", {"off": ["enc.1"]}, "off"),  # importance scores heads one by one
    ("/api/ablation/word-order", {"shuffle": 10_000}, "shuffle"),
])
def test_bad_importance_and_word_order_requests_are_422(app_client, path, body, words):
    answer = app_client.post(path, json={**TEXT, **body})
    assert answer.status_code == 422 and words in answer.json()["message"], answer.json()


def test_the_api_documents_the_limits(app_client):
    schema = app_client.get("/openapi.json").json()
    request = schema["components"]["schemas"]["AblationRequest"]["properties"]
    assert request["off"]["maxItems"] == ablate.MAX_PARTS
    # the loaded model's own layers and heads (2 + 2 layers, 4 heads): exactly what parse_part takes
    pattern = request["off"]["items"]["pattern"]
    config = app_client.app.state.translator.config
    assert pattern == ablate.part_pattern(config)
    for name in ("enc.2.4", "cross.2", "decffn.1", "pos.dec", "cross.3.1", "enc.1.5", "encffn.3"):
        valid = re.match(pattern, name) is not None
        assert valid == (name in ("enc.2.4", "cross.2", "decffn.1", "pos.dec")), name
        if valid:
            ablate.parse_part(name, config)
        else:
            with pytest.raises(InputError):
                ablate.parse_part(name, config)
    assert request["mode"]["enum"] == ["zero", "mean"]
    described = schema["paths"]["/api/ablation"]["post"]["responses"]["422"]["description"]
    assert "at most 32 parts" in described


def test_the_routes_answer_on_a_marian_model(tiny_marian):
    """A Hugging Face Marian model loaded with --model: the page and every route, its own sizes."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(model=str(tiny_marian), cache_size=4, access_log=False))
    with TestClient(app) as client:
        config = client.app.state.translator.config  # 2 + 2 layers, 2 heads
        html = client.get("/ablation").text
        assert len(re.findall(r'data-part="[a-z]+\.\d\.\d"', html)) == heads(config)
        answer = client.post("/api/ablation", json={**TEXT, "off": ["cross.2.2", "pos.enc"]})
        assert answer.status_code == 200 and answer.json()["parts"] == ["pos.enc", "cross.2.2"]
        grid = client.post("/api/ablation/importance", json=TEXT).json()
        assert len(grid["heads"]) == heads(config)
        order = client.post("/api/ablation/word-order", json=TEXT).json()
        assert order["without_positions"]["max_difference"] < 1e-4
        wrong = client.post("/api/ablation", json={**TEXT, "off": ["enc.1.3"]})
        assert wrong.status_code == 422 and "heads 1 to 2" in wrong.json()["message"]
