"""app/middleware.py: bodies that are not JSON, the body limit, the one 500 path."""

from __future__ import annotations

from tests.app.test_api import SHORT


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
        monkeypatch.setattr(client.app.state.engine, "trace", explode)
        response = client.post("/api/trace", json=SHORT)
    assert response.status_code == 500
    assert "secret" not in response.text and "Traceback" not in response.text
    assert response.json() == {"message": "internal server error", "errors": []}


def test_malformed_json_is_a_422_about_the_body(app_client):
    response = app_client.post(
        "/api/translate", content=b'{"text": "hi"', headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "body"
    assert response.json()["message"].startswith("body: the request body is not valid JSON")
