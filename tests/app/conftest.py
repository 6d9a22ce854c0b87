"""Fixtures for the web layer: one app on the tiny checkpoint, entered once per session."""

from __future__ import annotations

import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings

torch.set_num_threads(1)  # the tests share the machine with other work


@pytest.fixture(scope="session")
def app_client(tiny_checkpoint):
    app = create_app(Settings(checkpoint=tiny_checkpoint, cache_size=32))
    with TestClient(app) as client:  # the with block runs the lifespan (loads the model)
        yield client


@pytest.fixture(autouse=True)
def _no_cookie_outlives_its_test(request):
    """``app_client`` is shared by every file a worker runs, in whatever order pytest-xdist hands
    them out: a cookie one test was given (``lang`` from /lang/en) must not change the language of
    the next file's pages."""
    yield
    if "app_client" in request.fixturenames:
        request.getfixturevalue("app_client").cookies.clear()


@pytest.fixture()
def fresh_client(tiny_checkpoint, tiny_translator):
    """An app with an empty trace cache, sharing the already-loaded tiny translator."""
    app = create_app(Settings(checkpoint=tiny_checkpoint), translator=tiny_translator)
    with TestClient(app) as client:
        yield client
