"""Property-based API tests from /openapi.json (schemathesis), with every check it has:
no 5xx, answers that match the schema, schema-valid data accepted (``positive_data_acceptance``)
and schema-invalid data rejected (``negative_data_rejection``), with no status allowed beyond
schemathesis' defaults. Runs against the ASGI app on the tiny checkpoint; every case schemathesis
generates is sent, as generated.

The schema states every rule a JSON schema can express: "at least one Latin letter" as a
``pattern`` on every English field, a Chinese character on ``reference``, one English word on the
coreference words, an index's largest possible value as its maximum (a query row or a position
at most 128: 128 source tokens and <eos>; a decoding step at most 127), the x-ray's
decoder-only blocks as an if/then on ``side``, and, filled in from the loaded model when
/openapi.json is built, the maxima of ``layer`` / ``head``, the ablation's part names and the
Chinese vocabulary as one pattern for ``forced_prefix`` items (one character class: an enum of
4,000 tokens made the coverage phase send ~3,900 cases to each of three operations).

The rule no JSON schema can state is in ``RULES``: each names the field and the message of the
422 that applies it, why no schema can say it, and the words of the operation's 422 description
that say it (``test_every_rule_is_named_in_its_operations_description``). A schema-valid case
answered with exactly such 422s is checked with every check but ``positive_data_acceptance``;
any other 422 to a schema-valid case fails the test, as does a negative case (a wrong type, a
missing or unknown field, a value outside a limit) answered with anything but a 4xx. Every GET
case is also sent as HEAD: the same status and no body, never a 5xx.

Cases come from schemathesis' own generators, one operation per test, without its pytest plugin
(whose fixture-based parametrisation reaches into pytest internals that pytest 9.2 removed): its
Hypothesis strategies (the fuzzing phase, positive and negative) and its coverage phase (boundary
values, type mutations, missing fields, methods the operation lacks → 405 with Allow).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import positive_data_acceptance

from app.main import create_app
from app.settings import Settings

CONFIG = SchemathesisConfig.from_dict({})  # every check on, with its default statuses
EXAMPLES = {GenerationMode.POSITIVE: 25, GenerationMode.NEGATIVE: 15}


@dataclass(frozen=True)
class Rule:
    """A rule the server applies that no JSON schema can state."""

    name: str
    paths: tuple[str, ...]  # the operations that apply it ("*": every one with ``field``)
    field: str
    message: str  # a regular expression the 422's message for ``field`` matches
    documented: str  # words of the operation's 422 description that state it
    why: str  # why /openapi.json cannot say it


RULES = [
    Rule("tokens", ("*",), "text", r"^text is \d+ tokens long",
         "at most 128 tokens once split",
         "a limit in the model's English sub-word tokens: each digit or punctuation mark is a "
         "token of its own, so a maxLength that guaranteed it (~127 characters) would refuse the "
         "long sentences the model reads"),
]
# Every other rule no schema states is no refusal (issue 59, item 6): a forced prefix longer than
# max_len raises max_len, a one-word text has one word order, a pronoun may be its referent, heads
# that do not divide d_model or too many active experts get a warning; an index past the end of
# the request's own sentence (a step, a query row, a position, a layer of the other stack, a word
# not in the text) is 404 (the request is valid, what it points at does not exist), which
# positive_data_acceptance accepts and each operation's 404 description states.


def rules_for(path: str) -> list[Rule]:
    return [rule for rule in RULES if "*" in rule.paths or path in rule.paths]


def applied_rules(path: str, response) -> list[Rule] | None:
    """The rules a 422 applied, if every error it names is one of ``path``'s rules; else None."""
    if response.status_code != 422:
        return None
    errors = response.json().get("errors") or [{"field": "", "message": ""}]
    applied = []
    for error in errors:
        rule = next((r for r in rules_for(path) if r.field in ("*", error["field"])
                     and re.search(r.message, error["message"])), None)
        if rule is None:
            return None
        applied.append(rule)
    return applied


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
    """The app on the tiny checkpoint, its lifespan run once for the module by a TestClient; the
    cases reach it through one schemathesis ASGI client that is never entered, so schemathesis
    starts no lifespan of its own (its pytest plugin ends every such lifespan after each test, so
    each of the 79 tests loaded and warmed the model again: ~0.4 s each)."""
    app = create_app(Settings(checkpoint=tiny_checkpoint, access_log=False))
    with TestClient(app) as client:  # runs the lifespan: the model is loaded onto app.state
        schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)
        yield app, client, schema, asgi.get_client(app)


def test_every_rule_is_named_in_its_operations_description(served):
    """What the test excludes from positive_data_acceptance is what /openapi.json tells a client
    in the operation's 422 description."""
    app, _, _, _ = served
    spec = app.openapi()
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
            ref = body.get("schema", {}).get("$ref", "")
            fields = set(spec["components"]["schemas"].get(ref.rsplit("/", 1)[-1], {})
                         .get("properties", {}))
            fields |= {p["name"] for p in operation.get("parameters", [])}
            described = operation.get("responses", {}).get("422", {}).get("description", "")
            for rule in RULES:
                if path in rule.paths or ("*" in rule.paths and rule.field in fields):
                    assert rule.documented in described, (method, path, rule.name, described)


def test_every_operation_is_covered():
    """The schema lists the API's operations; an empty list would make the test below vacuous."""
    labels = list(_operations())
    assert any(label.startswith("POST /api/trace") for label in labels), labels
    assert len(labels) >= 5


@pytest.mark.parametrize(("label", "mode"), _cases())
def test_api(served, label, mode):
    _, client, schema, session = served
    operation = next(r.ok() for r in schema.get_all_operations() if r.ok().label == label)

    @given(case=operation.as_strategy(mode))
    @settings(max_examples=EXAMPLES[mode], deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    def check(case):
        send(client, session, case)

    check()


@pytest.mark.parametrize("label", list(_operations()))
def test_api_coverage(served, label):
    """Schemathesis' coverage phase: boundary values (every limit, its neighbours outside it),
    missing and wrongly typed fields, and methods the operation does not have (405 + Allow)."""
    _, client, schema, session = served
    operation = next(r.ok() for r in schema.get_all_operations() if r.ok().label == label)
    cases = schema.iter_coverage_cases(
        operation, generation_modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
        generation_config=schema.config.generation_for(operation=operation))
    for case in cases:
        send(client, session, case)


def send(client: TestClient, session, case) -> None:
    """Every check on the answer (a schema-valid case refused by exactly its operation's RULES:
    every check but positive_data_acceptance); a GET is also sent as HEAD: the same status, no
    body."""
    response = case.call(session=session)
    excluded = []
    if case.meta.generation.mode is GenerationMode.POSITIVE \
            and applied_rules(case.operation.path, response):
        excluded = [positive_data_acceptance]
    case.validate_response(response, excluded_checks=excluded)
    if case.method == "GET":
        sent = case.as_transport_kwargs()
        head = client.head(case.formatted_path, params=sent.get("params"))
        assert (head.status_code, head.content) == (response.status_code, b""), sent
