"""Answers the app's middleware never sees still carry the security headers, and a body over the
limit is a readable 413 however it arrives (issue 30, item 7)."""

from __future__ import annotations

import socket

import pytest

from app.security import HEADERS
from bench.server import LiveServer
from tests.waiting import PATIENCE_S

REQUEST = (b"POST /api/trace HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")


def exchange(port: int, data: bytes) -> bytes:
    """Send all of ``data``, then read the answer until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE_S) as sock:
        sock.sendall(data)  # blocks, then fails, if the server stops reading the body
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def headers_of(answer: bytes) -> dict[bytes, bytes]:
    head = answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]
    return {name.lower(): value for name, value in (line.split(b": ", 1) for line in head)}


def assert_secured(answer: bytes) -> None:
    headers = headers_of(answer)
    for name, value in HEADERS:
        assert headers.get(name) == value, (name, answer[:300])


def test_a_request_that_is_not_http_gets_the_headers(live_server):
    answer = exchange(live_server.port, b"GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400")
    assert_secured(answer)
    assert b'"message"' in answer


def test_too_many_connections_is_a_503_with_the_headers(tiny_checkpoint):
    env = {"ITT_ACCESS_LOG": "false", "ITT_MAX_CONNECTIONS": "2"}
    with LiveServer(tiny_checkpoint, env=env) as server, \
            socket.create_connection(("127.0.0.1", server.port)):  # one idle connection open
        answer = exchange(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 503")
    assert_secured(answer)
    assert headers_of(answer)[b"retry-after"] == b"1"


@pytest.mark.parametrize("size", [1024 * 1024, 4 * 1024 * 1024])
def test_a_large_body_with_an_honest_content_length_gets_a_readable_413(live_server, size):
    answer = exchange(live_server.port, REQUEST + b"Content-Length: %d\r\n\r\n" % size
                      + b"x" * size)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert_secured(answer)
    assert b"limited to" in answer


def test_a_large_chunked_body_gets_a_readable_413(live_server):
    chunk = b"x" * 65536
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(16)) + b"0\r\n\r\n"
    answer = exchange(live_server.port, REQUEST + b"Transfer-Encoding: chunked\r\n\r\n" + body)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert_secured(answer)
