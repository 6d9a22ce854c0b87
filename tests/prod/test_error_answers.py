"""One error shape everywhere (issue 59, item 5), through real HTTP (``python -m app``):
every JSON error is ``{"message": "...", "errors": [{"field", "message"}, ...]}`` (the field is
named once, in ``message``'s prefix, never again inside ``errors``); a page (an address a reader
opens in a browser) answers an error as a small HTML page in the reader's language, with the
same strict headers; each cause of an unreadable body has its own message; a URL too long for
the server gets 414 and header lines too large 431."""

from __future__ import annotations

import re
import socket

import httpx
import pytest

from app.security import CONTENT_SECURITY_POLICY
from tests.waiting import PATIENCE_S


def exchange(port: int, data: bytes) -> bytes:
    """Send ``data``, read the answer until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE_S) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def assert_shape(answer: dict) -> None:
    assert set(answer) == {"message", "errors"}, answer
    assert isinstance(answer["message"], str) and answer["message"], answer
    for error in answer["errors"]:
        assert set(error) == {"field", "message"}, answer
        assert not error["message"].startswith(error["field"] + ":"), answer  # named once
        assert answer["message"].startswith(error["field"] + ": ") or ";" in answer["message"]


@pytest.mark.parametrize(("method", "path", "status"), [
    ("GET", "/api/nope", 404), ("POST", "/api/nope", 404), ("GET", "/healthz/x", 404),
    ("PUT", "/api/trace", 405), ("GET", "/api/trace", 405), ("DELETE", "/healthz", 405),
    ("GET", "/static/nope.js", 404),
])
def test_json_errors_have_one_shape(live_server, method, path, status):
    response = httpx.request(method, live_server.url + path, timeout=PATIENCE_S)
    assert response.status_code == status
    assert response.headers["content-type"].startswith("application/json")
    assert_shape(response.json())
    if status == 405:
        assert response.headers["allow"]
        assert response.headers["allow"] in response.json()["message"]


@pytest.mark.parametrize(("path", "status", "words"), [
    ("/nope", 404, {"en": "no page at this address", "zh": "这个地址没有页面"}),
    ("/tour?step=12345", 422, {"en": "step", "zh": "step"}),
    ("/kv-cache/x", 404, {"en": "no page at this address", "zh": "这个地址没有页面"}),
])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_page_answers_an_html_error(live_server, path, status, words, lang):
    response = httpx.get(live_server.url + path, cookies={"lang": lang}, timeout=PATIENCE_S)
    assert response.status_code == status
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    html = response.text
    assert f'lang="{"zh-CN" if lang == "zh" else "en"}"' in html
    assert words[lang] in html, html[:2000]
    assert "<script>" not in html  # no inline script: the policy stays strict
    assert re.search(r'href="/"', html)  # a way on


def test_a_post_to_a_page_is_an_html_405(live_server):
    response = httpx.post(live_server.url + "/tour", timeout=PATIENCE_S)
    assert response.status_code == 405
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["allow"] == "GET"


TRANSLATE = b"POST /api/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize(("body", "words"), [
    (b'{"text": "hi", "seed": ' + b"1" * 4301 + b"}", "more than 4300 digits"),
    (b'{"text": "hi", "seed": -' + b"1" * 5000 + b"}", "more than 4300 digits"),
    (b"[" * 1000 + b"]" * 1000, "nested"),
    (b'{"text": "h\xffi"}', "not UTF-8"),
    (b'{"text": ', "not valid JSON"),
])
def test_each_unreadable_body_gets_its_own_message(live_server, body, words):
    response = httpx.post(live_server.url + "/api/translate", content=body,
                          headers={"content-type": "application/json"}, timeout=PATIENCE_S)
    assert response.status_code == 422, response.text[:300]
    answer = response.json()
    assert_shape(answer)
    assert words in answer["message"], answer
    assert answer["errors"][0]["field"] == "body"


def test_413_and_408_have_the_shape(live_server):
    big = exchange(live_server.port, TRANSLATE + b"Content-Length: 2000000\r\n\r\n" + b"x" * 2_000_000)
    assert big.startswith(b"HTTP/1.1 413"), big[:100]
    assert_shape(httpx.Response(413, content=big.split(b"\r\n\r\n", 1)[1]).json())
    slow = exchange(live_server.port, TRANSLATE + b"Content-Length: 100\r\n\r\n{\"text\": ")
    assert slow.startswith(b"HTTP/1.1 408"), slow[:100]
    answer = httpx.Response(408, content=slow.split(b"\r\n\r\n", 1)[1]).json()
    assert_shape(answer)
    assert answer["errors"] and answer["errors"][0]["field"] == "body"


@pytest.mark.parametrize("length", [70_000, 1_000_000])
def test_a_url_too_long_is_414(live_server, length):
    answer = exchange(live_server.port, b"GET /?text=" + b"a" * length + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 414"), answer[:100]
    assert b"content-security-policy" in answer
    assert_shape(httpx.Response(414, content=answer.split(b"\r\n\r\n", 1)[1]).json())


def test_a_long_but_reasonable_url_is_served(live_server):
    text = "猫" * 600  # the longest sentence box, percent-encoded: 5,400 bytes
    response = httpx.get(live_server.url + "/", params={"text": text}, timeout=PATIENCE_S)
    assert response.status_code == 200


def test_header_lines_too_large_are_431(live_server):
    answer = exchange(live_server.port, b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 1_000_000
                      + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 431"), answer[:100]
    assert_shape(httpx.Response(431, content=answer.split(b"\r\n\r\n", 1)[1]).json())
