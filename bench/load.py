"""Load test on loopback: N POST /api/trace requests at concurrency C, latency percentiles, errors.

    python -m bench.load [--requests 500] [--concurrency 16] [--words 10] [--repeat]
                         [--url http://127.0.0.1:8000 | --checkpoint DIR --workers N]

Without --url it starts ``python -m app`` on a free loopback port. Sentences are distinct (every
request runs the model) unless --repeat sends one sentence over and over (served from the cache).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from bench.common import fmt, percentiles, sentences
from bench.server import LiveServer
from model.translator import DEFAULT_CHECKPOINT


@dataclass
class LoadResult:
    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    wire_bytes: int = 0
    wall_s: float = 0.0

    @property
    def failures(self) -> int:
        return len(self.errors) + sum(n for status, n in self.statuses.items() if status != 200)

    @property
    def rps(self) -> float:
        return len(self.latencies_ms) / self.wall_s if self.wall_s else 0.0


def hammer(base_url: str, requests: list[tuple[str, str, dict | None]], concurrency: int,
           timeout: float = 120.0) -> LoadResult:
    """Send (method, path, json body) requests from ``concurrency`` threads, one client each."""
    result = LoadResult()
    lock = threading.Lock()
    queue = iter(enumerate(requests))

    def worker():
        with httpx.Client(base_url=base_url, timeout=timeout) as client:
            while True:
                with lock:
                    item = next(queue, None)
                if item is None:
                    return
                _, (method, path, body) = item
                started = time.perf_counter()
                try:
                    response = client.request(method, path, json=body)
                    response.read()
                    elapsed = (time.perf_counter() - started) * 1000
                    with lock:
                        result.latencies_ms.append(elapsed)
                        result.statuses[response.status_code] += 1
                        result.wire_bytes += response.num_bytes_downloaded
                except httpx.HTTPError as error:
                    with lock:
                        result.errors.append(f"{method} {path}: {error!r}")

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.wall_s = time.perf_counter() - started
    return result


def trace_requests(count: int, words: int = 10, repeat: bool = False, offset: int = 0) -> list:
    texts = sentences(words, 1, offset) * count if repeat else sentences(words, count, offset)
    return [("POST", "/api/trace", {"text": text}) for text in texts]


def report(name: str, result: LoadResult) -> str:
    stats = percentiles(result.latencies_ms) if result.latencies_ms else None
    line = (f"{name}: {len(result.latencies_ms)} answered in {result.wall_s:.1f} s = {result.rps:.1f} req/s, "
            f"statuses {dict(result.statuses)}, failures {result.failures}")
    if stats:
        line += f"\n    latency {fmt(stats)}"
    for error in result.errors[:5]:
        line += f"\n    error: {error}"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--words", type=int, default=10, choices=[5, 10, 20, 40])
    parser.add_argument("--repeat", action="store_true", help="one sentence (cached after the first)")
    parser.add_argument("--url", help="an already running server; otherwise one is started")
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    requests = trace_requests(args.requests, args.words, args.repeat, offset=2000)

    def run(url: str) -> LoadResult:
        hammer(url, trace_requests(8, args.words, offset=4000), 2)  # warm-up, not counted
        return hammer(url, requests, args.concurrency)

    if args.url:
        result = run(args.url)
    else:
        with LiveServer(args.checkpoint, workers=args.workers,
                        env={"ITT_ACCESS_LOG": "false"}) as server:
            result = run(server.url)
    kind = "one cached sentence" if args.repeat else "distinct sentences"
    print(report(f"POST /api/trace × {args.requests}, concurrency {args.concurrency}, "
                 f"{args.words} words, {kind}", result))
    print(json.dumps({"requests": args.requests, "concurrency": args.concurrency,
                      "rps": round(result.rps, 2), "failures": result.failures,
                      "latency_ms": percentiles(result.latencies_ms) if result.latencies_ms else None}))
    return 1 if result.failures else 0


if __name__ == "__main__":
    sys.exit(main())
