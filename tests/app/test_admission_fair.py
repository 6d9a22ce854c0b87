"""Admission under a burst, through real HTTP (issue 59, item 3): a client that waits the
Retry-After it was told and sends its request again is admitted, and every kind of heavy call
gets a share of the one worker.

The server is ``python -m app`` with one worker serving the shipped model, its time limit
lowered to 6 s so that a burst of 40 calls of the four heavy kinds of ``bench.load --scenario
mixed`` (beam trace, KV-cache race, interpret, x-ray; smaller here, so that the test is short)
from 20 clients is more than it can do in one time limit, on a quiet machine too (12 clients
were not: 2 refusals) (the server measures a KV-cache race at
start-up, so every kind is planned at what it costs on this machine). Each client sends its next
call when one is answered; a refused one waits exactly its Retry-After and sends it once more, as
a client honouring the header would. (The full-size burst's figures: bench/README.md.)
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from urllib.parse import urlencode

import httpx
import pytest

from bench.common import sentences
from bench.load import _send
from bench.server import LiveServer
from model.translator import DEFAULT_CHECKPOINT

CLIENTS = 20
PER_KIND = 10


def requests() -> list[tuple[str, str, str, dict | None]]:
    """``PER_KIND`` calls of each kind in turn, every sentence distinct."""
    out = []
    for i, text in enumerate(sentences(20, 4 * PER_KIND, 31_000)):
        out.append([
            ("beam trace", "POST", "/api/trace",
             {"text": text, "strategy": "beam", "beam_size": 4, "max_len": 64}),
            ("kv-cache race", "GET", "/api/kv-cache?" + urlencode({"text": text, "steps": 64, "runs": 1}),
             None),
            ("interpret", "POST", "/api/figures/interpret", {"text": text, "ig_steps": 64}),
            ("x-ray", "POST", "/api/xray/view", {"text": text}),
        ][i % 4])
    return out


@pytest.fixture(scope="module")
def burst() -> tuple[list[dict], list[dict]]:
    """Every first try and every retry of one burst (kind, outcome, Retry-After)."""
    env = {"ITT_ACCESS_LOG": "false", "ITT_REQUEST_TIMEOUT_S": "6"}
    first: list[dict] = []
    again: list[dict] = []
    lock = threading.Lock()
    pending = iter(requests())
    with LiveServer(DEFAULT_CHECKPOINT, workers=1, env=env) as server:
        gate = threading.Barrier(CLIENTS)

        def client() -> None:
            with httpx.Client(base_url=server.url, timeout=120) as http:
                gate.wait()
                while True:
                    with lock:
                        item = next(pending, None)
                    if item is None:
                        return
                    name, method, path, body = item
                    answer = {"kind": name, **_send(http, method, path, body)}
                    with lock:
                        first.append(answer)
                    if answer["outcome"] == "shed":
                        time.sleep(answer["retry_after"])  # honour it, to the second
                        retry = {"kind": name, **_send(http, method, path, body)}
                        with lock:
                            again.append(retry)

        threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return first, again


def test_the_burst_is_more_than_one_time_limit_holds(burst):
    first, _ = burst
    outcomes = Counter(a["outcome"] for a in first)
    assert outcomes["shed"] >= 4, outcomes  # the question below is asked of enough refusals
    assert set(outcomes) <= {200, "shed"}, outcomes  # never 503 at the deadline, never an error


def test_a_client_that_honours_retry_after_is_admitted(burst):
    """The promise is the server's own Retry-After, made from what it measured on this machine
    under whatever load it runs beside: a client back at that time is admitted (≥ 90 %). With
    the retry's room taken by requests admitted while it was away, 21 of 34 were on a quiet
    machine, 13 of 25 beside two CPU burners; a retry now goes ahead of them (32 of 34, 24 of 25)."""
    first, again = burst
    admitted = sum(a["outcome"] == 200 for a in again)
    served_s = sorted(round(a["answered"] - a["sent"], 1) for a in first if a["outcome"] == 200)
    assert again and admitted >= 0.9 * len(again), (
        Counter(str(a["outcome"]) for a in again), "first tries served in (s):", served_s)


def test_every_kind_gets_a_fair_share(burst):
    first, again = burst
    served = Counter(a["kind"] for a in first + again if a["outcome"] == 200)
    assert len(served) == 4 and min(served.values()) >= PER_KIND // 2, served
