"""Fixtures for the production checks: the app in-process (TestClient) and as a real server."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from bench.server import LiveServer


@pytest.fixture(scope="module")
def app(tiny_checkpoint):
    return create_app(Settings(checkpoint=tiny_checkpoint))


@pytest.fixture(scope="module")
def client(app):
    """Unhandled errors come back as responses (as a browser would see them), not exceptions."""
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="session")
def live_server(tiny_checkpoint):
    """``python -m app`` on a free loopback port, serving the tiny checkpoint: one for the run (the
    files that use it leave it healthy, and test_resilience.py checks that they do)."""
    env = {"ITT_ACCESS_LOG": "false", "ITT_HEADER_TIMEOUT_S": "2", "ITT_BODY_READ_TIMEOUT_S": "2"}
    with LiveServer(tiny_checkpoint, env=env) as server:
        yield server
