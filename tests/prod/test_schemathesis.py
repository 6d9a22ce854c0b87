"""Property-based API tests from /openapi.json (schemathesis), with every check it has:
no 5xx, answers that match the schema, schema-valid data accepted (``positive_data_acceptance``)
and schema-invalid data rejected (``negative_data_rejection``), with no status allowed beyond
schemathesis' defaults. Runs against the ASGI app on the tiny checkpoint.

The schema states every rule a JSON schema can express: "at least one Latin letter" as a
``pattern`` on every English field, a Chinese character on ``reference``, one English word on the
coreference words, and, filled in from the loaded model when /openapi.json is built, the maxima of
``layer`` / ``head`` and the Chinese vocabulary as the enum of ``forced_prefix`` items. A few rules
cannot be a JSON schema, because they depend on the tokenizer, on another field or on the
translation itself; each operation's 422 description lists its own, and ``keep_documented_rules``
makes positive cases keep exactly those rules, each on its operation only, and nothing else:

- text ≤ 128 tokens: ``maxLength`` cannot say it. 600 characters of ordinary words are ≤ 128
  tokens, but a digit or punctuation mark is one token each, so any maxLength that guarantees it
  would be ~127 characters and would refuse the long sentences the model is trained on. A positive
  case whose text the server's tokenizer makes longer is discarded (``assume``); few are.
- forced_prefix ≤ max_len (two fields): a positive case's prefix is cut to max_len.
- step / query / position below the translation's own length: a positive case's index is taken
  modulo that length, read from the same engine the request then hits (a cached trace).
- xray blocks that exist only in the decoder, asked with side=encoder: discarded.
- coreference words must occur in the sentence: a positive case's words are appended to its text
  (still within maxLength); a pronoun that is the referent's own occurrence is discarded.
- /api/scale: heads must divide d_model, active_experts ≤ experts: d_model is rounded down to a
  multiple of heads, active_experts capped at experts.
- /api/ablation/word-order needs two words to shuffle: a positive case with fewer is discarded.

Anything else a positive case gets 422 for fails the test, as does a negative case (a wrong type,
a missing or unknown field, a value outside a limit) answered with anything but a 4xx. Every GET
case is also sent as HEAD: the same status and no body, never a 5xx.

Cases come from schemathesis' own generators, one operation per test, without its pytest plugin
(whose fixture-based parametrisation reaches into pytest internals that pytest 9.2 removed): its
Hypothesis strategies (the fuzzing phase, positive and negative) and its coverage phase (boundary
values, type mutations, missing fields, methods the operation lacks → 405 with Allow).
"""

from __future__ import annotations

import os
import unicodedata

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, assume, given, settings
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig

from app.main import create_app
from app.pages.coreference import ONE_WORD
from app.pages.scale import ScaleQuery
from app.schemas import MAX_TEXT_CHARS, TraceRequest
from app.settings import Settings
from model.explain.ablation import word_spans
from model.explain.xray import DECODER_ONLY
from model.translator import InputError

CONFIG = SchemathesisConfig.from_dict({})  # every check on, with its default statuses
EXAMPLES = {GenerationMode.POSITIVE: 25, GenerationMode.NEGATIVE: 15}
# The coverage phase's ~1,300 positive cases each run the model (~130 s for all on two cores):
# every fifth is sent, unless ITT_TEST_FULL_COVERAGE=1. Its negative cases are all sent.
POSITIVE_COVERAGE_EVERY = 1 if os.environ.get("ITT_TEST_FULL_COVERAGE") == "1" else 5


def _operations() -> dict[str, bool]:
    """Every operation of the app's schema (building it needs no model): whether it takes input."""
    app = create_app(Settings(access_log=False))
    schema = schemathesis.openapi.from_dict(app.openapi())
    operations = [result.ok() for result in schema.get_all_operations()]
    return {op.label: bool(op.query or op.body) for op in sorted(operations, key=lambda o: o.label)}


def _cases() -> list:
    """(operation, mode) pairs: negative data only where there is input to make invalid."""
    return [pytest.param(label, mode, id=f"{label}-{mode.value}")
            for label, has_input in _operations().items()
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
            if has_input or mode is GenerationMode.POSITIVE]


@pytest.fixture(scope="module")
def served(tiny_checkpoint):
    app = create_app(Settings(checkpoint=tiny_checkpoint, access_log=False))
    with TestClient(app) as client:  # runs the lifespan: the model is loaded onto app.state
        yield app, client, schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)


def keep_documented_rules(app, case) -> bool:
    """Make a positive case keep the rules its operation's 422 description states and its schema
    cannot (see the module docstring); False where no small change can (the case is not sent)."""
    path = case.operation.path
    data = dict(case.body if case.operation.method.upper() == "POST" else case.query or {})
    if path == "/api/scale":
        scale = ScaleQuery.model_validate(data)
        data["d_model"] = scale.heads * max(1, scale.d_model // scale.heads)
        data["active_experts"] = min(scale.active_experts, scale.experts)
    if path == "/api/coreference":
        words = " " + " ".join(data[k].strip() for k in ("referent", "pronoun", "distractor")
                               if ONE_WORD.search(data.get(k, "")))
        data["text"] = data["text"][: MAX_TEXT_CHARS - len(words)] + words
    if "text" in data:
        try:
            app.state.translator.source_ids(_as_read(data["text"]))
        except InputError:
            return False  # more than 128 tokens
    if "forced_prefix" in data:
        data["forced_prefix"] = data["forced_prefix"][: int(data.get("max_len", 128))]
    if path == "/api/xray/block" and data["side"] == "encoder" and data["block"] in DECODER_ONLY:
        return False
    if path == "/api/ablation/word-order":
        ids = app.state.translator.source_ids(_as_read(data["text"]))
        if len(word_spans(app.state.translator.source_tokens(ids), ids)) < 2:
            return False
    if path in ("/api/figures/interpret", "/api/figures/attention-detail", "/api/xray/block"):
        request = TraceRequest.model_validate({k: v for k, v in data.items()
                                               if k in TraceRequest.model_fields})
        trace, _ = app.state.engine.trace(request)
        if path == "/api/figures/interpret":
            data["step"] = int(data.get("step", 0)) % len(trace.steps)
        elif path == "/api/figures/attention-detail":
            rows = trace.source_tokens if data["kind"] == "encoder" else trace.decoder_input
            data["query"] = int(data.get("query", 0)) % len(rows)
        elif data["side"] == "encoder":
            data["position"] = int(data.get("position", 0)) % len(trace.source_tokens)
        else:
            data["position"] = int(data.get("position", 0)) % max(1, len(trace.steps))
    if path == "/api/coreference":
        tokens = app.state.translator.english.tokenize(_as_read(data["text"]))
        pieces = [app.state.translator.english.tokenize(data[k]) for k in ("referent", "pronoun")]
        # the pronoun must be another occurrence than the referent's first one
        if pieces[0] == pieces[1] and _count(tokens, pieces[0]) < 2:
            return False
    if case.operation.method.upper() == "POST":
        case.body = data
    else:
        case.query = data
    return True


def _as_read(text: str) -> str:
    """The text as the server reads it (NFC, whitespace collapsed), whatever else it breaks."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def _count(tokens: list[str], pieces: list[str]) -> int:
    n = len(pieces)
    return sum(tokens[i : i + n] == pieces for i in range(len(tokens) - n + 1))


def test_every_operation_is_covered():
    """The schema lists the API's operations; an empty list would make the test below vacuous."""
    labels = list(_operations())
    assert any(label.startswith("POST /api/trace") for label in labels), labels
    assert len(labels) >= 5


@pytest.mark.parametrize(("label", "mode"), _cases())
def test_api(served, label, mode):
    app, client, schema = served
    operation = next(r.ok() for r in schema.get_all_operations() if r.ok().label == label)

    @given(case=operation.as_strategy(mode))
    @settings(max_examples=EXAMPLES[mode], deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    def check(case):
        assume(mode is GenerationMode.NEGATIVE or keep_documented_rules(app, case))
        send(client, case)

    check()


@pytest.mark.parametrize("label", list(_operations()))
def test_api_coverage(served, label):
    """Schemathesis' coverage phase: boundary values (every limit, its neighbours outside it),
    missing and wrongly typed fields, and methods the operation does not have (405 + Allow)."""
    app, client, schema = served
    operation = next(r.ok() for r in schema.get_all_operations() if r.ok().label == label)
    cases = schema.iter_coverage_cases(
        operation, generation_modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
        generation_config=schema.config.generation_for(operation=operation))
    positive = 0
    for case in cases:
        if case.meta.generation.mode is GenerationMode.POSITIVE and case.method == operation.method.upper():
            positive += 1
            if (positive - 1) % POSITIVE_COVERAGE_EVERY or not keep_documented_rules(app, case):
                continue
        send(client, case)


def send(client: TestClient, case) -> None:
    """Every check on the answer; a GET is also sent as HEAD: the same status, no body."""
    response = case.call_and_validate()
    if case.method == "GET":
        sent = case.as_transport_kwargs()
        head = client.head(case.formatted_path, params=sent.get("params"))
        assert (head.status_code, head.content) == (response.status_code, b""), sent
