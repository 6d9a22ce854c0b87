"""Load test on loopback: N POST /api/trace requests at concurrency C, latency percentiles, errors.

    python -m bench.load [--requests 500] [--concurrency 16] [--words 10] [--repeat]
                         [--url http://127.0.0.1:8000 | --checkpoint DIR --workers N]
    python -m bench.load --scenario burst [--burst 32]
    python -m bench.load --scenario classroom [--students 60] [--seconds 120]
    python -m bench.load --scenario mixed [--burst 64] [--concurrency 32] [--bursts 3]

Without --url it starts ``python -m app`` on a free loopback port. Sentences are distinct (every
request runs the model) unless --repeat sends one sentence over and over (served from the cache).

``--scenario burst`` is a class pressing the heaviest buttons at once: ``--burst`` traces of 200
characters with beam 8 and max_len 128, then ``--burst`` KV-cache races of 128 steps, then 16 races
whose clients give up after 0.5 s. ``--scenario classroom`` replays ``--students`` students for
``--seconds``: each translates a sentence, opens the other pages' figures, steps through decoding
and thinks 2–6 s, with a burst of heavy requests every 30 s. Both print, per endpoint, served and
shed (503) counts and p50/p95/p99 of served requests, /healthz p99 meanwhile, the server's
CPU-seconds in the 3 s after the last answer (≈ 0 when nothing runs for requests already
answered) and its peak RSS.

``--scenario mixed`` is the burst of issue 30: ``--bursts`` times, ``--burst`` heavy requests of
four kinds in turn (a beam-8 trace of ~200 characters, a 128-step KV-cache race, the interpret
figures of a long sentence with ``ig_steps`` 256, the x-ray of a long sentence) sent by
``--concurrency`` clients released together, each sending its next request when one is answered.
Per kind: served, shed at once, stopped at the deadline; the slowest answer of any status; and
each shed answer's Retry-After against the real wait: the seconds from that answer until the
last served request of its burst was answered (when the work queued ahead of it was done),
counted as at least 1 s (Retry-After is whole seconds, at least 1). A client whose request was
shed waits exactly its Retry-After and sends it once more (as a client honouring the header
would): the share of those retries admitted says whether Retry-After is long enough. Meanwhile
/healthz is asked every 100 ms, and each server process's RSS is read before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from urllib.parse import urlencode

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


# -- a class at once ----------------------------------------------------------------------------


class Probe:
    """While a scenario runs: /healthz every 100 ms (latency) and the server's RSS (peak)."""

    def __init__(self, server: LiveServer):
        self.server = server
        self.health_ms: list[float] = []
        self.health_failures = 0
        self.peak_rss_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with httpx.Client(base_url=self.server.url, timeout=30) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                try:
                    ok = client.get("/healthz").status_code == 200
                except httpx.HTTPError:
                    ok = False
                if ok:
                    self.health_ms.append((time.perf_counter() - started) * 1000)
                else:
                    self.health_failures += 1
                self.peak_rss_mb = max(self.peak_rss_mb, self.server.rss_mb())
                self._stop.wait(0.1)


def cpu_seconds(server: LiveServer) -> float:
    """User + system CPU time of the server's processes so far (from /proc/<pid>/stat)."""
    ticks = 0
    for pid in server.pids():
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass
class Outcomes:
    """Per endpoint: latencies of served (2xx) requests, and every status or error seen."""

    served_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    last_answer: float = 0.0
    last_served: float = 0.0
    retry_after: list[tuple[float, int]] = field(default_factory=list)  # (when, seconds) per shed
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, client: httpx.Client, name: str, method: str, path: str,
             body: dict | None = None) -> int | str:
        started = time.perf_counter()
        try:
            response = client.request(method, path, json=body)
            outcome: int | str = response.status_code
            if outcome == 503 and "busy" not in response.text:
                outcome = "503 at the deadline"  # admitted, then stopped at the time limit
            elif outcome == 503:
                with self.lock:
                    self.retry_after.append((time.perf_counter(),
                                             int(response.headers.get("retry-after", "0"))))
        except httpx.TimeoutException:
            outcome = "gave up"
        except httpx.HTTPError as error:
            outcome = type(error).__name__
        ended = time.perf_counter()
        with self.lock:
            self.statuses[name][outcome] += 1
            if isinstance(outcome, int) and outcome < 300:
                self.served_ms[name].append((ended - started) * 1000)
                self.last_served = max(self.last_served, ended)
            self.last_answer = max(self.last_answer, ended)
        return outcome

    def lines(self) -> list[str]:
        out = []
        for name in sorted(self.statuses):
            counts = self.statuses[name]
            served = self.served_ms.get(name, [])
            line = (f"  {name:<28} served {len(served):>4} · shed at once (503) {counts.get(503, 0):>4} · "
                    f"other {dict((k, v) for k, v in counts.items() if k != 503 and k != 200)}")
            if served:
                stats = percentiles(served)
                p95 = sorted(served)[min(len(served) - 1, round(0.95 * (len(served) - 1)))]
                line += f" · p50 {stats['p50']:.0f} ms · p95 {p95:.0f} · p99 {stats['p99']:.0f}"
            out.append(line)
        return out

    def summary(self) -> dict:
        result = {}
        for name, counts in self.statuses.items():
            served = sorted(self.served_ms.get(name, []))
            result[name] = {"served": len(served), "shed": counts.get(503, 0),
                            "other": {str(k): v for k, v in counts.items() if k not in (200, 503)},
                            **{f"p{q}_ms": _pick(served, q / 100) for q in (50, 95, 99)}}
        return result


def _pick(ordered: list[float], q: float) -> float | None:
    return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 1) if ordered else None


def at_once(count: int, task) -> None:
    """Run ``task(i)`` on ``count`` threads released together."""
    gate = threading.Barrier(count)

    def run(i: int) -> None:
        gate.wait()
        task(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def heavy_texts(count: int, offset: int) -> list[str]:
    """Distinct English sentences of about 200 characters (the text limit)."""
    out = []
    for text in sentences(40, count, offset):
        cut = text[:199].rsplit(" ", 1)[0]
        out.append(cut + ".")
    return out


def cpu_after(server: LiveServer, outcomes: Outcomes, seconds: float = 3.0) -> float:
    """The server's CPU-seconds from the last answer to ``seconds`` after it."""
    begin = cpu_seconds(server)
    waited = time.perf_counter() - outcomes.last_answer
    time.sleep(max(0.0, seconds - waited))
    # what ran between the last answer and ``begin`` is not counted: at most a few ms here
    return cpu_seconds(server) - begin


def burst_scenario(server: LiveServer, size: int) -> dict:
    report: dict = {}
    texts = heavy_texts(size, 7000)
    phases = [
        ("heavy trace", size, 120.0, lambda i: (
            "POST", "/api/trace",
            {"text": texts[i], "strategy": "beam", "beam_size": 8, "max_len": 128})),
        ("kv-cache race", size, 120.0, lambda i: (
            "GET", "/api/kv-cache?" + urlencode({"text": sentences(20, 1, 9000 + i)[0],
                                                "steps": 128}), None)),
        ("kv-cache, client gives up", 16, 0.5, lambda i: (
            "GET", "/api/kv-cache?" + urlencode({"text": sentences(20, 1, 9500 + i)[0],
                                                "steps": 128}), None)),
    ]
    for name, count, timeout, request in phases:
        outcomes = Outcomes()
        cpu_before = cpu_seconds(server)
        started = time.perf_counter()
        with Probe(server) as probe:

            def one(i: int, request=request, timeout=timeout, outcomes=outcomes, name=name) -> None:
                method, path, body = request(i)
                with httpx.Client(base_url=server.url, timeout=timeout) as client:
                    outcomes.send(client, name, method, path, body)

            at_once(count, one)
            cpu_total = cpu_seconds(server) - cpu_before
            after = cpu_after(server, outcomes)
        wall = outcomes.last_answer - started
        print(f"{name}: {count} at once, last answer after {wall:.1f} s")
        print("\n".join(outcomes.lines()))
        health = percentiles(probe.health_ms) if probe.health_ms else None
        print(f"  /healthz p50 {health['p50']:.1f} ms · p99 {health['p99']:.1f} ms (n={health['n']}, "
              f"failed {probe.health_failures}) · CPU {cpu_total:.1f} s during, {after:.2f} s in the "
              f"3 s after the last answer · peak RSS {probe.peak_rss_mb:.0f} MB"
              if health else "  /healthz: no answer")
        ratios = sorted(seconds / max(1.0, outcomes.last_served - when)
                        for when, seconds in outcomes.retry_after if outcomes.last_served)
        if ratios:
            print(f"  Retry-After / real wait (until the last served answer, at least 1 s) over "
                  f"{len(ratios)} shed: p10 {_pick(ratios, 0.1)} · p50 {_pick(ratios, 0.5)} · "
                  f"p90 {_pick(ratios, 0.9)} · within 2× "
                  f"{sum(0.5 <= r <= 2 for r in ratios) / len(ratios):.0%}")
        report[name] = {**outcomes.summary()[name], "wall_s": round(wall, 2),
                        "retry_after_p50": _pick(ratios, 0.5),
                        "healthz_p99_ms": round(health["p99"], 1) if health else None,
                        "cpu_during_s": round(cpu_total, 2), "cpu_after_s": round(after, 2),
                        "peak_rss_mb": round(probe.peak_rss_mb)}
    return report


def classroom_scenario(server: LiveServer, students: int, seconds: float, seed: int = 0) -> dict:
    """``students`` students for ``seconds``: translate, look at every page, step, think."""
    outcomes = Outcomes()
    end = time.perf_counter() + seconds
    texts = sentences(10, students * 50, 12000)
    heavy = heavy_texts(students, 15000)

    def student(i: int) -> None:
        rng = random.Random(seed * 1000 + i)
        time.sleep(rng.uniform(0, 5))  # a class does not press Enter in the same millisecond
        with httpx.Client(base_url=server.url, timeout=60) as client:
            n = 0
            while time.perf_counter() < end:
                text = texts[i * 50 + n % 50]
                n += 1
                body = {"text": text}
                outcomes.send(client, "GET / (page)", "GET", "/?" + urlencode(body))
                outcomes.send(client, "POST /api/figures/pipeline", "POST", "/api/figures/pipeline",
                              body)
                for page in ("tokens", "attention", "embeddings"):
                    outcomes.send(client, "POST /api/figures/<page>", "POST", f"/api/figures/{page}",
                                  body)
                for step in range(rng.randint(1, 3)):
                    outcomes.send(client, "POST /api/figures/decode", "POST", "/api/figures/decode",
                                  {**body, "strategy": "sample", "seed": step, "temperature": 0.8})
                if rng.random() < 0.3:
                    outcomes.send(client, "GET /api/kv-cache", "GET",
                                  "/api/kv-cache?" + urlencode({**body, "steps": 32}))
                if rng.random() < 0.2:
                    outcomes.send(client, "POST /api/score", "POST", "/api/score",
                                  {**body, "reference": "老师每天早上在厨房里看书。"})
                time.sleep(rng.uniform(2, 6))

    def heavy_bursts() -> None:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            k = 0
            while time.perf_counter() + 30 < end:
                time.sleep(30)

                def one(j: int, k=k) -> None:
                    outcomes.send(client, "POST /api/trace (heavy burst)", "POST", "/api/trace",
                                  {"text": heavy[(k * 8 + j) % len(heavy)], "strategy": "beam",
                                   "beam_size": 8, "max_len": 128})

                at_once(8, one)
                k += 1

    cpu_before = cpu_seconds(server)
    with Probe(server) as probe:
        burster = threading.Thread(target=heavy_bursts)
        burster.start()
        at_once(students, student)
        burster.join()
        cpu_total = cpu_seconds(server) - cpu_before
        after = cpu_after(server, outcomes)
    print(f"classroom: {students} students for {seconds:.0f} s")
    print("\n".join(outcomes.lines()))
    health = percentiles(probe.health_ms)
    print(f"  /healthz p99 {health['p99']:.1f} ms · CPU {cpu_total:.1f} s during, {after:.2f} s in "
          f"the 3 s after the last answer · peak RSS {probe.peak_rss_mb:.0f} MB")
    return {"endpoints": outcomes.summary(), "healthz_p99_ms": round(health["p99"], 1),
            "cpu_after_s": round(after, 2), "peak_rss_mb": round(probe.peak_rss_mb)}


def mixed_requests(count: int, offset: int) -> list[tuple[str, str, str, dict | None]]:
    """``count`` heavy requests, the four kinds in turn, every sentence distinct."""
    texts = heavy_texts(count, offset)
    kinds = [
        ("beam trace", lambda text, i: ("POST", "/api/trace", {
            "text": text, "strategy": "beam", "beam_size": 8, "max_len": 128})),
        ("kv-cache race", lambda text, i: ("GET", "/api/kv-cache?" + urlencode(
            {"text": sentences(20, 1, offset + 50_000 + i)[0], "steps": 128}), None)),
        ("interpret", lambda text, i: ("POST", "/api/figures/interpret", {
            "text": text, "ig_steps": 256})),
        ("x-ray", lambda text, i: ("POST", "/api/xray/view", {"text": text})),
    ]
    out = []
    for i in range(count):
        name, make = kinds[i % len(kinds)]
        out.append((name, *make(texts[i], i)))
    return out


def mixed_scenario(server: LiveServer, size: int, concurrency: int, bursts: int) -> dict:
    """The four heavy kinds at once, ``bursts`` times (see the module docstring)."""
    answers: list[dict] = []  # one per request: kind, burst, sent, answered, outcome, retry_after
    retries: list[dict] = []  # the same for each shed request sent again after its Retry-After
    rss_before = server.rss_by_process()
    probe = Probe(server)
    probe.__enter__()
    for burst in range(bursts):
        requests = mixed_requests(size, 20_000 + burst * size)
        lock = threading.Lock()
        pending = iter(requests)
        gate = threading.Barrier(concurrency)

        def client(burst=burst, pending=pending, lock=lock, gate=gate) -> None:
            with httpx.Client(base_url=server.url, timeout=120) as http:
                gate.wait()
                while True:
                    with lock:
                        item = next(pending, None)
                    if item is None:
                        return
                    name, method, path, body = item
                    answer = _send(http, method, path, body)
                    with lock:
                        answers.append({"kind": name, "burst": burst, **answer})
                    if answer["outcome"] == "shed":  # honour Retry-After: wait it, try once more
                        time.sleep(answer["retry_after"])
                        again = _send(http, method, path, body)
                        with lock:
                            retries.append({"kind": name, "burst": burst, **again})

        threads = [threading.Thread(target=client) for _ in range(concurrency)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        mine = [a for a in answers if a["burst"] == burst]
        print(f"burst {burst + 1}: {size} requests from {concurrency} clients, last answer after "
              f"{max(a['answered'] for a in mine) - started:.1f} s")
        time.sleep(2)  # let every worker's queue drain before the next burst
    probe.__exit__(None, None, None)
    report = mixed_report(answers)
    admitted = sum(r["outcome"] == 200 for r in retries)
    share = admitted / len(retries) if retries else None
    health = percentiles(probe.health_ms) if probe.health_ms else None
    rss_after = server.rss_by_process()
    for kind, row in report["kinds"].items():
        row["retried_admitted"] = sum(r["outcome"] == 200 for r in retries if r["kind"] == kind)
        print(f"  {kind:<14} served first time {row['served']:>3}/{row['sent']} · its retries "
              f"admitted {row['retried_admitted']}")
    report.update(retries=len(retries), retries_admitted=admitted,
                  retries_other=dict(Counter(str(r["outcome"]) for r in retries if r["outcome"] != 200)),
                  healthz_p99_ms=round(health["p99"], 1) if health else None,
                  healthz_failed=probe.health_failures,
                  rss_mb_before=rss_before, rss_mb_after=rss_after)
    print(f"  shed, then sent again after exactly Retry-After: {admitted} of {len(retries)} admitted"
          + (f" ({share:.0%})" if retries else "") + f" · other outcomes {report['retries_other']}")
    print(f"  /healthz p99 {report['healthz_p99_ms']} ms (failed {probe.health_failures}) · RSS per "
          f"process before {rss_before} MB, after {rss_after} MB")
    return report


def _send(http: httpx.Client, method: str, path: str, body: dict | None) -> dict:
    """One request: when it was sent and answered, its outcome (status, "shed": refused at once
    as busy, "deadline": stopped at the time limit, or the error) and Retry-After when 503."""
    sent = time.perf_counter()
    retry_after = None
    try:
        response = http.request(method, path, json=body)
        outcome: int | str = response.status_code
        if outcome == 503:
            retry_after = int(response.headers.get("retry-after", "0"))
            outcome = "shed" if "busy" in response.text else "deadline"
    except httpx.HTTPError as error:
        outcome = type(error).__name__
    return {"sent": sent, "answered": time.perf_counter(), "outcome": outcome,
            "retry_after": retry_after}


def mixed_report(answers: list[dict]) -> dict:
    """Per kind served / shed / stopped at the deadline, and Retry-After against the real wait."""
    report: dict = {"kinds": {}}
    last_served = {}
    for a in answers:
        if a["outcome"] == 200:
            last_served[a["burst"]] = max(last_served.get(a["burst"], 0.0), a["answered"])
    for kind in dict.fromkeys(a["kind"] for a in answers):
        mine = [a for a in answers if a["kind"] == kind]
        served = sorted((a["answered"] - a["sent"]) * 1000 for a in mine if a["outcome"] == 200)
        every = sorted((a["answered"] - a["sent"]) * 1000 for a in mine)
        counts = Counter(a["outcome"] for a in mine)
        row = {"sent": len(mine), "served": counts.get(200, 0), "shed": counts.get("shed", 0),
               "deadline": counts.get("deadline", 0),
               "other": {str(k): v for k, v in counts.items() if k not in (200, "shed", "deadline")},
               "served_p50_ms": _pick(served, 0.5), "served_p99_ms": _pick(served, 0.99),
               "any_p99_ms": _pick(every, 0.99), "any_max_ms": _pick(every, 1.0)}
        report["kinds"][kind] = row
        print(f"  {kind:<14} served {row['served']:>3}/{row['sent']} · shed at once {row['shed']:>3}"
              f" · 503 at the deadline {row['deadline']:>2} · other {row['other']} · served p50 "
              f"{row['served_p50_ms']} ms p99 {row['served_p99_ms']} · any answer p99 "
              f"{row['any_p99_ms']} max {row['any_max_ms']} ms")
    shed_ms = sorted((a["answered"] - a["sent"]) * 1000 for a in answers if a["outcome"] == "shed")
    if shed_ms:
        report["shed_p99_ms"] = _pick(shed_ms, 0.99)
        report["shed_max_ms"] = _pick(shed_ms, 1.0)
        print(f"  shed answers took p99 {report['shed_p99_ms']} ms, max {report['shed_max_ms']} ms")
    for label, bursts in (("all bursts", None), ("the first (cold server)", {0})):
        ratios = []
        for a in answers:
            if a["outcome"] == "shed" and a["burst"] in last_served and (
                    bursts is None or a["burst"] in bursts):
                real = max(1.0, last_served[a["burst"]] - a["answered"])
                ratios.append(a["retry_after"] / real)
        if not ratios:
            continue
        ratios.sort()
        within = sum(0.5 <= r <= 2 for r in ratios) / len(ratios)
        r = {"n": len(ratios), "p10": _pick(ratios, 0.1), "p50": _pick(ratios, 0.5),
             "p90": _pick(ratios, 0.9), "min": round(ratios[0], 2), "max": round(ratios[-1], 2),
             "within_2x": round(within, 3)}
        report["retry_after" if bursts is None else "retry_after_cold"] = r
        print(f"  Retry-After / real wait, {label}, {r['n']} shed answers: p10 {r['p10']} · p50 "
              f"{r['p50']} · p90 {r['p90']} · min {r['min']} · max {r['max']} · within 2× "
              f"{within:.0%}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--concurrency", type=int, help="clients at once (default 16; mixed: 32)")
    parser.add_argument("--words", type=int, default=10, choices=[5, 10, 20, 40])
    parser.add_argument("--repeat", action="store_true", help="one sentence (cached after the first)")
    parser.add_argument("--url", help="an already running server; otherwise one is started")
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--workers", type=int,
                        help="worker processes (default: the server's, one per core)")
    parser.add_argument("--scenario", choices=["trace", "burst", "classroom", "mixed"],
                        default="trace")
    parser.add_argument("--burst", type=int, help="requests at once (burst: 32) or per burst "
                        "(mixed: 64)")
    parser.add_argument("--bursts", type=int, default=3, help="how many bursts (mixed)")
    parser.add_argument("--students", type=int, default=60, help="students (classroom)")
    parser.add_argument("--seconds", type=float, default=120, help="how long (classroom)")
    args = parser.parse_args(argv)
    if args.scenario != "trace":
        if args.url:
            parser.error("--scenario burst/classroom start their own server (CPU and RSS are read "
                         "from /proc)")
        with LiveServer(args.checkpoint, workers=args.workers,
                        env={"ITT_ACCESS_LOG": "false"}) as server:
            if args.scenario == "burst":
                summary = burst_scenario(server, args.burst or 32)
            elif args.scenario == "mixed":
                summary = mixed_scenario(server, args.burst or 64, args.concurrency or 32,
                                         args.bursts)
            else:
                summary = classroom_scenario(server, args.students, args.seconds)
        print(json.dumps({"scenario": args.scenario, **summary}))
        return 0
    args.concurrency = args.concurrency or 16
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
