"""How smoothly the x-ray plays: frame rate and long tasks while the player runs, headless Chromium.

    python -m bench.xray_motion [--checkpoint DIR] [--seconds 10] [--speed 1] [--sizes 1440x900 390x844]

Opens the x-ray on the seed sentence, presses play and, for ``--seconds``, records every animation
frame's time (requestAnimationFrame) and every long task (a PerformanceObserver, tasks over 50 ms).
Prints per viewport: animation frames per second, the 99th-percentile and the longest gap between
two frames, the number of long tasks and the longest, and how many sub-steps the player advanced.
Headless Chromium without a GPU paints in software, so a real browser does at least as well.
"""

from __future__ import annotations

import argparse
import json

from bench.common import machine
from bench.page_bench import CHROMIUM_ARGS
from bench.server import LiveServer
from model.translator import DEFAULT_CHECKPOINT

RECORD = """(ms) => new Promise((resolve) => {
  const gaps = [], tasks = [];
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) tasks.push(e.duration);
  });
  observer.observe({ type: 'longtask', buffered: false });
  const start = performance.now();
  const frameAtStart = ITTXray.state.frame;
  let last = start;
  const step = (now) => {
    gaps.push(now - last);
    last = now;
    if (now - start < ms) requestAnimationFrame(step);
    else {
      observer.disconnect();
      resolve({ gaps, tasks, frames: ITTXray.state.frame - frameAtStart, elapsed: now - start });
    }
  };
  document.getElementById('xr-play').click();
  requestAnimationFrame(step);
})"""


def summarise(sample: dict) -> dict:
    gaps = sorted(sample["gaps"][1:]) or [0.0]
    return {
        "fps": round(len(gaps) / (sample["elapsed"] / 1000), 1),
        "gap_p99_ms": round(gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))], 1),
        "gap_max_ms": round(gaps[-1], 1),
        "long_tasks": len(sample["tasks"]),
        "long_task_max_ms": round(max(sample["tasks"], default=0.0), 1),
        "sub_steps_played": sample["frames"],
    }


def run(checkpoint, seconds: float, speed: float, sizes: list[str]) -> dict:
    from playwright.sync_api import sync_playwright

    results: dict = {"machine": machine(), "speed": speed, "seconds": seconds, "sizes": {}}
    with LiveServer(checkpoint, env={"ITT_ACCESS_LOG": "false"}) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for size in sizes:
            width, height = (int(x) for x in size.split("x"))
            context = browser.new_context(viewport={"width": width, "height": height})
            page = context.new_page()
            page.goto(f"{server.url}/?text=The+cat+sits+on+the+mat.")
            page.locator("body[data-xray=ready]").wait_for()
            page.select_option("#xr-speed", f"{speed:g}")
            page.evaluate("document.getElementById('xr-stage').scrollIntoView()")
            results["sizes"][size] = summarise(page.evaluate(RECORD, seconds * 1000))
            context.close()
        browser.close()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--speed", type=float, default=1, choices=[0.25, 0.5, 1, 2, 4])
    parser.add_argument("--sizes", nargs="+", default=["1440x900", "390x844"], metavar="WxH")
    args = parser.parse_args(argv)
    r = run(args.checkpoint, args.seconds, args.speed, args.sizes)
    print("machine:", json.dumps(r["machine"]))
    for size, v in r["sizes"].items():
        print(f"{size:9s} {v['fps']:5.1f} frames/s, gap p99 {v['gap_p99_ms']} ms (max {v['gap_max_ms']}), "
              f"{v['long_tasks']} long tasks (max {v['long_task_max_ms']} ms), "
              f"{v['sub_steps_played']} sub-steps played in {args.seconds:g} s at {args.speed:g}×")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
