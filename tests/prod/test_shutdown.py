"""Graceful shutdown through real sockets (issue 59, item 7): after SIGTERM, a request that is
being answered is answered (with ``Connection: close``), and a request sent meanwhile on an idle
keep-alive connection is refused in plain HTTP (503, ``Connection: close``) — never met with a
reset or a silent close.

The request being answered is an interpret figure of a long sentence on the shipped model (a few
seconds); the test knows it is inside the app once the server asked for its body
(``Expect: 100-continue``), and that SIGTERM has been acted on once the port stops listening.
"""

from __future__ import annotations

import json
import signal
import socket

import pytest

from bench.server import LiveServer, listening_port
from model.translator import DEFAULT_CHECKPOINT
from tests.waiting import PATIENCE_S, wait_until

IDLE_CONNECTIONS = 6
SLOW_BODY = json.dumps({"text": "The teacher who lives near the old station reads a long book "
                                "about the history of the river to her students every morning "
                                "before the bus arrives at the school gate.",
                        "ig_steps": 256}).encode()


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response (status, headers, body) read to its Content-Length; ConnectionError
    when the server closes or resets the connection first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a response: {data!r}")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed in the middle of a response")
        body += chunk
    return status, headers, body


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()


@pytest.fixture
def server():
    with LiveServer(DEFAULT_CHECKPOINT, workers=1, env={"ITT_ACCESS_LOG": "false"}) as live:
        yield live


def test_requests_sent_during_shutdown_get_an_answer(server):
    idle = []
    for _ in range(IDLE_CONNECTIONS):  # keep-alive connections that have been used once
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE_S)
        sock.sendall(get("/healthz"))
        assert read_response(sock)[0] == 200
        idle.append(sock)

    slow = socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE_S)
    slow.sendall(b"POST /api/figures/interpret HTTP/1.1\r\nHost: localhost\r\n"
                 b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                 b"Content-Length: " + str(len(SLOW_BODY)).encode() + b"\r\n\r\n")
    assert slow.recv(1024).startswith(b"HTTP/1.1 100")  # the app is reading it
    slow.sendall(SLOW_BODY)

    server.process.send_signal(signal.SIGTERM)
    wait_until(lambda: listening_port(server.process.pid) is None, "the server stops listening")

    for sock in idle:  # the next request on each idle connection, sent during the shutdown
        sock.sendall(get("/healthz"))
        status, headers, body = read_response(sock)  # an answer, not a reset
        assert status in (200, 503), (status, body)
        if status == 503:
            assert headers.get("connection") == "close" and headers.get("retry-after") == "1"
            assert "stopping" in json.loads(body)["message"]
        sock.close()

    status, headers, _ = read_response(slow)  # the request in flight is answered in full
    assert status == 200 and headers.get("connection") == "close"
    slow.close()
    server.process.wait(timeout=PATIENCE_S)  # then it exits (uvicorn re-raises the SIGTERM)
    assert server.process.returncode in (0, -signal.SIGTERM)
