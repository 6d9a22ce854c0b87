"""What a learner meets on a phone and in both languages (issue 11): no page scrolls sideways at
390 px, even with a long sentence and a long 。。。 output; every chart keeps one mode-bar button;
the explanations the articles give are on the pages, in English and in Chinese."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from tests.e2e.conftest import shot, unfold, wait_idle

pytestmark = pytest.mark.e2e
# long for a phone, yet within the tiny test model's 64-token limit
LONG = "The weather is nice today, so he gave her a flower because she was sad and tired."
PAGES = ["/", "/pipeline", "/tokens", "/embeddings", "/attention", "/coreference", "/decode", "/kv-cache",
         "/training", "/scale", "/tour", "/tour?step=5", "/tour?step=9", "/docs"]
FORCED = "&".join(["forced=" + quote("。")] * 40)  # a long run with no line-break opportunity


# the trace types drawn on a page (plotly's default is scatter), and those the served plotly.js
# bundle registers (static/vendor: the cartesian bundle, not the full one)
DRAWN_TYPES = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .flatMap((chart) => (chart.data || []).map((trace) => trace.type || 'scatter'))"""
REGISTERED_TYPES = "() => window.Plotly ? Object.keys(Plotly.PlotSchema.get().traces) : []"


# each chart's mode-bar buttons, by their titles
MODE_BARS = """() => [...document.querySelectorAll('.js-plotly-plot')].map((chart) =>
    [...chart.querySelectorAll('.modebar-btn')].map((button) => button.getAttribute('data-title')))"""


def overflow(page) -> int:
    return page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_page_scrolls_sideways_on_a_phone(phone, server, lang):
    phone.goto(f"{server}/lang/{lang}?next=/")
    drawn, registered = set(), set()
    for path in PAGES:
        joiner = "&" if "?" in path else "?"
        phone.goto(f"{server}{path}{joiner}text={quote(LONG)}&max_len=12")
        wait_idle(phone)
        assert phone.locator("#error").is_hidden(), (path, phone.locator("#error").text_content())
        assert overflow(phone) <= 0, (lang, path, overflow(phone))
        # every chart keeps two mode-bar buttons: download as PNG, download as SVG (read in one
        # call: a round trip per button made this sweep about a second longer per language)
        for titles in phone.evaluate(MODE_BARS):
            assert len(titles) in (0, 2), (path, titles)
            if titles:
                assert "png" in titles[0].lower() and "SVG" in titles[1], (path, titles)
        drawn.update(phone.evaluate(DRAWN_TYPES))
        registered = registered or set(phone.evaluate(REGISTERED_TYPES))  # the same bundle on every page
    # every chart type a page draws is in the served bundle (an unknown type would not be drawn)
    assert {"bar", "heatmap", "scatter"} <= drawn <= registered, (drawn, registered)


def test_a_long_unbreakable_output_stays_inside_a_phone(phone, server):
    for path in ("/pipeline", "/decode", "/tokens", "/embeddings", "/attention"):
        phone.goto(f"{server}{path}?text={quote(LONG)}&max_len=48&{FORCED}")
        wait_idle(phone)
        assert phone.locator("#error").is_hidden(), (path, phone.locator("#error").text_content())
        if path in ("/pipeline", "/decode", "/tokens"):  # the pages that print the translation
            assert "。。。。。。。。。。" in phone.locator("main").text_content(), path
        assert overflow(phone) <= 0, (path, overflow(phone))
    # the KV-cache page prints the model's own output; give it the worst case there too
    phone.goto(f"{server}/kv-cache?text={quote(LONG)}&steps=8")
    wait_idle(phone)
    phone.evaluate("document.getElementById('kv-identical').textContent += '。'.repeat(80)")
    assert overflow(phone) <= 0
    shot(phone, "learner-kv-cache-390")


def test_chart_titles_wrap_instead_of_being_clipped(phone, server):
    phone.goto(f"{server}/embeddings")
    wait_idle(phone)
    unfold(phone, "#cosine")
    caption = phone.locator("#pe-offset").locator("xpath=..").locator(".plot-title")
    assert "offset" in caption.text_content()
    box = caption.bounding_box()
    assert box["width"] <= 390 and box["height"] > 30  # wrapped onto more than one line
    assert phone.locator("#pe-offset .gtitle").count() == 0 or \
        phone.locator("#pe-offset .gtitle").text_content() == ""


@pytest.mark.parametrize(("lang", "words"), [("en", ["Temperature", "Top-k", "Top-p", "Seed"]),
                                             ("zh", ["温度", "Top-k", "Top-p", "随机种子"])])
def test_sampling_is_explained_and_unused_fields_are_off(page, server, lang, words):
    page.goto(f"{server}/lang/{lang}?next=/decode%3Fmax_len%3D4")
    wait_idle(page)
    help_box = page.locator("#sampling-help")
    assert help_box.count() == 1
    text = help_box.text_content()
    for word in words:
        assert word in text, word
    # greedy ignores temperature, top-k, top-p, seed and beam size: the fields say so by being off
    for name in ("temperature", "top_k", "top_p", "seed", "beam_size"):
        assert page.locator(f'#strategy-form input[name="{name}"]').is_disabled(), name
    page.locator('#strategy-form input[value="sample"]').check()
    assert help_box.get_attribute("open") is not None
    for name in ("temperature", "top_k", "top_p", "seed"):
        assert page.locator(f'#strategy-form input[name="{name}"]').is_enabled(), name
    assert page.locator('#strategy-form input[name="beam_size"]').is_disabled()
    page.locator('#strategy-form input[name="temperature"]').fill("1.7")
    page.locator('#strategy-form input[name="top_k"]').fill("3")
    page.locator("#strategy-form button[type=submit]").click()
    wait_idle(page)
    assert "beam_size" not in page.url and "temperature=1.7" in page.url
    # the chart shows the distribution actually sampled from, in the reader's language
    legend = page.locator("#fig-softmax .legendtext").all_text_contents()
    assert len(legend) == 2 and (("实际" in legend[1]) if lang == "zh" else ("sampled" in legend[1]))
    # the sampled step says how likely the drawn character was, under the model and in the
    # distribution it was drawn from: the same numbers the chosen line and the chart show
    note = page.locator("#sample-note")
    assert note.is_visible()
    chosen = page.locator("#chosen").text_content()
    token, p = re.search(r"Chosen: (.+) \(p = ([0-9.]+)\)" if lang == "en"
                         else r"选中：(.+)（p = ([0-9.]+)）", chosen).groups()
    text = note.text_content()
    assert f"p = {p}" in text
    q = page.evaluate("""(token) => {
        const [model, drawn] = document.getElementById("fig-softmax").data;
        const i = model.customdata.indexOf(token);
        return i < 0 || !drawn ? null : Number(drawn.x[i]).toFixed(4);
    }""", token)
    if q is None:
        assert ("not among the candidates" in text) if lang == "en" else ("不在列出的候选之中" in text)
    else:
        assert f"p = {q}" in text.split(p, 1)[1], (text, q)  # the second number: the drawn-from one
    shot(page, f"learner-decode-sampling-{lang}")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_training_table_aligns_and_teacher_forcing_parts_from_free_running(page, server, lang):
    page.goto(f"{server}/lang/{lang}?next=/training")
    wait_idle(page)
    # the default sentence has a human reference, one of the pairs the tiny model learned
    assert page.locator("#reference").input_value() == "猫坐在垫子上。"
    line = page.locator("#exposure-line").text_content()
    same = "reproduces the reference at every position" if lang == "en" else "每个位置都与参考译文一致"
    assert same in line, line
    # a reference the model does not write: free running parts from it
    page.goto(f"{server}/training?reference={quote('猫在垫子上坐着。')}")
    wait_idle(page)
    for table in ("#shift-table", "#teacher-table"):
        head = page.locator(f"{table} thead th").all()
        for row in page.locator(f"{table} tbody tr").all():
            cells = row.locator("th, td").all()
            assert len(cells) == len(head), table
            for h, c in zip(head[1:], cells[1:], strict=True):  # every column under its number
                hb, cb = h.bounding_box(), c.bounding_box()
                assert abs((hb["x"] + hb["width"] / 2) - (cb["x"] + cb["width"] / 2)) < 2
                assert abs(h.evaluate("e => e.getBoundingClientRect().left")
                           - c.evaluate("e => e.getBoundingClientRect().left")) < 1
    line = page.locator("#exposure-line").text_content()
    assert ("parts from the reference" in line) if lang == "en" else ("出现分歧" in line)
    assert "在" in line, line  # the reference's token where they part
    adam = page.locator("#adam").text_content()
    assert "β₁ = 0.9" in adam and "β₂ = 0.98" in adam and "ε = 1e-9" in adam
    assert page.locator("#exposure-help > summary").text_content() == (  # folded under the table
        "Exposure bias" if lang == "en" else "暴露偏差")
    shot(page, f"learner-training-{lang}")


def test_masked_cells_are_drawn_and_a_head_is_a_history_entry(page, server):
    page.goto(f"{server}/attention?max_len=6&kind=decoder_self&layer=0&head=0")
    wait_idle(page)
    page.select_option("#query-select", "0")  # <bos> sees only itself: every other key is −∞
    wait_idle(page)
    page.locator("#stage-masked .annotation").first.wait_for()
    keys = page.locator("#query-select option").count()
    assert page.locator("#stage-masked .annotation-text").all_text_contents() == ["−∞"] * (keys - 1)
    assert "hidden" in page.locator("#mask-note").text_content()
    # encoder heads hide nothing: the page says why stage ③ equals stage ②
    page.locator('.head-cell[data-kind="encoder"][data-layer="0"][data-head="1"]').click()
    wait_idle(page)
    assert "equals ②" in page.locator("#mask-note").text_content()
    assert page.locator("#stage-masked .annotation").count() == 0
    # thumbnails have axes: a titled line for queries and keys
    assert page.locator(".head-cell .thumb .xtitle").first.text_content() == "key →"
    # choosing a head is a history entry: Back returns to the previous head, still on the page
    page.locator('.head-cell[data-kind="cross"][data-layer="1"][data-head="2"]').click()
    wait_idle(page)
    assert "kind=cross" in page.url
    page.go_back()
    wait_idle(page)
    assert "/attention" in page.url and "kind=encoder" in page.url and "head=1" in page.url
    assert page.locator('.head-cell[data-kind="encoder"][data-layer="0"][data-head="1"]') \
        .get_attribute("aria-pressed") == "true"
    shot(page, "learner-attention")


def test_tour_numbering_coreference_verdict_and_scale_headings(page, server):
    from app.pages.tour import TOUR

    stops = len(TOUR)
    for stop in range(stops):
        page.goto(f"{server}/tour?step={stop}")
        title = page.locator("#tour-step-title").text_content()
        assert not title[:1].isdigit(), title  # "Stop n of N" is the only number
        assert page.locator("#tour-card .muted").first.text_content() == f"Stop {stop + 1} of {stops}"
    paths = [path for path, _, _ in TOUR]
    for stop in (paths.index("/coreference"), paths.index("/scale")):  # live figures there too
        page.goto(f"{server}/tour?step={stop}")
        wait_idle(page)
        assert page.locator("#tour-preview .main-svg").count() > 0, stop
    page.goto(f"{server}/coreference")
    wait_idle(page)
    verdict = page.locator("#coref-verdict")
    # the threshold was calibrated on the shipped checkpoint (bench/coreference_calibration.py):
    # on this tiny model the page judges nothing, and says so (issue 75)
    assert verdict.get_attribute("data-kind") == "uncalibrated"
    assert verdict.text_content().startswith("Not judged")
    page.goto(f"{server}/scale")
    assert page.locator("#chatgpt article").count() == 4 and "three" in \
        page.locator("#chatgpt-title").text_content()
    for item in ("mixed_precision", "checkpointing", "deepnorm", "mup"):
        assert page.locator(f"#imp-training-{item}").count() == 1
    assert "0.39" in page.locator("main").text_content()
