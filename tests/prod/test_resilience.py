"""The real server keeps answering after malformed JSON, huge bodies and clients that misbehave."""

from __future__ import annotations

import socket
import time

import httpx

SENTENCE = {"text": "The cat sits on the mat."}


def healthy(server) -> bool:
    return httpx.get(server.url + "/healthz", timeout=5).status_code == 200


def raw(server, data: bytes, close_after: float = 0.0, read: bool = False) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(data)
        if close_after:
            time.sleep(close_after)
        if not read:
            return b""
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            pass
        return b"".join(chunks)


def test_malformed_json(live_server):
    for body in (b"{", b'{"text": ', b"\xff\xfe", b"[" * 5000, b'{"text": "a"' + b" " * 10):
        response = httpx.post(live_server.url + "/api/trace", content=body,
                              headers={"content-type": "application/json"}, timeout=10)
        assert response.status_code == 422, body[:20]
        assert "Traceback" not in response.text
    assert healthy(live_server)


def test_huge_bodies(live_server):
    big = b"x" * (5 * 1024 * 1024)
    response = httpx.post(live_server.url + "/api/trace", content=big,
                          headers={"content-type": "application/json"}, timeout=30)
    assert response.status_code == 413
    # a Content-Length that promises a huge body: refused before any of it is read
    answer = raw(live_server, b"POST /api/trace HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              b"Content-Length: 1000000000\r\n\r\n{", read=True)
    assert answer.startswith(b"HTTP/1.1 413")
    assert healthy(live_server)


def test_vanished_and_slow_clients(live_server):
    # half a request line, half the headers, half a body: each client disappears
    raw(live_server, b"GET /heal")
    raw(live_server, b"POST /api/trace HTTP/1.1\r\nHost: x\r\nContent-Le")
    raw(live_server, b"POST /api/trace HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 200\r\n\r\n{\"text\": \"The ca")
    # a client that asks for a translation and leaves before the answer
    raw(live_server, b"POST /api/trace HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 35\r\n\r\n{\"text\": \"Where is the station?\"}")
    # not HTTP at all
    answer = raw(live_server, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64 + b"\r\n\r\n",
                 read=True)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 400")
    # slow clients keep their connections open while others are served
    slow = [socket.create_connection(("127.0.0.1", live_server.port)) for _ in range(20)]
    try:
        for sock in slow:
            sock.sendall(b"POST /api/trace HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        started = time.perf_counter()
        response = httpx.post(live_server.url + "/api/translate", json=SENTENCE, timeout=30)
        assert response.status_code == 200 and response.json()["translation"] is not None
        assert time.perf_counter() - started < 10
    finally:
        for sock in slow:
            sock.close()
    assert healthy(live_server)
    assert live_server.alive()


def test_many_connections_opened_and_dropped(live_server):
    for _ in range(200):
        socket.create_connection(("127.0.0.1", live_server.port)).close()
    response = httpx.post(live_server.url + "/api/trace", json=SENTENCE, timeout=30)
    assert response.status_code == 200
    assert live_server.alive()
