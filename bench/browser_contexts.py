"""How the test suite's browser should open its pages: the same four pages of the tiny test model,
loaded (until the page's busy counter clears and the network is idle) in four ways:

- ``fresh-context``: a new in-memory context per page (what every browser test once did);
- ``new-page``: a new page per load in one in-memory context (shared HTTP cache);
- ``same-page``: one page navigated from load to load;
- ``persistent``: a new page per load in a context with a profile on disk
  (``launch_persistent_context``: V8 keeps the compiled plotly.js between pages), what
  ``tests/conftest.py``'s ``warm_context`` does.

Usage: python -m bench.browser_contexts [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from tests.conftest import CHROMIUM, CHROMIUM_ARGS, make_tiny_checkpoint
from tests.e2e.conftest import running_server

PATHS = ["/training", "/decode?max_len=6", "/embeddings", "/kv-cache?steps=4&runs=1"]
VIEWPORT = {"width": 1440, "height": 900}


def load(page, url: str) -> float:
    start = time.perf_counter()
    page.goto(url)
    page.locator("body.busy").wait_for(state="detached")
    page.wait_for_load_state("networkidle")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="passes over the four pages per way")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as scratch:
        checkpoint = make_tiny_checkpoint(Path(scratch) / "tiny")
        with running_server(checkpoint, "bench-browser-contexts.log") as server, \
                sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            persistent = playwright.chromium.launch_persistent_context(
                Path(scratch) / "profile", executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                viewport=VIEWPORT)
            shared = browser.new_context(viewport=VIEWPORT)
            kept = shared.new_page()
            times: dict[str, list[float]] = {"fresh-context": [], "new-page": [], "same-page": [],
                                             "persistent": []}
            for _ in range(args.rounds):
                for path in PATHS:  # the ways interleaved, so a busy moment hits them alike
                    url = server + path
                    context = browser.new_context(viewport=VIEWPORT)
                    times["fresh-context"].append(load(context.new_page(), url))
                    context.close()
                    page = shared.new_page()
                    times["new-page"].append(load(page, url))
                    page.close()
                    times["same-page"].append(load(kept, url))
                    page = persistent.new_page()
                    times["persistent"].append(load(page, url))
                    page.close()
            persistent.close()
            browser.close()
    print(f"{'way':15s} {'loads':>5s} {'mean s':>7s} {'p50 s':>6s} {'max s':>6s}")
    for way, values in times.items():
        print(f"{way:15s} {len(values):5d} {statistics.mean(values):7.2f} "
              f"{statistics.median(values):6.2f} {max(values):6.2f}")


if __name__ == "__main__":
    main()
