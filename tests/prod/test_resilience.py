"""The real server keeps answering after malformed JSON, huge bodies and clients that misbehave."""

from __future__ import annotations

import os
import socket
import threading
import time

import httpx
import pytest

from bench.server import LiveServer
from tests.waiting import PATIENCE_S, wait_until

SENTENCE = {"text": "The cat sits on the mat."}


def healthy(server) -> bool:
    return httpx.get(server.url + "/healthz", timeout=5).status_code == 200


def raw(server, data: bytes, read: bool = False) -> bytes:
    """Send ``data`` on a new connection; with ``read``, everything the server answers until it
    closes the connection (a server that never closes it fails the test after PATIENCE_S)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE_S) as sock:
        sock.sendall(data)
        if not read:
            return b""
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            raise AssertionError(f"the server kept the connection open {PATIENCE_S:g} s") from None
        return b"".join(chunks)


def still_open(sock: socket.socket) -> bool:
    """The server has neither answered on ``sock`` nor closed it."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)  # data: answered (e.g. 408); b"": closed
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)
    return False


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
    # slow clients keep their connections open while others are served: a request is answered
    # while all 20 still wait for their bodies, not after the server has cut them off (2 s)
    assert httpx.post(live_server.url + "/api/translate", json=SENTENCE, timeout=30).status_code == 200
    slow = [socket.create_connection(("127.0.0.1", live_server.port)) for _ in range(20)]
    try:
        for sock in slow:
            sock.sendall(b"POST /api/trace HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        response = httpx.post(live_server.url + "/api/translate", json=SENTENCE, timeout=30)
        assert response.status_code == 200 and response.json()["translation"] is not None
        assert all(still_open(sock) for sock in slow)
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


def test_slow_headers_and_bodies_are_cut_off(live_server):
    """A client that never finishes its headers or its body holds its connection 2 s, not forever:
    the server closes it (raw() fails if the server never does)."""
    assert raw(live_server, b"GET /healthz HTTP/1.1\r\nHost: x\r\n", read=True) == b""
    answer = raw(live_server, b"POST /api/trace HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                              b"\r\nContent-Length: 100\r\n\r\n{\"text\": ", read=True)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:60]
    assert healthy(live_server)


def cpu_seconds(server) -> float:
    """User + system CPU time of the server's processes so far."""
    ticks = 0
    for pid in server.pids():
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def burst(url: str, path: str, count: int, timeout: float) -> list:
    """``count`` GETs at once, each client giving up after ``timeout`` s; the status or the error."""
    results = []

    def one():
        try:
            results.append(httpx.get(url + path, timeout=timeout).status_code)
        except httpx.HTTPError as error:
            results.append(type(error).__name__)

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads, results


def one_race_cpu_seconds(server, path: str) -> float:
    """The server's CPU seconds for one whole request (a client that waits for the answer)."""
    before = cpu_seconds(server)
    assert httpx.get(server.url + path, timeout=PATIENCE_S).status_code == 200
    return cpu_seconds(server) - before


def idle(server) -> bool:
    """The server's processes used (almost) no CPU over the last quarter of a second."""
    before = cpu_seconds(server)
    time.sleep(0.25)
    return cpu_seconds(server) - before < 0.05


def test_clients_that_give_up_leave_no_work_behind(deep_queue_server):
    """12 KV-cache races, all admitted, whose clients leave after 0.5 s: the server stops
    computing for them, instead of doing the work of all 12 for nobody. Counted in the server's
    CPU seconds (which a busy machine does not inflate), from the burst until the server is idle
    again, against what one race costs when its client waits for the answer."""
    server = deep_queue_server
    path = "/api/kv-cache?text=The+cat+sits+on+the+mat.&steps=128"
    one = one_race_cpu_seconds(server, path)
    wait_until(lambda: idle(server), "the server to go idle before the burst")
    before = cpu_seconds(server)
    threads, results = burst(server.url, path, 12, timeout=0.5)
    for thread in threads:
        thread.join()
    assert set(results) <= {"ReadTimeout", 200} and "ReadTimeout" in results, results
    wait_until(lambda: idle(server), "the server to stop computing for clients that left")
    spent = cpu_seconds(server) - before
    assert spent < 12 * one / 4, (spent, one)  # what is left behind would be ~12 races' work
    assert healthy(server)


@pytest.fixture(scope="module")
def deep_queue_server(tiny_checkpoint):
    """A server that admits every request of the bursts below (no 503s to hide behind)."""
    # the longest time limit: a busy machine computes the bursts more slowly, and a request the
    # plan could not finish in time would be refused (503)
    env = {"ITT_ACCESS_LOG": "false", "ITT_MAX_QUEUE": "64", "ITT_REQUEST_TIMEOUT_S": "600"}
    with LiveServer(tiny_checkpoint, env=env) as server:
        yield server


def test_healthz_stays_fast_while_the_model_is_busy(deep_queue_server):
    """64 KV-cache races queue for the model thread: 40 hold every threadpool thread, 24 wait
    for one. /healthz answers on the event loop all the same: while it is answered, hardly any
    race finishes (queued behind them, it would wait for the ones ahead of it). Counted in races
    finished, not in seconds, so a busy machine does not change the answer."""
    path = "/api/kv-cache?text=The+cat+sits+on+the+mat.&steps=24&runs=1"
    threads, results = burst(deep_queue_server.url, path, 64, timeout=600)
    wait_until(lambda: results, "the first race of the burst to be answered")  # the pool is full
    finished_during = []
    with httpx.Client(base_url=deep_queue_server.url, timeout=PATIENCE_S) as client:
        for _ in range(8):
            before = len(results)
            if 64 - before <= 40:  # the threadpool is no longer full: nothing left to measure
                break
            assert client.get("/healthz").status_code == 200
            finished_during.append(len(results) - before)
    for thread in threads:
        thread.join()
    assert len(finished_during) >= 3, "the burst drained before /healthz was measured"
    finished_during.sort()
    assert finished_during[len(finished_during) // 2] <= 2, finished_during
    assert results.count(200) == 64, results
