"""Time until a page is fully drawn in headless Chromium (every Plotly figure rendered), warm server.

    python -m bench.page_bench [--checkpoint DIR] [--pages / /attention /decode] [--visits 5]
                               [--sizes 1280x800 390x844] [--device-scale 2]

For each page: one unmeasured visit (warms the server and the browser cache, as for a reader who
has opened the app before), then ``--visits`` measured visits with the default sentence (its trace
is cached) and ``--visits`` with a new sentence each time (the model runs). "Drawn" means: no API
call in flight and at least as many drawn elements as the unmeasured visit ended with once it had
stood still for a second: Plotly figure layers, canvases (the x-ray) and Swagger UI operations
(/docs); figures in closed tabs are not counted. Time is from navigation start, by the page's own
clock. The x-ray (``/``) says itself when it is drawn: ``body[data-xray=ready]`` and the
animation frame after it (``data-xray-drawn-ms``), which is what is timed there. ``--sizes``
repeats everything per viewport (``--device-scale`` 2 draws at twice the pixels, as a phone does).
"""

from __future__ import annotations

import argparse
import json
from urllib.parse import quote

from bench.common import machine, percentiles, sentences
from bench.server import LiveServer
from model.translator import DEFAULT_CHECKPOINT

CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
DEFAULT_PAGES = ["/", "/pipeline", "/tokens", "/embeddings", "/attention", "/coreference", "/decode",
                 "/kv-cache", "/training", "/scale", "/tour", "/docs"]
# Figures drawn, no request pending, no spinner: return the page clock, else false.
DRAWN_ELEMENTS = ".js-plotly-plot .main-svg, canvas, #swagger-ui .opblock"
DRAWN = """([selector, expected]) => {
    const drawn = document.querySelectorAll(selector);
    const busy = document.body.classList.contains('busy') || window.__pending > 0;
    if (busy || drawn.length < Math.max(expected, 1)) return false;
    return performance.now();
}"""
# Count fetches in flight, so "drawn" cannot be declared between two API calls.
TRACK_FETCH = """
window.__pending = 0;
const originalFetch = window.fetch;
window.fetch = (...args) => {
    window.__pending += 1;
    return originalFetch(...args).finally(() => setTimeout(() => { window.__pending -= 1; }, 0));
};
"""


XRAY_DRAWN = """() => {
    if (!document.body) return false;  // "commit": the body may not be parsed yet
    const at = document.body.dataset.xrayDrawnMs;
    const busy = document.body.classList.contains('busy') || window.__pending > 0;
    return at && document.body.dataset.xray === 'ready' && !busy ? Number(at) : false;
}"""


def measure(page, url: str, expected: int, timeout_ms: float = 30000, xray: bool = False) -> float:
    page.goto(url, wait_until="commit")
    if xray:  # the x-ray says itself when it is drawn
        handle = page.wait_for_function(XRAY_DRAWN, polling="raf", timeout=timeout_ms)
        return float(handle.json_value())
    handle = page.wait_for_function(DRAWN, arg=[DRAWN_ELEMENTS, expected], polling="raf",
                                    timeout=timeout_ms)
    return float(handle.json_value())


def settled_count(page, url: str, quiet_ms: int = 1000, timeout_ms: int = 30000) -> int:
    """Open ``url`` and wait until the drawn-element count has stood still for ``quiet_ms``."""
    page.goto(url, wait_until="networkidle")
    count, still_since, waited = -1, 0, 0
    while waited < timeout_ms:
        now = page.evaluate(f"document.querySelectorAll({DRAWN_ELEMENTS!r}).length")
        still_since = still_since + 100 if now == count else 0
        if still_since >= quiet_ms and now > 0:
            return now
        count = now
        page.wait_for_timeout(100)
        waited += 100
    raise TimeoutError(f"{url}: nothing drawn settled within {timeout_ms} ms")


def run(checkpoint, pages: list[str], visits: int, sizes: list[str] | None = None,
        device_scale: float = 1) -> dict:
    from playwright.sync_api import sync_playwright

    sizes = sizes or ["1280x800"]
    results: dict = {"machine": machine(), "pages": {}, "device_scale": device_scale}
    with LiveServer(checkpoint, env={"ITT_ACCESS_LOG": "false"}) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        new_texts = iter(sentences(10, len(pages) * visits * len(sizes), offset=8000))
        for size in sizes:
            width, height = (int(x) for x in size.split("x"))
            context = browser.new_context(viewport={"width": width, "height": height},
                                          device_scale_factor=device_scale)
            context.add_init_script(TRACK_FETCH)
            page = context.new_page()
            for path in pages:
                expected = settled_count(page, server.url + path)
                xray = path == "/"
                cached = [measure(page, server.url + path, expected, xray=xray) for _ in range(visits)]
                fresh = [measure(page, f"{server.url}{path}?text={quote(next(new_texts))}", expected,
                                 xray=xray) for _ in range(visits)]
                key = path if len(sizes) == 1 and size == "1280x800" else f"{path} @{size}"
                results["pages"][key] = {"figures": expected, "cached_sentence": percentiles(cached),
                                         "new_sentence": percentiles(fresh)}
            context.close()
        browser.close()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--pages", nargs="+", default=DEFAULT_PAGES)
    parser.add_argument("--visits", type=int, default=5)
    parser.add_argument("--sizes", nargs="+", default=["1280x800"], metavar="WxH",
                        help="viewports to measure each page at")
    parser.add_argument("--device-scale", type=float, default=1, help="device pixel ratio")
    args = parser.parse_args(argv)
    r = run(args.checkpoint, args.pages, args.visits, args.sizes, args.device_scale)
    print("machine:", json.dumps(r["machine"]))
    for path, v in r["pages"].items():
        print(f"{path:22s} {v['figures']:3d} elements drawn: cached sentence p50 "
              f"{v['cached_sentence']['p50']:.0f} ms (max {v['cached_sentence']['max']:.0f}), "
              f"new sentence p50 {v['new_sentence']['p50']:.0f} ms (max {v['new_sentence']['max']:.0f})")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
