"""Security headers on every kind of response, no inline script, bounded requests, no tracebacks."""

from __future__ import annotations

import json
import logging
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from starlette.routing import Route

from app.main import create_app
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = {"text": "The cat sits on the mat."}
REQUIRED = {
    "content-security-policy",
    "x-content-type-options",
    "referrer-policy",
    "x-frame-options",
}


def get_routes(routes, prefix: str = "") -> list[tuple[str, Route]]:
    """(path, route) for every route, including those of routers included with a prefix."""
    found = []
    for route in routes:
        included = getattr(route, "original_router", None)  # FastAPI ≥ 0.16x wraps included routers
        if included is not None:
            found += get_routes(included.routes, prefix + route.include_context.prefix)
        elif isinstance(route, Route):
            found.append((prefix + route.path, route))
    return found


def html_pages(app) -> list[str]:
    """Every GET route that renders a page (no path parameters, not the API)."""
    paths = []
    for path, route in get_routes(app.routes):
        if "GET" not in (route.methods or ()):
            continue
        if "{" in path or path.startswith(("/api", "/vendor", "/healthz", "/openapi")):
            continue
        paths.append(path)
    return sorted(set(paths))


def assert_secure(response) -> None:
    missing = REQUIRED - set(response.headers)
    assert not missing, f"{response.request.method} {response.request.url.path} lacks {missing}"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] in ("no-referrer", "same-origin",
                                                   "strict-origin-when-cross-origin")
    csp = parse_csp(response.headers["content-security-policy"])
    assert csp["frame-ancestors"] in (["'none'"], ["'self'"])
    assert "'unsafe-inline'" not in csp.get("script-src", csp["default-src"])
    assert "'unsafe-eval'" not in csp.get("script-src", csp["default-src"])
    for directive, sources in csp.items():
        for source in sources:
            # only our own origin: no scheme-qualified hosts, no wildcards, no bare hosts
            assert not re.match(r"^(https?:|wss?:|\*|[a-z0-9-]+\.[a-z])", source), (directive, source)


def parse_csp(header: str) -> dict[str, list[str]]:
    policy = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            policy[words[0]] = words[1:]
    return policy


def test_pages_exist(app):
    pages = html_pages(app)
    assert "/" in pages and "/attention" in pages and "/decode" in pages


def test_headers_on_pages(client, app):
    for path in html_pages(app):
        response = client.get(path)
        assert response.status_code == 200, path
        assert_secure(response)


def test_headers_on_api_static_and_docs(client):
    responses = [
        client.get("/healthz"),
        client.get("/api/model"),
        client.post("/api/trace", json=SENTENCE),
        client.post("/api/translate", json=SENTENCE),
        client.get("/openapi.json"),
        client.get("/vendor/plotly.min.js"),
        client.get("/vendor/swagger-ui-bundle.js"),
        client.get("/vendor/swagger-ui.css"),
    ]
    static = sorted((ROOT / "static").rglob("*.*"))
    assert static
    responses += [client.get("/" + str(path.relative_to(ROOT))) for path in static[:5]]
    for response in responses:
        assert response.status_code == 200, response.request.url
        assert_secure(response)


def test_headers_on_errors(client):
    cases = [
        (client.get("/no-such-page"), 404),
        (client.get("/static/no-such-file.js"), 404),
        (client.delete("/api/trace"), 405),
        (client.post("/api/trace", content=b"{not json", headers={"content-type": "application/json"}),
         422),
        (client.post("/api/trace", json={"text": "x" * 5000}), 422),
        (client.post("/api/trace", content=b"x" * 100_000), 413),
    ]
    for response, status in cases:
        assert response.status_code == status, response.request.url
        assert_secure(response)


@pytest.fixture(scope="module")
def failing_client(tiny_checkpoint):
    app = create_app(Settings(checkpoint=tiny_checkpoint, access_log=False))

    @app.get("/api/boom")
    def boom():
        raise RuntimeError("secret detail /home/user/model.py line 42")

    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def test_server_error_is_plain_and_secured(failing_client, caplog):
    with caplog.at_level(logging.ERROR, logger="app"):
        response = failing_client.get("/api/boom")
    assert response.status_code == 500
    assert response.json() == {"message": "internal server error", "errors": []}
    assert "secret" not in response.text and "Traceback" not in response.text
    assert_secure(response)
    assert "secret detail" in caplog.text  # the operator still gets the traceback in the log


def test_no_tracebacks_in_client_errors(client):
    bodies = [b"{", b"[]", b"null", b'{"text": 1}', b'{"text": "a", "extra": 1}',
              "\udcff".encode("utf-8", "surrogatepass"), b"\x00\xff" * 10]
    for body in bodies:
        response = client.post("/api/trace", content=body, headers={"content-type": "application/json"})
        assert 400 <= response.status_code < 500, body
        assert "Traceback" not in response.text and 'File "' not in response.text


class ScriptCollector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts: list[dict] = []
        self.handlers: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "script":
            self.scripts.append(attributes)
        self.handlers += [(tag, name) for name in attributes if name.startswith("on")]
        for name in ("href", "src", "action"):
            if (attributes.get(name) or "").strip().lower().startswith("javascript:"):
                self.handlers.append((tag, name))


def test_pages_have_no_inline_script(client, app):
    """Every <script> is a same-origin file or inert JSON data; no on* attributes, no javascript:."""
    for path in html_pages(app):
        collector = ScriptCollector()
        collector.feed(client.get(path).text)
        assert not collector.handlers, (path, collector.handlers)
        for script in collector.scripts:
            if "src" in script:
                assert script["src"].startswith("/") and not script["src"].startswith("//"), script
            else:
                assert script.get("type") == "application/json", (path, script)


def test_query_text_is_escaped(client, app):
    payload = '"><svg onload=alert(1)><script>alert(1)</script>'
    for path in html_pages(app):
        html = client.get(path, params={"text": payload}).text
        assert "<svg onload" not in html and "<script>alert" not in html, path


def test_body_size_limit(client):
    limit = Settings().max_body_bytes
    assert client.post("/api/trace", content=b"x" * (limit + 1),
                       headers={"content-type": "application/json"}).status_code == 413

    def chunks():  # no Content-Length: the limit must still hold
        for _ in range(limit // 1000 + 2):
            yield b" " * 1000

    response = client.post("/api/trace", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert "limited" in response.json()["message"]


@pytest.mark.parametrize("change", [
    {"text": "a" * 601},
    {"beam_size": 9, "strategy": "beam"},
    {"max_len": 129},
    {"temperature": 0, "strategy": "sample"},
    {"temperature": 1e-38, "strategy": "sample"},  # logits / T overflowed: a 500 before
    {"top_k": 100_000, "strategy": "sample"},
    {"forced_prefix": ["猫"] * 129},
])
def test_compute_is_bounded(client, change):
    body = {**SENTENCE, **change}
    response = client.post("/api/trace", json=body)
    assert response.status_code == 422, body
    assert response.json()["message"]


def test_token_cap(client):
    response = client.post("/api/trace", json={"text": "x " * 149 + "x"})
    assert response.status_code == 422
    assert "128" in response.json()["message"]


def test_request_time_limit(tiny_checkpoint):
    app = create_app(Settings(checkpoint=tiny_checkpoint, request_timeout_s=0.001, access_log=False))
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post("/api/trace", json={**SENTENCE, "strategy": "beam", "beam_size": 8,
                                                   "max_len": 128})
    assert response.status_code == 503
    assert "longer than" in response.json()["message"]
    assert int(response.headers["retry-after"]) >= 1
    assert_secure(response)


@pytest.mark.parametrize("path", ["/api/figures/decode", "/api/trace", "/api/translate",
                                  "/api/figures/pipeline", "/api/xray/view"])
@pytest.mark.parametrize("temperature", [1e-38, 5.1e-230, 1e-7])
def test_tiny_temperatures_are_a_422_never_a_500(client, path, temperature):
    body = {**SENTENCE, "strategy": "sample", "temperature": temperature}
    response = client.post(path, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "temperature"


@pytest.mark.parametrize("step", ["²", "٣", "①", "1²", "-1", "99"])
def test_tour_step_in_any_digits_is_never_a_500(client, step):
    response = client.get("/tour", params={"step": step})
    assert response.status_code in (200, 422), step


def test_head_on_pages_answers_like_get_without_a_body(client, app):
    for path in [*html_pages(app), "/healthz", "/api/model", "/static/css/app.css"]:
        response = client.head(path)
        assert response.status_code == 200, path
        assert response.content == b""
        assert_secure(response)
    assert client.head("/api/trace").status_code == 405  # POST only


def test_no_paths_of_the_training_machine(tiny_checkpoint, tiny_translator, monkeypatch):
    history = {**tiny_translator.history, "settings": {
        "data": "../shared/data", "out": "/work/main/model/checkpoints", "work": "runs/train",
        "init": "C:\\runs\\ckpt_v1", "warmup": 1200, "clip": 1.0}}
    monkeypatch.setattr(tiny_translator, "history", history)
    app = create_app(Settings(checkpoint=tiny_checkpoint, access_log=False), translator=tiny_translator)
    with TestClient(app) as client:
        for path in ("/api/training", "/api/model"):
            text = client.get(path).text
            for leak in ("/work/main", "../shared", "runs/train", "ckpt_v1"):
                assert leak not in text, (path, leak)
        assert client.get("/api/training").json()["settings"] == {"warmup": 1200, "clip": 1.0}


def test_access_log_and_server_timing(client):
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Collect()
    logger = logging.getLogger("app.access")
    logger.addHandler(handler)
    try:
        response = client.post("/api/trace", json={"text": "Where is the station?"})
        client.get("/healthz")
    finally:
        logger.removeHandler(handler)
    timing = response.headers["server-timing"]
    assert re.search(r"model;dur=[0-9.]+", timing) and re.search(r"app;dur=[0-9.]+", timing)
    assert re.search(r"queue;dur=[0-9.]+", timing)
    entries = [json.loads(line) for line in records]
    trace = next(e for e in entries if e["path"] == "/api/trace")
    assert trace["method"] == "POST" and trace["status"] == 200
    assert trace["duration_ms"] > 0 and trace["model_ms"] >= 0 and trace["queue_ms"] >= 0
    health = next(e for e in entries if e["path"] == "/healthz")
    assert "model_ms" not in health and health["status"] == 200
