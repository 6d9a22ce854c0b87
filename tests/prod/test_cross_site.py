"""The model runs only for the page's own origin (issue 76, item 7), through real HTTP: a request
to a model endpoint that a browser marks as cross-site, or whose ``Origin`` is another host, is
refused in the one error shape before the model runs; a plain client sending neither header, and
the page itself, are served."""

from __future__ import annotations

from urllib.parse import urlencode

import httpx
import pytest

KV = "/api/kv-cache?" + urlencode({"text": "the cat sat", "steps": 8, "runs": 1})
TRACE = "/api/trace"
BODY = {"text": "the cat sat", "strategy": "greedy", "max_len": 16}


@pytest.mark.parametrize("headers", [
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},
    {"Origin": "http://evil.example"},
    {"Origin": "null"},
    {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
], ids=["sec-fetch-cross", "sec-fetch-same-site", "foreign-origin", "null-origin", "both"])
def test_a_cross_site_request_is_refused_in_the_one_shape(live_server, headers):
    for method, path, body in (("GET", KV, None), ("POST", TRACE, BODY)):
        answer = httpx.request(method, live_server.url + path, json=body, headers=headers,
                               timeout=30)
        assert answer.status_code == 403, (path, answer.status_code, answer.text)
        error = answer.json()
        assert error["errors"] == [{"field": "origin", "message": error["errors"][0]["message"]}]
        assert error["message"].startswith("origin: ")
        assert "model;" not in answer.headers.get("server-timing", "")  # the model never ran
        assert answer.headers["content-security-policy"]  # the security headers still go out


@pytest.mark.parametrize("headers", [
    {},
    {"Sec-Fetch-Site": "same-origin"},
    {"Sec-Fetch-Site": "none"},
    {"Origin": "same"},
], ids=["plain-client", "same-origin", "typed-address", "own-origin"])
def test_the_page_itself_and_a_plain_client_are_served(live_server, headers):
    if headers.get("Origin") == "same":
        headers = {"Origin": live_server.url, "Sec-Fetch-Site": "same-origin"}
    for method, path, body in (("GET", KV, None), ("POST", TRACE, BODY)):
        answer = httpx.request(method, live_server.url + path, json=body, headers=headers,
                               timeout=60)
        assert answer.status_code == 200, (path, answer.status_code, answer.text)


def test_pages_are_not_model_endpoints(live_server):
    """A link from another site to a page still opens it."""
    answer = httpx.get(live_server.url + "/", headers={"Sec-Fetch-Site": "cross-site"}, timeout=30)
    assert answer.status_code == 200
