"""The server over HTTP on loopback: latency, response size, throughput and memory.

    python -m bench.http_bench [--checkpoint DIR] [--workers 1] [--mixed 1000]

Starts ``python -m app`` on a free port (access log off) and measures, with 10-word sentences:
  * POST /api/trace latency, one request at a time: distinct sentences (the model runs every time)
    and one repeated sentence (answered from the trace cache);
  * the /api/trace response size as sent (gzip) and uncompressed;
  * throughput at concurrency 8, distinct and cached;
  * server RSS (/proc/<pid>/status) during ``--mixed`` mixed requests (pages, API, figures, static).
"""

from __future__ import annotations

import argparse
import json

import httpx

from bench.common import fmt, machine, percentiles, sentences
from bench.load import hammer, report, trace_requests
from bench.server import LiveServer
from model.translator import DEFAULT_CHECKPOINT


def sequential(url: str, bodies: list[dict]) -> tuple[dict, list[float]]:
    result = hammer(url, [("POST", "/api/trace", body) for body in bodies], concurrency=1)
    assert result.failures == 0, report("sequential", result)
    return percentiles(result.latencies_ms), result.latencies_ms


def response_size(url: str, text: str) -> dict:
    """Bytes on the wire (gzip, as a browser asks) and uncompressed, for a sentence not yet cached."""
    sizes = {}
    with httpx.Client(base_url=url, timeout=60) as client:
        for encoding in ("gzip", "identity"):
            with client.stream("POST", "/api/trace", json={"text": text},
                               headers={"accept-encoding": encoding}) as response:
                assert response.status_code == 200, response.read()
                sizes[encoding] = len(b"".join(response.iter_raw()))
                sizes[f"{encoding}_content_encoding"] = response.headers.get("content-encoding")
                sizes[f"{encoding}_server_timing"] = response.headers.get("server-timing")
    return {"gzip_bytes": sizes["gzip"], "identity_bytes": sizes["identity"],
            "encoding": sizes["gzip_content_encoding"], "server_timing": sizes["gzip_server_timing"]}


def mixed_requests(count: int, offset: int = 6000) -> list[tuple[str, str, dict | None]]:
    """Pages, static files and every kind of API call, with new sentences throughout."""
    texts = sentences(10, count, offset)
    kinds = []
    for i, text in enumerate(texts):
        body = {"text": text}
        kinds.append([
            ("POST", "/api/trace", body),
            ("POST", "/api/translate", body),
            ("POST", "/api/figures/attention", body),
            ("POST", "/api/figures/decode", body),
            ("POST", "/api/figures/pipeline", {**body, "strategy": "beam", "beam_size": 4}),
            ("GET", "/", None),
            ("GET", "/attention", None),
            ("GET", "/healthz", None),
            ("GET", "/api/model", None),
            ("GET", "/static/css/app.css", None),
        ][i % 10])
    return kinds


def memory(server: LiveServer, count: int) -> dict:
    requests = mixed_requests(count)
    samples = {0: round(server.rss_mb(), 1)}
    quarter = max(1, count // 4)
    failures = 0
    for start in range(0, count, quarter):
        result = hammer(server.url, requests[start:start + quarter], concurrency=4)
        failures += result.failures
        samples[min(count, start + quarter)] = round(server.rss_mb(), 1)
    return {"rss_mb": samples, "failures": failures}


def run(checkpoint, workers: int, mixed: int, repeats: int) -> dict:
    results: dict = {"machine": machine(), "workers": workers}
    with LiveServer(checkpoint, workers=workers, env={"ITT_ACCESS_LOG": "false"}) as server:
        results["rss_start_mb"] = round(server.rss_mb(), 1)
        hammer(server.url, trace_requests(10, offset=5000), 2)  # warm-up
        distinct = [{"text": text} for text in sentences(10, repeats, offset=100)]
        results["latency_distinct"], _ = sequential(server.url, distinct)
        results["latency_cached"], _ = sequential(server.url, [distinct[0]] * repeats)
        results["size"] = response_size(server.url, sentences(10, 1, offset=7777)[0])
        for name, repeat in (("throughput_distinct", False), ("throughput_cached", True)):
            load = hammer(server.url, trace_requests(20 * 8, repeat=repeat, offset=3000), 8)
            results[name] = {"rps": round(load.rps, 2), "failures": load.failures,
                             "latency": percentiles(load.latencies_ms)}
            print(report(f"{name}, concurrency 8", load))
        results["memory"] = memory(server, mixed)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--mixed", type=int, default=1000, help="mixed requests for the memory check")
    parser.add_argument("--repeats", type=int, default=40)
    args = parser.parse_args(argv)
    r = run(args.checkpoint, args.workers, args.mixed, args.repeats)
    print("machine:", json.dumps(r["machine"]), "workers:", r["workers"])
    print(f"POST /api/trace, 10 words, distinct sentences: {fmt(r['latency_distinct'])}")
    print(f"POST /api/trace, 10 words, cached:             {fmt(r['latency_cached'])}")
    s = r["size"]
    print(f"/api/trace response, 10 words: {s['gzip_bytes'] / 1024:.1f} KB as sent ({s['encoding']}), "
          f"{s['identity_bytes'] / 1024:.1f} KB uncompressed")
    for name in ("throughput_distinct", "throughput_cached"):
        t = r[name]
        print(f"{name}, concurrency 8: {t['rps']:.1f} req/s, failures {t['failures']}, "
              f"p50 {t['latency']['p50']:.0f} ms")
    m = r["memory"]
    print(f"RSS during {args.mixed} mixed requests (MB, by requests done): {m['rss_mb']}, "
          f"failures {m['failures']}; at start {r['rss_start_mb']} MB")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
