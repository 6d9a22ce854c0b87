"""Run every benchmark and print the targets table (Markdown) for bench/README.md.

    python -m bench.run_all [--checkpoint DIR] [--quick] [--json bench/latest.json]

Takes a few minutes on two cores. Each figure is a fresh measurement; nothing is a timed test.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench import http_bench, kv_cache_bench, page_bench, trace_bench
from bench.load import hammer, trace_requests
from bench.server import LiveServer
from model.translator import DEFAULT_CHECKPOINT


def load_test(checkpoint, requests: int, concurrency: int) -> dict:
    with LiveServer(checkpoint, env={"ITT_ACCESS_LOG": "false"}) as server:
        hammer(server.url, trace_requests(8, offset=4000), 2)
        result = hammer(server.url, trace_requests(requests, offset=2000), concurrency)
    from bench.common import percentiles

    return {"requests": requests, "concurrency": concurrency, "rps": round(result.rps, 2),
            "failures": result.failures, "statuses": dict(result.statuses),
            "latency": percentiles(result.latencies_ms)}


def scale_out(checkpoint, workers: int, requests: int = 160) -> dict:
    """Throughput at concurrency 8 with ``--workers N`` (each worker its own model and cache)."""
    with LiveServer(checkpoint, workers=workers, env={"ITT_ACCESS_LOG": "false"}) as server:
        hammer(server.url, trace_requests(16, offset=4000), 4)
        result = hammer(server.url, trace_requests(requests, offset=3000), 8)
        rss = server.rss_mb()
    return {"workers": workers, "rps": round(result.rps, 2), "failures": result.failures,
            "rss_mb": round(rss, 1)}


def table(r: dict) -> str:
    t, h, k, p, load = r["trace"], r["http"], r["kv"], r["page"], r["load"]
    ten = t["length"][10]["trace"]
    size_kb = h["size"]["gzip_bytes"] / 1024
    rss = h["memory"]["rss_mb"]
    rss_values = list(rss.values())
    page_worst = max(v["new_sentence"]["p50"] for v in p["pages"].values())
    page_cached = max(v["cached_sentence"]["p50"] for v in p["pages"].values())

    def ok(good: bool) -> str:
        return "✅" if good else "❌"

    rows = [
        ("full trace of a 10-word sentence, greedy, in-process", "p50 ≤ 60 ms",
         f"p50 {ten['p50']:.1f} ms (p90 {ten['p90']:.1f})", ok(ten["p50"] <= 60)),
        ("the same through POST /api/trace on loopback (new sentences)", "p50 ≤ 120 ms",
         f"p50 {h['latency_distinct']['p50']:.1f} ms (p90 {h['latency_distinct']['p90']:.1f}); "
         f"cached {h['latency_cached']['p50']:.1f} ms", ok(h["latency_distinct"]["p50"] <= 120)),
        ("/api/trace response, 10 words, as sent (gzip)", "≤ 300 KB",
         f"{size_kb:.0f} KB ({h['size']['identity_bytes'] / 1024:.0f} KB uncompressed)", ok(size_kb <= 300)),
        ("KV-cached vs uncached generation of 128 tokens", "same outputs, ≥ 3× faster",
         f"{k['cached_ms']:.0f} ms vs {k['uncached_ms']:.0f} ms = {k['speedup']:.1f}×, "
         f"identical: {k['identical_tokens'] and k['generate_identical']}",
         ok(k["speedup"] >= 3 and k["identical_tokens"] and k["generate_identical"])),
        ("throughput, /api/trace at concurrency 8, new 10-word sentences", "≥ 15 req/s, no errors",
         f"{h['throughput_distinct']['rps']:.1f} req/s, {h['throughput_distinct']['failures']} errors; "
         f"cached {h['throughput_cached']['rps']:.0f} req/s",
         ok(h["throughput_distinct"]["rps"] >= 15 and h["throughput_distinct"]["failures"] == 0)),
        (f"the same with `--workers {r['scale']['workers']}`", "(scale-out)",
         f"{r['scale']['rps']:.1f} req/s, {r['scale']['failures']} errors, "
         f"RSS {r['scale']['rss_mb']:.0f} MB (all processes)", ""),
        ("server RSS after 1,000 mixed requests", "≤ 500 MB, not growing",
         " → ".join(f"{v:.0f}" for v in rss_values) + " MB",
         ok(rss_values[-1] <= 500 and rss_values[-1] - rss_values[len(rss_values) // 2] < 25)),
        ("page fully drawn in headless Chromium, warm server (slowest page)", "≤ 1.5 s",
         f"new sentence p50 {page_worst:.0f} ms; cached sentence {page_cached:.0f} ms",
         ok(page_worst <= 1500)),
        (f"load test: {load['requests']} × /api/trace at concurrency {load['concurrency']}",
         "no failures", f"{load['rps']:.1f} req/s, {load['failures']} failures, p50 "
         f"{load['latency']['p50']:.0f} ms, p99 {load['latency']['p99']:.0f} ms", ok(load["failures"] == 0)),
    ]
    lines = ["| what | target | measured | |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    lines += ["", "| trace, greedy | source tokens | steps | p50 | p90 | JSON encode p50 |",
              "|---|---|---|---|---|---|"]
    for words, v in t["length"].items():
        lines.append(f"| {words} words | {v['source_tokens']} | {v['steps']:.1f} "
                     f"| {v['trace']['p50']:.1f} ms | {v['trace']['p90']:.1f} ms "
                     f"| {v['json']['p50']:.1f} ms |")
    lines += ["", "| trace, 10 words | steps | p50 | p90 |", "|---|---|---|---|"]
    for beam, v in t["beam"].items():
        lines.append(f"| beam {beam} | {v['steps']:.1f} | {v['trace']['p50']:.1f} ms "
                     f"| {v['trace']['p90']:.1f} ms |")
    lines += ["", "| page | new sentence p50 | cached sentence p50 |", "|---|---|---|"]
    for path, v in p["pages"].items():
        lines.append(f"| `{path}` | {v['new_sentence']['p50']:.0f} ms "
                     f"| {v['cached_sentence']['p50']:.0f} ms |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    parser.add_argument("--json", type=Path, help="also write every number here")
    parser.add_argument("--pages", nargs="+", default=page_bench.DEFAULT_PAGES)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads in-process (default 1, as the server runs)")
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    repeats = 5 if args.quick else 30
    results = {}
    results["trace"] = trace_bench.run(args.checkpoint, repeats)
    print("trace done", flush=True)
    results["kv"] = kv_cache_bench.run(args.checkpoint, 128, 2 if args.quick else 5)
    print("kv cache done", flush=True)
    results["http"] = http_bench.run(args.checkpoint, 1, 200 if args.quick else 1000,
                                     10 if args.quick else 40)
    print("http done", flush=True)
    results["scale"] = scale_out(args.checkpoint, 2)
    print("scale-out done", flush=True)
    results["load"] = load_test(args.checkpoint, 100 if args.quick else 500, 16)
    print("load done", flush=True)
    results["page"] = page_bench.run(args.checkpoint, args.pages, 2 if args.quick else 5)
    print("pages done", flush=True)
    machine = results["trace"]["machine"]
    print(f"\nMeasured {machine['date']} on {machine['nproc']} × {machine['cpu']}, "
          f"Python {machine['python']}, torch {machine['torch']} ({machine['torch_threads']} threads)\n")
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
