"""The x-ray reads true and whole (issue 75 items 3, 4 and 8), on the shipped model, in Chromium,
at 1440×900 and 390×844, in English and Chinese, on sentences of this file's own:

- the legend lists exactly the drawings on screen (a vector's entries, a vector's size, attention
  weights, probabilities), and the drawings follow what it says: a weight's line is darker and
  thicker as the weight grows, whatever the attention; no colour is written into the x-ray's
  scripts, every one comes from the palette;
- at 1440×900 the whole picture, its output row included, is on the first screen below the
  controls;
- a token chip is never turned or cut and stays over its own lane, and no text is under 12 px.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.conftest import warm_page
from tests.e2e.conftest import shot
from tests.e2e.test_xray import SEED, ready

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SIZES = {"wide": (1440, 900), "phone": (390, 844)}
TEN = "My brother reads a long book in the garden tonight."  # ten words, 13 tokens
LONG_WORDS = "Yesterday my grandmother baked delicious chocolate cookies for the neighbours."  # ten words
# the long sentence of each drawing's words, in the legend under "How to read this picture"
SAYS = {"en": {"values": "blue below 0", "size": "root-mean-square", "weight": "darker purple",
               "probability": "orange"},
        "zh": {"values": "小于 0 为蓝", "size": "均方根", "weight": "紫色越深", "probability": "橙色"}}


@pytest.fixture()
def server(shipped_server):
    """The app on the shipped checkpoint (one server for every file that needs it)."""
    return shipped_server


def open_xray(context, server, size: str, lang: str, text: str, query: str = ""):
    width, height = SIZES[size]
    page = warm_page(context, width, height)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server}/lang/{lang}?next={quote(f'/?text={quote(text)}{query}')}")
    ready(page)
    page.errors = errors
    return page


def drawn_encodings(page) -> set[str]:
    """What the picture draws, read from the drawings themselves: a visible row's lanes drawn as
    entries or as sizes (from its width, its lane count and d_model, as a lane needs ~1.5 px a
    column of 8 values), attention rows, the output row."""
    return set(page.evaluate("""() => {
      const out = new Set();
      const kind = (width, n, vector) => (
        Math.max(4, Math.min(width / n - 4, 90)) < 1.5 * Math.ceil(vector.length / 8) ? 'size' : 'values');
      for (const row of ITTXray.state.rows) {
        if (!row.fig || !row.fig.offsetParent) continue;
        if (row.type === 'logits') { out.add('probability'); continue; }
        if (row.type === 'attention') out.add(ITTXray.state.head === 'all' ? 'heads' : 'weight');
        const tr = ITTXray.state.trace;
        const n = row.side === 'encoder' ? tr.source_tokens.length : tr.steps.length;
        const vectors = ITTXray.state.xr[row.side].values;
        if (!vectors) continue;
        out.add(kind(row.width, n, vectors[row.stage][0]));
        if (row.attends === 'cross') {  // the memory's strip above its lines: the encoder's last vectors
          const memory = ITTXray.state.xr.encoder.values;
          out.add(kind(row.width, memory[memory.length - 1].length, memory[memory.length - 1][0]));
        }
      }
      return [...out];
    }"""))


def legend_items(page, selector: str) -> list[str]:
    return page.locator(f"{selector} .xr-key-item").evaluate_all("is => is.map(i => i.dataset.encoding)")


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", ["wide", "phone"])
def test_the_legend_lists_exactly_the_drawings_on_screen(warm_context, server, size, lang):
    for query in ("&frame=60", "&zoom=d-1&frame=120"):
        page = open_xray(warm_context, server, size, lang, TEN, query)
        page.wait_for_function("document.body.dataset.xrayStrips === 'ready'")
        drawn = drawn_encodings(page)
        assert {"weight", "probability"} <= drawn and drawn & {"values", "size"}, drawn
        if "zoom" in query:  # a layer drawn large shows its vectors' entries
            assert "values" in drawn
        # the long legend (How to read this picture) and the short one beside the breadcrumb
        assert set(legend_items(page, "#xr-legend")) == drawn, (size, lang, query)
        if size == "wide":
            assert set(legend_items(page, "#xr-key")) == drawn
            assert page.locator("#xr-key").is_visible()
        page.locator("#xr-about > summary").click()
        for name in drawn:
            said = page.locator(f'#xr-legend .xr-key-item[data-encoding="{name}"]').text_content()
            assert SAYS[lang][name] in said, (name, said)
        shot(page, f"xray-legend-{size}-{lang}{'-zoom' if 'zoom' in query else ''}")
        assert page.errors == []
        page.close()


def test_every_head_at_once_swaps_the_weight_entry_for_the_heads(warm_context, server):
    page = open_xray(warm_context, server, "wide", "en", TEN, "&frame=120")
    page.select_option("#xr-head", "all")
    page.locator('#xr-key .xr-key-item[data-encoding="heads"]').wait_for()
    items = legend_items(page, "#xr-key")
    assert "heads" in items and "weight" not in items
    page.select_option("#xr-head", "avg")
    page.locator('#xr-key .xr-key-item[data-encoding="weight"]').wait_for()
    assert page.errors == []
    page.close()


def luminance(colour: str) -> float:
    r, g, b = (int(v) for v in re.findall(r"\d+", colour)[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


@pytest.mark.parametrize("size", ["wide", "phone"])
def test_a_weight_is_drawn_as_the_legend_says_in_every_attention(warm_context, server, size):
    page = open_xray(warm_context, server, size, "zh", TEN, "&zoom=d-1&frame=120")
    lines = page.locator(".xr-row svg path[data-w]").evaluate_all("""ps => ps.map(p => ({
      w: Number(p.dataset.w), stroke: p.getAttribute('stroke'), width: Number(p.getAttribute('stroke-width')),
      kind: p.closest('.xr-row').dataset.block }))""")
    kinds = {line["kind"] for line in lines}
    assert {"self_attention", "cross_attention"} <= kinds, kinds
    ordered = sorted(lines, key=lambda line: line["w"])
    # one scale for every attention: the larger the weight, the darker and the thicker its line
    for a, b in zip(ordered, ordered[1:], strict=False):
        if b["w"] - a["w"] > 0.01:
            assert luminance(b["stroke"]) <= luminance(a["stroke"]) and b["width"] >= a["width"], (a, b)
    # the same weight looks the same in a self-attention and a cross-attention row
    by_weight = {}
    for line in lines:
        by_weight.setdefault(round(line["w"], 4), set()).add(line["stroke"])
    assert all(len(strokes) == 1 for strokes in by_weight.values())
    # and it is the palette's sequential purple, never the diverging red or blue of a vector
    for line in ordered[-5:]:
        r, g, b = (int(v) for v in re.findall(r"\d+", line["stroke"])[:3])
        assert b > g and r > g, line
    assert page.errors == []
    page.close()


def test_no_colour_is_written_into_the_xrays_scripts():
    # result.js, saved.js and whatif.js belong to other work in progress and are left out here
    others = {"result.js", "saved.js", "whatif.js"}
    mine = [p for p in (ROOT / "static/js/xray").glob("*.js") if p.name not in others]
    assert len(mine) >= 10
    literal = re.compile(r"#[0-9a-fA-F]{3,8}\b|\brgba?\(\s*\d|\bhsla?\(\s*\d")
    found = [(p.name, m.group()) for p in mine for m in literal.finditer(p.read_text())]
    assert found == []


def first_screen(page) -> dict:
    return page.evaluate("""() => {
      const box = (e) => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom}; };
      const q = (s) => box(document.querySelector(s));
      return {scroll: window.scrollY, height: window.innerHeight, stage: q('#xr-stage'),
              player: q('#xr-player'),
              toolbar: q('#xr-toolbar'), sentence: q('#text'), output: q('.xr-row[data-key="dec-output"]'),
              chosen: q('.xr-row[data-key="dec-chosen"]'),
              rows: [...document.querySelectorAll('#xr-stage .xr-row')].filter(r => r.offsetParent)
                .map(r => ({key: r.dataset.key, ...box(r)}))};
    }""")


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("text", [SEED, TEN, LONG_WORDS])
def test_the_whole_picture_and_its_output_row_fit_the_first_screen_at_1440(warm_context, server, text, lang):
    page = open_xray(warm_context, server, "wide", lang, text)
    b = first_screen(page)
    assert b["scroll"] == 0
    # the controls above the picture: sentence, toolbar, player
    assert b["sentence"]["bottom"] <= b["toolbar"]["top"] <= b["player"]["top"] <= b["stage"]["top"]
    assert b["stage"]["bottom"] <= b["height"], (text, lang, b["stage"])
    assert b["output"]["bottom"] <= b["height"] and b["chosen"]["bottom"] <= b["height"]
    off = [r["key"] for r in b["rows"] if r["bottom"] > b["height"] or r["top"] < b["player"]["bottom"] - 1]
    assert off == [], off
    assert len(b["rows"]) >= 40  # every row of the overview, none hidden to make room
    shot(page, f"xray-first-screen-{lang}-{len(text)}")
    assert page.errors == []
    page.close()


CHIPS = """() => [...document.querySelectorAll('.xr-lanes')].filter(b => b.offsetParent).map(box => {
  const lanes = box.getBoundingClientRect();
  const chips = [...box.querySelectorAll('.xr-token')];
  return {n: chips.length, lines: Number(box.dataset.lines), chips: chips.map((c, i) => {
    const r = c.getBoundingClientRect();
    const range = document.createRange();
    range.selectNodeContents(c);
    const style = getComputedStyle(c);
    return {text: c.textContent, title: c.title, left: r.left, right: r.right, top: r.top, bottom: r.bottom,
            centre: lanes.left + (i + 0.5) * lanes.width / chips.length,
            textLines: range.getClientRects().length,
            cut: c.scrollWidth > c.clientWidth, writing: style.writingMode, transform: style.transform,
            hidden: style.visibility === 'hidden'};
  })};
})"""


def small_text(page) -> list:
    """Every visible text under 12 CSS px on the page, HTML or SVG (text sized 0 is not shown)."""
    return page.evaluate("""() => {
      const out = [];
      const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
      while (walker.nextNode()) {
        const node = walker.currentNode;
        const e = node.parentElement;
        if (!node.textContent.trim() || !e) continue;
        const r = e.getBoundingClientRect();
        const style = getComputedStyle(e);
        if (!r.width || !r.height || style.visibility === 'hidden') continue;
        if (e.closest('[hidden], .visually-hidden')) continue;
        const size = parseFloat(style.fontSize);
        if (size > 0 && size < 11.99) out.push([e.tagName, size, node.textContent.trim().slice(0, 30)]);
      }
      return out;
    }""")


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", ["wide", "phone"])
def test_chips_are_never_turned_or_cut_and_no_text_is_under_12px(warm_context, server, size, lang):
    width = SIZES[size][0]
    for text in (SEED, LONG_WORDS):
        for query in ("", "&frame=200", "&zoom=e-0&frame=200"):
            page = open_xray(warm_context, server, size, lang, text, query)
            rows = page.evaluate(CHIPS)
            assert len(rows) == 2 and all(row["n"] >= 5 for row in rows), rows
            for row in rows:
                assert 1 <= row["lines"] <= 3, row["lines"]
                chips = row["chips"]
                for c in chips:
                    assert c["writing"] == "horizontal-tb" and c["transform"] == "none", c
                    assert not c["cut"] and c["textLines"] == 1 and c["title"] == c["text"], c
                    if not c["hidden"]:  # over its own lane
                        assert c["left"] - 1 <= c["centre"] <= c["right"] + 1, c
                # no two chips of a row cover each other
                for i, a in enumerate(chips):
                    for b in chips[i + 1:]:
                        apart = (a["right"] <= b["left"] + 0.5 or b["right"] <= a["left"] + 0.5
                                 or a["bottom"] <= b["top"] + 0.5 or b["bottom"] <= a["top"] + 0.5)
                        assert apart, (a, b)
            assert small_text(page) == [], (size, lang, text, query)
            # a side scrolls, not the page
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            shot(page, f"xray-chips-{size}-{lang}-{len(text)}{query.replace('&', '-').replace('=', '')}")
            assert page.errors == []
            page.close()


def test_an_opened_block_and_the_beam_tree_have_no_text_under_12px(warm_context, server):
    query = "&strategy=beam&beam_size=3&zoom=d-1&frame=200"
    page = open_xray(warm_context, server, "wide", "zh", LONG_WORDS, query)
    page.locator('.xr-row[data-key="d-1-cross_attention"] button.xr-head').click()
    page.locator('.xr-row[data-key="d-1-cross_attention"] .xr-panel .xr-step').first.wait_for()
    page.locator("#xr-beam-svg text").first.wait_for(state="attached")
    assert small_text(page) == []
    assert page.errors == []
    page.close()
