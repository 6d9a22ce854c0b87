"""Screenshots of the main pages for the README, taken against the shipped checkpoint.

    python scripts/screenshots.py [--checkpoint DIR] [--out docs/screenshots] [--lang en]
    python scripts/screenshots.py --xray        # the x-ray: en, zh and zoomed at 1440×900, 390 px,
                                                # and the translation above its player

Starts the server on a free loopback port, opens each page at 1280×800 in headless Chromium,
waits until every figure is drawn, and writes docs/screenshots/<page>.png (viewport only, so each
file stays small).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.page_bench import CHROMIUM_ARGS, TRACK_FETCH  # noqa: E402
from bench.server import LiveServer  # noqa: E402
from model.translator import DEFAULT_CHECKPOINT  # noqa: E402


def shown(path: Path) -> str:
    """The file's path as printed: relative to the project when inside it, else as it is."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


PAGES = {
    "pipeline": "/pipeline",
    "tokens": "/tokens",
    "embeddings": "/embeddings",
    "attention": "/attention",
    "ablation": "/ablation?text=The+woman+said+that+she+was+tired.&off=cross.3.3,enc.2.2,cross.2.2",
    "decode": "/decode?strategy=beam&beam_size=4",
    "interpret": "/decode?why=1&step=0",
    "kv-cache": "/kv-cache",
    "training": "/training",
    "timeline": "/timeline?text=The+woman+said+that+she+was+tired.&at=step003000&vs=step001000",
    "scale": "/scale",
}
# Pages whose interesting part starts below the controls: scroll there before the shot.
SCROLL_TO = {"decode": "#beam-title", "interpret": "#why-title"}
SETTLED = """() => !document.body.classList.contains('busy') && window.__pending === 0"""
# The x-ray shots: name → (language, viewport, query, what to scroll just below the player, or
# None for the page as a learner lands on it). Time step 2, decoder layer 1's cross-attention.
XRAY_QUERY = "/?text=The+cat+sits+on+the+mat.&frame=37"
XRAY_SHOTS = {
    "xray-en": ("en", (1440, 900), XRAY_QUERY, None),
    "xray-zh": ("zh", (1440, 900), XRAY_QUERY, None),
    "xray-390": ("en", (390, 844), XRAY_QUERY, None),
    "xray-390-zh": ("zh", (390, 844), XRAY_QUERY, None),
    "xray-zoom": ("en", (1440, 900), XRAY_QUERY + "&zoom=d-0", ".xr-group.xr-zoomed"),
    "xray-block": ("en", (1440, 900), XRAY_QUERY + "&zoom=d-0&open=d-0-cross_attention",
                   '.xr-row[data-key="d-0-cross_attention"] .xr-panel'),
    "xray-chapter": ("en", (1440, 900), "/?text=The+children+were+playing+football+in+the+park.&chapter=9",
                     None),
    "xray-chapter-zh": ("zh", (1440, 900), "/?text=The+children+were+playing+football+in+the+park.&chapter=3",
                        None),
}
# The translation above the player (beam 4 first, greedy beside it) on a sentence where they differ.
TRANSLATION_QUERY = "/?text=The+museum+opens+at+nine+o%27clock+on+Sundays."


def open_xray(browser, address: str, lang: str, width: int, height: int):
    """A new browser context in ``lang`` at that viewport, the x-ray at ``address`` drawn and
    settled: (context, page)."""
    context = browser.new_context(viewport={"width": width, "height": height},
                                  locale="en-US" if lang == "en" else "zh-CN")
    context.add_init_script(TRACK_FETCH)
    page = context.new_page()
    origin = address.split("/?", 1)[0]
    page.goto(f"{origin}/lang/{lang}?next=/")
    page.goto(address)
    page.locator("body[data-xray=ready]").wait_for()
    page.wait_for_function(SETTLED, timeout=30000)
    return context, page


def xray_shots(browser, url: str, out: Path) -> None:
    """The x-ray as a learner lands on it (en, zh; 1440 px and a phone), a zoomed layer, an opened
    block and a guided chapter."""
    for name, (lang, (width, height), query, target) in XRAY_SHOTS.items():
        context, page = open_xray(browser, url + query, lang, width, height)
        if target:
            page.evaluate(  # the zoomed layer (or the opened block) just below the sticky player
                """(s) => {
                    const top = document.querySelector(s).getBoundingClientRect().top + window.scrollY;
                    const player = document.getElementById('xr-player').offsetHeight;
                    const header = document.querySelector('header.site').offsetHeight;
                    window.scrollTo(0, top - player - header - 12); }""", target)
        else:
            page.evaluate("window.scrollTo(0, 0)")  # the first screen, as a learner lands on it
        page.wait_for_function(SETTLED, timeout=30000)
        page.wait_for_timeout(500)  # the zoom's transition and the beacon's glide
        # the full-width views are JPEG: as PNG they pass the README's 200 KB per picture
        # (an opened block is mostly text and numbers: sharper, and small enough, as PNG)
        path = out / (f"{name}.jpg" if width >= 1000 and name != "xray-block" else f"{name}.png")
        extra = {"type": "jpeg", "quality": 72} if path.suffix == ".jpg" else {}
        page.screenshot(path=str(path), animations="disabled", **extra)
        print(f"{shown(path)}: {path.stat().st_size / 1024:.0f} KB")
        context.close()
    translation_shot(browser, url, out)


def translation_shot(browser, url: str, out: Path) -> None:
    """The decoding options, the translation box and the note on beam search, at 1280 px."""
    context, page = open_xray(browser, url + TRANSLATION_QUERY, "en", 1280, 800)
    top = page.locator("#xr-options").bounding_box()
    bottom = page.locator("#xr-beam-note").bounding_box() or page.locator("#xr-result").bounding_box()
    path = out / "xray-translation.png"
    page.screenshot(path=str(path), animations="disabled", full_page=True, clip={
        "x": 0, "y": top["y"] - 8, "width": 1280, "height": bottom["y"] + bottom["height"] - top["y"] + 16})
    print(f"{shown(path)}: {path.stat().st_size / 1024:.0f} KB")
    context.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--lang", default="en", choices=["en", "zh"])
    parser.add_argument("--pages", nargs="*", default=list(PAGES))
    parser.add_argument("--xray", action="store_true", help="only the x-ray's shots")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with LiveServer(args.checkpoint, env={"ITT_ACCESS_LOG": "false"}) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        if args.xray:
            xray_shots(browser, server.url, args.out)
            browser.close()
            return
        context = browser.new_context(viewport={"width": 1280, "height": 800},
                                      locale="en-US" if args.lang == "en" else "zh-CN")
        context.add_init_script(TRACK_FETCH)
        page = context.new_page()
        page.goto(f"{server.url}/lang/{args.lang}?next=/")
        for name in args.pages:
            response = page.goto(server.url + PAGES[name], wait_until="networkidle")
            if response is None or response.status != 200:
                print(f"{name}: skipped ({response.status if response else 'no response'})")
                continue
            page.wait_for_function(SETTLED, timeout=30000)
            if name in SCROLL_TO:
                page.evaluate(  # the element's top just below the sticky header
                    "(s) => window.scrollTo(0, document.querySelector(s).getBoundingClientRect().top"
                    " + window.scrollY - 70)", SCROLL_TO[name])
            page.wait_for_timeout(300)  # let Plotly finish its transitions
            path = args.out / f"{name}.png"
            page.screenshot(path=str(path), animations="disabled")
            print(f"{shown(path)}: {path.stat().st_size / 1024:.0f} KB")
        browser.close()


if __name__ == "__main__":
    main()
