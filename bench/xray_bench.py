"""The x-ray in headless Chromium: time until the page is fully drawn, and the frame rate while playing.

    python -m bench.xray_bench [--checkpoint DIR] [--visits 5] [--play-seconds 5]
    python -m bench.xray_bench --screenshots docs/screenshots     # retakes docs/screenshots/xray-*

"Fully drawn" is the page's own clock (from navigation start) at the first animation frame after
every row's strips, attention lines, the sampling table and the player are drawn; the server is
warm (one unmeasured visit first). Visits with a cached 10-word sentence and with a new one each
time (the model runs) are reported separately. The frame rate is counted with
requestAnimationFrame while the player runs at 4× speed (a sub-step every 350 ms, the chosen
character flying to the output at the end of every time step), together with the longest frame.
Targets: drawn ≤ 1 s for a 10-word sentence; ≥ 30 frames per second while playing.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from urllib.parse import quote

from bench.common import machine, percentiles, sentences
from bench.server import LiveServer
from model.translator import DEFAULT_CHECKPOINT

XRAY = "/"  # where the page is served
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
        url = f"{server.url}{XRAY}?text={quote(warm_text)}"
        drawn_ms(page, url)  # unmeasured: warms the server, its caches and the browser cache
        cached = [drawn_ms(page, url) for _ in range(visits)]
        new = [drawn_ms(page, f"{server.url}{XRAY}?text={quote(text)}") for text in fresh[:visits]]
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


SEED = "The cat sits on the mat."
# The sticky player would cover the top of an element screenshot: let it scroll for those.
UNSTICK = ".xr-player, header.site { position: static !important; }"


def screenshots(checkpoint, folder: Path) -> list[Path]:
    """The x-ray as the README shows it: desktop en and zh, 390 px, a block opened, the sampling
    controls, a forced comparison and the beam tree (the seed sentence, shipped checkpoint)."""
    from playwright.sync_api import sync_playwright

    folder.mkdir(parents=True, exist_ok=True)
    taken = []
    with LiveServer(checkpoint, env={"ITT_ACCESS_LOG": "false"}) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)

        def visit(query: str, width: int = 1280, height: int = 1000, lang: str = "en"):
            context = browser.new_context(viewport={"width": width, "height": height},
                                          extra_http_headers={"Accept-Language": lang})
            page = context.new_page()
            page.goto(f"{server.url}{XRAY}?text={quote(SEED)}{query}")
            page.locator("body[data-xray=ready]").wait_for()
            page.locator("body.busy").wait_for(state="detached")
            return context, page

        def save(target, name: str, jpeg: bool = False) -> None:
            # the whole-model overviews are JPEG: their colour strips make a PNG of them ~350 KB
            path = folder / f"xray-{name}.{'jpg' if jpeg else 'png'}"
            target.screenshot(path=str(path), **({"type": "jpeg", "quality": 82} if jpeg else {}))
            taken.append(path)

        # time step 3, decoder layer 2's cross-attention (3 + 3 layers: 14 encoder frames, 20 per step)
        step3_cross = (2 + 4 * 3) + 2 * (2 + 6 * 3) + 1 + 6 * 1 + 2
        for lang in ("en", "zh"):
            context, page = visit(f"&frame={step3_cross}", height=860, lang=lang)
            page.evaluate("window.scrollTo(0, document.getElementById('xr-player').offsetTop - 4)")
            page.wait_for_timeout(300)
            save(page, lang, jpeg=True)
            context.close()
        context, page = visit(f"&frame={step3_cross}", width=390, height=844)
        page.evaluate("window.scrollTo(0, document.getElementById('xr-decoder').offsetTop - 260)")
        page.wait_for_timeout(300)
        save(page, "390")
        context.close()

        context, page = visit(f"&frame={step3_cross}")
        page.add_style_tag(content=UNSTICK)
        row = page.locator('.xr-row[data-key="d-1-cross_attention"]')
        row.locator("button.xr-head").click()
        row.locator(".xr-step").first.wait_for()
        page.locator("body.busy").wait_for(state="detached")
        save(row, "block")
        sampling = page.locator("#xr-sampling")
        for selector, value in (("#xr-temperature", "1.5"), ("#xr-topk", "6"), ("#xr-topp", "0.9")):
            page.locator(selector).evaluate(
                "(el, v) => { el.value = v; el.dispatchEvent(new Event('input', {bubbles: true})); }",
                value)
        page.fill("#xr-seed", "3")
        page.locator("#xr-draw-button").click()
        save(sampling, "sampling")
        page.locator("#xr-dist-body tr").nth(1).locator("button").click()
        page.locator("#xr-compare").wait_for()
        page.locator("body[data-xray=ready]").wait_for()
        save(page.locator("#xr-compare"), "forced")
        context.close()

        context, page = visit("&strategy=beam&beam_size=3")
        page.add_style_tag(content=UNSTICK)
        save(page.locator("#xr-beam"), "beam")
        context.close()
        browser.close()
    return taken


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--visits", type=int, default=5)
    parser.add_argument("--play-seconds", type=float, default=5.0)
    parser.add_argument("--screenshots", type=Path, metavar="DIR",
                        help="only retake the x-ray screenshots into DIR (e.g. docs/screenshots)")
    args = parser.parse_args(argv)
    if args.screenshots:
        for path in screenshots(args.checkpoint, args.screenshots):
            print(path)
        return
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
