"""Property-based API tests from /openapi.json (schemathesis): no 5xx, answers match the schema.

Runs against the ASGI app on the tiny checkpoint, at most 30 generated examples per operation.
The schema cannot say "English" or "at most 128 tokens" or "layer < the model's layer count", so a
422 is an acceptable answer to schema-valid data as well (it always names the field to fix).

The operations are generated with schemathesis' own Hypothesis strategies and checked one
operation per test, without its pytest plugin (whose fixture-based parametrisation reaches into
pytest internals that pytest 9.2 removed).
"""

from __future__ import annotations

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis.config import SchemathesisConfig

from app.main import create_app
from app.settings import Settings

CONFIG = SchemathesisConfig.from_dict({
    "checks": {"positive_data_acceptance": {"expected-statuses": ["2XX", "422"]}},
})


def _operation_labels() -> list[str]:
    """Every operation of the app's schema; building the schema needs no model."""
    app = create_app(Settings(access_log=False))
    schema = schemathesis.openapi.from_dict(app.openapi())
    return sorted(result.ok().label for result in schema.get_all_operations())


@pytest.fixture(scope="module")
def api_schema(tiny_checkpoint):
    app = create_app(Settings(checkpoint=tiny_checkpoint, access_log=False))
    with TestClient(app):  # runs the lifespan: the model is loaded onto app.state
        yield schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)


def test_every_operation_is_covered():
    """The schema lists the API's operations; an empty list would make the test below vacuous."""
    labels = _operation_labels()
    assert any(label.startswith("POST /api/trace") for label in labels), labels
    assert len(labels) >= 5


@pytest.mark.parametrize("label", _operation_labels())
def test_api(api_schema, label):
    operation = next(r.ok() for r in api_schema.get_all_operations() if r.ok().label == label)

    @given(case=operation.as_strategy())
    @settings(max_examples=30, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    def check(case):
        case.call_and_validate()

    check()
