"""No input makes the app answer 500 (issue 30, item 3): every page and every endpoint, every
query parameter any of them reads and every body field, given values built to break a parser —
numbers too long for ``int()`` (Python refuses more than 4,300 digits), infinities, NaN, NUL,
non-ASCII digits that pass ``str.isdigit()``, huge strings, bytes that are not UTF-8."""

from __future__ import annotations

import httpx
import pytest
from fastapi.testclient import TestClient
from starlette.routing import Route

from app.main import create_app
from app.settings import Settings

HUGE = "9" * 5000
VALUES = [HUGE, "-" + HUGE, "0" * 5000 + "1", "1e999", "-1e999", "nan", "inf", "\x00", "é" * 3000,
          "x" * 20000, "0x10", "1_000", " 1", "１", "٣", "²", "", "[]", "{}", "true", "1.5", "-1"]
LONG = [value for value in VALUES if len(value) > 2000]
# Every query parameter a page or endpoint reads (request.query_params or a query model).
PARAMS = ["text", "steps", "step", "runs", "layer", "head", "pronoun", "referent", "distractor",
          "reference", "next", "heads", "d_model", "n_layers", "d_ff", "vocab", "experts",
          "active_experts", "biases", "lang", "off", "mode", "shuffle", "unknown"]
# Every body field of a POST endpoint; each is sent as a raw JSON number or string.
FIELDS = ["text", "strategy", "temperature", "top_k", "top_p", "beam_size", "max_len", "seed",
          "forced_prefix", "layer", "head", "query", "step", "ig_steps", "position", "positions",
          "side", "block", "kind", "reference", "off", "mode", "shuffle"]


def routes(items) -> list[Route]:
    """Every route of the app, through included routers."""
    out = []
    for item in items:
        if hasattr(item, "original_router"):
            out += routes(item.original_router.routes)
        elif isinstance(item, Route):
            out.append(item)
    return out


@pytest.fixture(scope="module")
def hostile(tiny_checkpoint):
    app = create_app(Settings(checkpoint=tiny_checkpoint, access_log=False))
    with TestClient(app, raise_server_exceptions=False) as client:
        # /vendor/* are files (plotly.js, Swagger UI): they read no parameter, and are 3 MB each
        found = [(route.path.replace("{code}", "en"), method) for route in routes(app.routes)
                 for method in sorted(route.methods or ())
                 if method != "HEAD" and not route.path.startswith("/vendor/")]
        yield client, found


def test_every_route_is_tried(hostile):
    _, found = hostile
    paths = {path for path, _ in found}
    assert {"/", "/kv-cache", "/tour", "/api/kv-cache", "/api/trace", "/api/scale"} <= paths
    assert len(found) >= 30


def json_value(value: str) -> str:
    """The value as it would be typed into JSON: bare if it reads as a number, else a string."""
    if value[:1] in "-0123456789" and value.strip("-0123456789e.") == "":
        return value
    return '"' + value.replace("\\", "").replace('"', "").replace("\x00", "\\u0000") + '"'


def test_no_query_or_body_gets_a_500(hostile):
    """Each value in every parameter at once (a query model checks every field, a page reads
    each one it uses), and each overlong number or string in each parameter alone."""
    client, found = hostile
    # ~5,800 requests: sent from one coroutine on the test client's event loop (its lifespan
    # started the app), ~35 % less CPU than TestClient's thread hop per request
    transport = httpx.ASGITransport(app=client.app, raise_app_exceptions=False)

    async def send_all() -> list[tuple]:
        failures = []
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            for path, method in found:
                if method == "GET":
                    # a URL holds ~64 KB: all parameters at once get the long values cut short
                    tries = [{name: value[:300] for name in PARAMS} for value in VALUES]
                    tries += [{name: value} for name in PARAMS for value in (HUGE, *LONG)]
                    for params in tries:
                        response = await http.get(path, params=params)
                        if response.status_code >= 500:
                            failures.append((method, path, sorted(params)[:3], response.status_code))
                    response = await http.get(path + "?steps=%ff%fe&text=%ff&step=%c0%af")  # not UTF-8
                    if response.status_code >= 500:
                        failures.append((method, path, "not UTF-8", response.status_code))
                else:
                    tries = [{name: value for name in FIELDS} for value in VALUES]
                    tries += [{"text": "a cat", name: value} for name in FIELDS for value in VALUES[:3]]
                    for fields in tries:
                        body = "{" + ", ".join(f'"{k}": {json_value(v)}' for k, v in fields.items()) + "}"
                        response = await http.post(path, content=body.encode(),
                                                   headers={"content-type": "application/json"})
                        if response.status_code >= 500:
                            failures.append((method, path, sorted(fields)[:3], response.status_code))
        return failures

    failures = client.portal.call(send_all)
    assert not failures, failures
