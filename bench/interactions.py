"""How long a click takes to show its result, headless Chromium, warm server (issue 75, item 7).

    python -m bench.interactions [--checkpoint DIR] [--repeats 9] [--sizes 1440x900 390x844]
                                 [--only decode xray]

Interactions timed (the page's own clock, ``performance.now()``):

- ``/decode`` Next and Prev (the step's title, figures and candidates redrawn);
- ``/decode`` switching the strategy (greedy ↔ beam search, then Apply): until the new strategy's
  answer is drawn (its beam tree shown or hidden, no request in flight), the server's answer
  included; it also checks that the page was not reloaded (a marker on ``window`` survives);
- the x-ray (``/``): opening a block from the overview (it zooms into the block's layer and
  shows the block's numbers, /api/xray/block answered), zooming into a layer by its title, and
  a guided chapter's Next (chapters 1 → 12).

Each time runs from the click event's own time stamp (``event.timeStamp``, the input as the page
receives it) to the first animation frame in which the page shows the result (checked in every
requestAnimationFrame, before that frame paints). Prints p50/p90 per interaction and viewport.
The server answers repeated requests from its caches, as it does for a reader who clicks back and
forth; the first opening of each x-ray block asks the model.
"""

from __future__ import annotations

import argparse
import json

from bench.common import machine, percentiles
from bench.page_bench import CHROMIUM_ARGS, TRACK_FETCH
from bench.server import LiveServer
from model.translator import DEFAULT_CHECKPOINT

# The first click after arming records its time stamp (the capture phase on window runs first).
CLICK_CLOCK = TRACK_FETCH + """
window.__t0 = null;
window.addEventListener('click', (event) => {
  if (window.__armed) { window.__t0 = event.timeStamp; window.__armed = false; }
}, true);
"""
IDLE = "!document.body.classList.contains('busy') && window.__pending === 0"


def timed(page, selector: str, condition: str, timeout_ms: float = 20000) -> float:
    """Click ``selector``; milliseconds from the click's time stamp to the first animation frame
    in which the JavaScript expression ``condition`` holds."""
    page.evaluate("""(source) => {
      window.__t1 = null; window.__t0 = null; window.__armed = true;
      const cond = (0, eval)(`() => (${source})`);
      const loop = () => {
        if (window.__t0 !== null && cond()) { window.__t1 = performance.now(); return; }
        requestAnimationFrame(loop);
      };
      requestAnimationFrame(loop);
    }""", condition)
    page.click(selector)
    page.wait_for_function("window.__t1 !== null", timeout=timeout_ms)
    return float(page.evaluate("window.__t1 - window.__t0"))


def decode_interactions(page, url: str, repeats: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"decode next": [], "decode prev": [], "decode strategy switch": []}
    page.goto(url + "/decode", wait_until="networkidle")
    page.wait_for_function(f"document.getElementById('step-title').textContent.trim() && {IDLE}")
    total = int(page.evaluate("Number(document.getElementById('step-slider').max)")) + 1
    title = "document.getElementById('step-title').textContent"
    for _ in range(repeats):
        for _ in range(min(3, total - 1)):
            before = page.evaluate(title)
            out["decode next"].append(timed(page, "#next-step", f"{title} !== {json.dumps(before)}"))
        for _ in range(min(3, total - 1)):
            before = page.evaluate(title)
            out["decode prev"].append(timed(page, "#prev-step", f"{title} !== {json.dumps(before)}"))
    page.evaluate("window.__marker = 'still here'")
    reloaded = False
    for i in range(repeats):
        strategy = "beam" if i % 2 == 0 else "greedy"
        page.check(f'#strategy-form input[name="strategy"][value="{strategy}"]')
        shown = ("!document.getElementById('beam').hidden && document.querySelector('#beam-tree .main-svg')"
                 if strategy == "beam" else "document.getElementById('beam').hidden")
        condition = (f"new URLSearchParams(location.search).get('strategy') === '{strategy}' && "
                     f"{shown} && {IDLE}")
        apply = page.locator('#strategy-form button[type="submit"]')
        if apply.is_visible():  # a page that applies the choice at once has no Apply to press
            ms = timed(page, '#strategy-form button[type="submit"]', condition)
        else:
            ms = float("nan")
        out["decode strategy switch"].append(ms)
        reloaded = reloaded or page.evaluate("window.__marker !== 'still here'")
        page.evaluate("window.__marker = 'still here'")
    out["decode strategy switch reloaded the page"] = [float(reloaded)]
    return out


def xray_interactions(page, url: str, repeats: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"x-ray open block": [], "x-ray zoom layer": [],
                                   "x-ray chapter next": []}
    page.goto(url + "/", wait_until="commit")
    page.wait_for_function(f"document.body && document.body.dataset.xray === 'ready' && {IDLE}",
                           timeout=60000)
    zoomed = "document.getElementById('xr-stage').dataset.zoom"
    keys = page.evaluate("[...document.querySelectorAll('.xr-group-title')].map((b) => b.dataset.zoom)")
    for i in range(repeats):  # zoom in by a layer's title, then out again (not timed)
        key = keys[i % len(keys)]
        out["x-ray zoom layer"].append(timed(page, f'.xr-group-title[data-zoom="{key}"]',
                                             f"{zoomed} === '{key}'"))
        page.click("#xr-crumb-all")
        page.wait_for_function(f"!{zoomed}")
    heads = page.evaluate("""[...document.querySelectorAll('button[aria-controls^="xr-panel-"]')]
        .map((b) => b.getAttribute('aria-controls').slice('xr-panel-'.length))""")
    for i in range(repeats):  # a block from the overview, then closed and zoomed out (not timed)
        key = heads[i % len(heads)]
        head = f'button[aria-controls="xr-panel-{key}"]'
        panel = f"document.getElementById('xr-panel-{key}')"
        out["x-ray open block"].append(timed(
            page, head, f"!{panel}.hidden && {panel}.querySelector('.xr-step') && {IDLE}"))
        page.click(head)
        if page.is_enabled("#xr-crumb-all"):
            page.click("#xr-crumb-all")
        page.wait_for_function(f"!{zoomed} && {panel}.hidden")
    chapter = "document.getElementById('xr-chapter').dataset.chapter"
    for _ in range(max(1, repeats // 3)):
        page.click("#xr-chapters-start")
        page.wait_for_function(f"{chapter} === '1' && !document.getElementById('xr-chapter').hidden")
        for n in range(2, 13):
            out["x-ray chapter next"].append(timed(page, "#xr-chapter-next", f"{chapter} === '{n}'"))
        page.click("#xr-chapter-close")
    return out


def run(checkpoint, repeats: int, sizes: list[str], only: list[str]) -> dict:
    from playwright.sync_api import sync_playwright

    results: dict = {"machine": machine(), "interactions": {}}
    with LiveServer(checkpoint, env={"ITT_ACCESS_LOG": "false"}) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for size in sizes:
            width, height = (int(x) for x in size.split("x"))
            # bypass_csp: the clock compiles its condition in the page (the app's policy has no eval)
            context = browser.new_context(viewport={"width": width, "height": height}, bypass_csp=True)
            context.add_init_script(CLICK_CLOCK)
            page = context.new_page()
            times: dict[str, list[float]] = {}
            if "decode" in only:
                times.update(decode_interactions(page, server.url, repeats))
            if "xray" in only:
                times.update(xray_interactions(page, server.url, repeats))
            for name, values in times.items():
                values = [v for v in values if v == v]  # NaN: not measured
                results["interactions"][f"{name} @{size}"] = percentiles(values) if values else None
            context.close()
        browser.close()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--sizes", nargs="+", default=["1440x900"], metavar="WxH")
    parser.add_argument("--only", nargs="+", default=["decode", "xray"], choices=["decode", "xray"])
    args = parser.parse_args(argv)
    r = run(args.checkpoint, args.repeats, args.sizes, args.only)
    print("machine:", json.dumps(r["machine"]))
    for name, stats in r["interactions"].items():
        if stats is None:
            print(f"{name:48s} not measured")
        elif "reloaded" in name:
            print(f"{name:48s} {'yes' if stats['max'] else 'no'}")
        else:
            print(f"{name:48s} p50 {stats['p50']:6.0f} ms · p90 {stats['p90']:6.0f} ms "
                  f"(n={stats['n']})")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
