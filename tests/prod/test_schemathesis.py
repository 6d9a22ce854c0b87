"""Property-based API tests from /openapi.json (schemathesis): no 5xx, answers match the schema.

Runs against the ASGI app on the tiny checkpoint, at most 30 generated examples per operation.
The schema cannot say "English" or "at most 64 tokens" or "layer < the model's layer count", so a
422 is an acceptable answer to schema-valid data as well (it always names the field to fix).
"""

from __future__ import annotations

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from app.main import create_app
from app.settings import Settings

CONFIG = SchemathesisConfig.from_dict({
    "checks": {"positive_data_acceptance": {"expected-statuses": ["2XX", "422"]}},
})


@pytest.fixture(scope="module")
def api_schema(tiny_checkpoint):
    app = create_app(Settings(checkpoint=tiny_checkpoint, access_log=False))
    with TestClient(app):  # runs the lifespan: the model is loaded onto app.state
        yield schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
def test_api(case):
    case.call_and_validate()
