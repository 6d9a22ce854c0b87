"""What the training timeline (/timeline) costs the server: start-up time and RSS with and without
it, and the first and later readings of each snapshot.

    python -m bench.timeline_bench                          # this checkout
    python -m bench.timeline_bench --before /tmp/itt-before # and a checkout without the timeline

``--before`` is another checkout (e.g. ``git worktree add /tmp/itt-before <commit>``) whose server
is started the same way, alternately with this one's, so both see the same machine load. Start-up
is the time from starting ``python -m app`` (shipped checkpoint, one worker) until /healthz
answers; RSS is read from /proc then, and again after every snapshot has been read once (each
snapshot loaded, then the timeline's LRU keeps two).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.server import ROOT, wait_for_port

TEXT = "The teacher reads a book in the kitchen every morning."


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start(root: Path) -> tuple[subprocess.Popen, str, float]:
    """``python -m app`` in ``root``; the process, its URL and the seconds until /healthz."""
    env = {**os.environ, "ITT_ACCESS_LOG": "false", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(root)}
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "app", "--port", "0", "--workers", "1"],
                               cwd=root, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{wait_for_port(process, 180)}"
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return process, url, time.perf_counter() - started
        except httpx.HTTPError:
            time.sleep(0.05)


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()


def readings(url: str) -> list[dict]:
    """Each snapshot read twice on one sentence: the first reading loads it, the second is kept."""
    names = [s["name"] for s in httpx.get(url + "/api/timeline", timeout=30).json()["snapshots"]]
    rows = []
    for name in [*names, "shipped"]:
        row = {"snapshot": name}
        for label in ("first_ms", "again_ms"):
            started = time.perf_counter()
            answer = httpx.post(url + "/api/timeline/read", json={"text": TEXT, "snapshot": name},
                                timeout=60)
            answer.raise_for_status()
            row[label] = round((time.perf_counter() - started) * 1000)
        row["translation"] = answer.json()["a"]["translation"][:24]
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a checkout without the timeline, to compare")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    roots = {"with timeline": ROOT} | ({"before": args.before} if args.before else {})
    results: dict = {name: {"startup_s": [], "rss_mb": []} for name in roots}
    for _ in range(args.runs):
        for name, root in roots.items():
            process, url, seconds = start(root)
            try:
                results[name]["startup_s"].append(round(seconds, 2))
                results[name]["rss_mb"].append(round(rss_mb(process.pid)))
                if name == "with timeline" and "readings" not in results[name]:
                    results[name]["readings"] = readings(url)
                    results[name]["rss_after_readings_mb"] = round(rss_mb(process.pid))
            finally:
                stop(process)
    for figures in results.values():
        figures["startup_median_s"] = statistics.median(figures["startup_s"])
        figures["rss_median_mb"] = statistics.median(figures["rss_mb"])
    print(json.dumps(results, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
