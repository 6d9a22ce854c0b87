"""What the served plotly.js bundle costs a page load: the cartesian bundle the app serves
(static/vendor, 1.5 MB) against plotly.js's full bundle (4.8 MB, from the plotly Python package,
a test dependency), on the same pages of the tiny test model. Each load opens a fresh browser
context (nothing compiled is kept, as on a reader's first visit) and waits until the page's busy
counter clears and the network is idle. The two bundles alternate load by load, so a busy moment
hits both alike.

Prints, per bundle: the median wall seconds of a load and the machine's CPU seconds per load
(every process, from /proc/stat: Chromium's renderer, browser and GPU processes and the server).
Linux only (/proc/stat).

Usage: python -m bench.plotly_bundle [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from tests.conftest import CHROMIUM, CHROMIUM_ARGS, make_tiny_checkpoint
from tests.e2e.conftest import running_server

PATHS = ["/pipeline", "/tokens", "/attention", "/decode?max_len=6", "/training", "/"]
VIEWPORT = {"width": 1440, "height": 900}


def busy_seconds() -> float:
    """CPU seconds the machine has spent busy (user, nice, system, irq, softirq, steal)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return (sum(map(int, fields[1:4])) + sum(map(int, fields[6:9]))) / 100


def load(browser, url: str, bundle: bytes | None) -> tuple[float, float]:
    """Wall and CPU seconds of one load in a fresh context; ``bundle`` replaces the served one."""
    context = browser.new_context(viewport=VIEWPORT)
    if bundle is not None:
        context.route("**/vendor/plotly.min.js",
                      lambda route: route.fulfill(body=bundle, content_type="text/javascript"))
    page = context.new_page()
    cpu, start = busy_seconds(), time.perf_counter()
    page.goto(url)
    page.locator("body.busy").wait_for(state="detached")
    page.wait_for_load_state("networkidle")
    wall = time.perf_counter() - start
    context.close()  # the renderer's exit is part of the load's cost
    return wall, busy_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="passes over the pages per bundle")
    args = parser.parse_args()
    import plotly
    from playwright.sync_api import sync_playwright

    full = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes()
    bundles = {"cartesian (served)": None, "full": full}
    with tempfile.TemporaryDirectory() as scratch:
        checkpoint = make_tiny_checkpoint(Path(scratch) / "tiny", learn_steps=200)
        with running_server(checkpoint, "bench-plotly-bundle.log") as server, \
                sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            load(browser, server + PATHS[0], None)  # the server's first answers, not counted
            walls = {name: [] for name in bundles}
            cpus = {name: [] for name in bundles}
            for _ in range(args.rounds):
                for path in PATHS:
                    for name, bundle in bundles.items():
                        wall, cpu = load(browser, server + path, bundle)
                        walls[name].append(wall)
                        cpus[name].append(cpu)
            browser.close()
    print(f"{len(PATHS)} pages x {args.rounds} rounds, a fresh context per load")
    for name in bundles:
        print(f"{name:20s} median load {statistics.median(walls[name]):.2f} s wall, "
              f"{statistics.mean(cpus[name]):.2f} CPU-s per load")


if __name__ == "__main__":
    main()
