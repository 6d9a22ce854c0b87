"""The x-ray in headless Chromium: time until the page is fully drawn, and the frame rate while playing.

    python -m bench.xray_bench [--checkpoint DIR] [--visits 5] [--play-seconds 5]

"Fully drawn" is the page's own clock (from navigation start) at the first animation frame after
every row's strips, attention lines, the sampling table and the player are drawn; the server is
warm (one unmeasured visit first). Visits with a cached 10-word sentence and with a new one each
time (the model runs) are reported separately. The frame rate is counted with
requestAnimationFrame while the player runs at 4× speed (a sub-step every 350 ms, the chosen
character flying to the output at every seventh), together with the longest frame.
Targets: drawn ≤ 1 s for a 10-word sentence; ≥ 30 frames per second while playing.
"""

from __future__ import annotations

import argparse
import json
import time
from urllib.parse import quote

from bench.common import machine, percentiles, sentences
from bench.server import LiveServer
from model.translator import DEFAULT_CHECKPOINT

CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
# Count animation frames for ``ms`` milliseconds; resolves to the number and the longest gap.
COUNT_FRAMES = """(ms) => new Promise((resolve) => {
    const gaps = [];
    let last = performance.now();
    const start = last;
    function frame(now) {
        gaps.push(now - last);
        last = now;
        if (now - start < ms) requestAnimationFrame(frame);
        else resolve({frames: gaps.length, seconds: (now - start) / 1000, longest: Math.max(...gaps),
                      over_33ms: gaps.filter((g) => g > 33.4).length});
    }
    requestAnimationFrame(frame);
})"""


def drawn_ms(page, url: str) -> float:
    page.goto(url, wait_until="commit")
    page.locator("body[data-xray-drawn-ms]").wait_for(timeout=30000)
    return float(page.locator("body").get_attribute("data-xray-drawn-ms"))


def run(checkpoint, visits: int, play_seconds: float) -> dict:
    from playwright.sync_api import sync_playwright

    texts = sentences(10, 2 * visits + 2, offset=9100)
    warm_text, fresh = texts[0], texts[1:]
    results: dict = {"machine": machine(), "sentence": warm_text}
    with LiveServer(checkpoint, env={"ITT_ACCESS_LOG": "false"}) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        url = f"{server.url}/xray?text={quote(warm_text)}"
        drawn_ms(page, url)  # unmeasured: warms the server, its caches and the browser cache
        cached = [drawn_ms(page, url) for _ in range(visits)]
        new = [drawn_ms(page, f"{server.url}/xray?text={quote(text)}") for text in fresh[:visits]]
        results["drawn_cached_ms"] = percentiles(cached)
        results["drawn_new_sentence_ms"] = percentiles(new)
        page.goto(url)
        page.locator("body[data-xray=ready]").wait_for()
        page.select_option("#xr-speed", "4")
        page.locator("#xr-play").click()
        started = time.perf_counter()
        counted = page.evaluate(COUNT_FRAMES, play_seconds * 1000)
        results["play"] = {**counted, "fps": counted["frames"] / counted["seconds"],
                           "wall_s": time.perf_counter() - started,
                           "frame_reached": int(page.locator("#xr-scrub").input_value())}
        browser.close()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--visits", type=int, default=5)
    parser.add_argument("--play-seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    r = run(args.checkpoint, args.visits, args.play_seconds)
    print("machine:", json.dumps(r["machine"]))
    c, n, play = r["drawn_cached_ms"], r["drawn_new_sentence_ms"], r["play"]
    print(f"x-ray fully drawn, 10-word sentence, warm server (target ≤ 1000 ms): cached sentence "
          f"p50 {c['p50']:.0f} ms (max {c['max']:.0f}); new sentence p50 {n['p50']:.0f} ms "
          f"(max {n['max']:.0f})")
    print(f"playing at 4× (target ≥ 30 fps): {play['fps']:.1f} fps over {play['seconds']:.1f} s, "
          f"longest frame {play['longest']:.0f} ms, {play['over_33ms']} frames over 33 ms, "
          f"reached frame {play['frame_reached']}")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
