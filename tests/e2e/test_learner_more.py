"""Issue 11, the rest of it: the beam search as a lineage tree, the FFN box and the encoder's
sublayers, the KV cache's timings and real K/V rows, fewer Tab presses on /decode, and the ideas
from the articles (RNN vs attention, residual connections) drawn from the live model: the shipped
checkpoint's."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import SHIPPED_TRANSLATIONS, shot, unfold, wait_idle

pytestmark = pytest.mark.e2e
CAT = "text=The+cat+sits+on+the+mat."
CAT_ZH = SHIPPED_TRANSLATIONS["The cat sits on the mat."]


@pytest.fixture()
def server(shipped_server):
    return shipped_server


def test_beam_tree_is_a_lineage_tree_with_scores_and_ranked_endings(page, server):
    page.goto(f"{server}/decode?{CAT}&strategy=beam&max_len=12")
    wait_idle(page)
    figure = page.evaluate("""() => {
        const node = document.getElementById('beam-tree');
        return node.data.map((d) => ({mode: d.mode, name: d.name || '', text: d.text || [],
                                      x: d.x, y: d.y, showlegend: d.showlegend}));
    }""")
    points = [d for d in figure if "markers" in d["mode"]]
    # every node carries its cumulative log-probability as a number
    labels = [t for d in points for t in d["text"]]
    assert labels and all(t.rsplit(" ", 1)[-1].lstrip("-").replace(".", "").isdigit() for t in labels)
    # every kind of node beyond the plain "kept" ones is named in the legend
    assert all(d["name"] for d in points if d["showlegend"])
    # the ended hypotheses, ranked by their length-penalised score, the winner marked
    rows = page.locator("#beam-ended tbody tr")
    assert rows.count() >= 1
    assert "winner" in (rows.first.get_attribute("class") or "")
    assert CAT_ZH in rows.first.text_content()  # the real translation wins
    scores = [float(rows.nth(i).locator("td").nth(4).text_content()) for i in range(rows.count())]
    assert scores == sorted(scores, reverse=True)
    assert page.locator("#beam-stop").text_content().strip()
    shot(page, "decode-beam-lineage")


def test_ffn_box_names_units_and_shows_its_output_and_the_encoder_is_shown(page, server):
    page.goto(f"{server}/decode?{CAT}&max_len=6")
    wait_idle(page)
    units = page.evaluate("document.getElementById('fig-ffn').data[0].x")
    assert len(units) >= 5 and all(u.startswith("#") for u in units)
    assert "dimension" not in page.evaluate(
        "document.getElementById('fig-ffn').layout.xaxis.title.text")
    output = page.evaluate("document.getElementById('fig-ffn_output').data.map((d) => d.y.length)")
    assert output == [16, 16]
    assert "FFN(x)" in page.locator("#num-ffn-out").text_content()
    # the Add & Norm explanation is said once, not three times
    helps = [page.locator(f"#box-an{i} p.muted").text_content() for i in (1, 2, 3)]
    assert len(set(helps)) == 3
    # the encoder's sublayers: every encoder layer's FFN, and its Add & Norm in the residual chart
    unfold(page, "#residual")
    layers = page.evaluate("document.getElementById('fig-encoder_ffn').data[0].y.length")
    assert layers >= 1
    labels = page.evaluate("document.getElementById('fig-residual').data[0].x")
    assert sum("FFN" in label for label in labels) >= 2 and len(labels) >= 5
    assert page.locator("#residual-summary").text_content().strip()
    # gradients from a real backward pass: shortcut, through the sublayer, and total, per sublayer
    gradients = page.evaluate("document.getElementById('fig-gradients').data.map((d) => d.y)")
    assert len(gradients) == 3 and len(gradients[0]) == len(labels)
    assert all(value > 0 for value in gradients[2])
    assert page.locator("#gradient-summary").text_content().strip()
    shot(page, "decode-ffn-residual")


def test_kv_cache_times_several_runs_and_shows_the_real_rows_growing(page, server):
    page.goto(f"{server}/kv-cache?{CAT}&steps=6&runs=3")
    wait_idle(page)
    summary = page.locator("#kv-summary").text_content()
    assert "median" in summary
    # the timing chart: a median line and a band for each of the two versions
    fills = page.evaluate("document.getElementById('kv-timing').data.filter((d) => d.fill).length")
    assert fills == 2
    unfold(page, "#kv-tensors")  # the cache's rows are folded at first
    assert page.evaluate("document.getElementById('kv-k').data[0].z.length") == 6
    assert "(1, " in page.locator("#kv-shape").text_content()
    page.locator("#kv-row-step").fill("2")
    page.locator("#kv-row-step").dispatch_event("input")
    assert page.evaluate("document.getElementById('kv-k').data[0].z.length") == 2
    assert ", 2, " in page.locator("#kv-shape").text_content()
    cross = page.evaluate("document.getElementById('kv-cross-k').data[0].z.length")
    assert cross >= 2
    shot(page, "kv-cache-rows")


@pytest.mark.parametrize("steps", ["%C2%B2", "%D9%A1%D9%A2", "%EF%BC%91%EF%BC%92"])
def test_kv_cache_with_unicode_digits_falls_back_to_the_default(page, server, steps):
    response = page.goto(f"{server}/kv-cache?{CAT}&steps={steps}&runs=1")
    assert response.status == 200
    wait_idle(page)
    assert page.locator("#error").is_hidden()
    assert page.locator("#steps").input_value() == "32"


def test_a_few_tabs_reach_the_first_candidate_on_decode(page, server):
    page.goto(f"{server}/decode?{CAT}&max_len=6")
    wait_idle(page)
    # a skip link moves focus only: its #fragment must not load (and redraw) the page again
    asked = []
    page.on("request", lambda request: asked.append(request.url) if "/api/" in request.url else None)
    first = "document.activeElement === document.querySelector('#candidates button')"
    tabs = 0
    while not page.evaluate(first) and tabs < 60:
        page.keyboard.press("Tab")
        tabs += 1
        if page.evaluate("document.activeElement.getAttribute('href') === '#candidates'"):
            page.keyboard.press("Enter")
    assert page.evaluate(first) and tabs <= 4, tabs
    wait_idle(page)
    assert asked == [] and page.evaluate(first), asked
    # the step controls are one skip link away too, and arrows still step from there
    page.goto(f"{server}/decode?{CAT}&max_len=6")
    wait_idle(page)
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.getAttribute('href')") == "#step-nav"
    page.keyboard.press("Enter")
    page.keyboard.press("ArrowRight")
    assert "step=1" in page.url
    # forcing a candidate from the keyboard leaves the focus one Tab from the new candidates
    page.goto(f"{server}/decode?{CAT}&max_len=6&step=1")
    wait_idle(page)
    page.locator("#candidates button:not(.chosen):not([disabled])").first.press("Enter")
    wait_idle(page)
    assert page.evaluate("document.activeElement.id") == "candidates"
    page.keyboard.press("Tab")
    assert page.evaluate(first)


@pytest.mark.parametrize("lang,title", [("en", "RNN"), ("zh", "循环网络")])
def test_pipeline_compares_recurrence_with_attention_on_the_live_model(page, server, lang, title):
    page.goto(f"{server}/lang/{lang}?next=/")
    page.goto(f"{server}/pipeline?{CAT}")
    wait_idle(page)
    assert title in page.locator("#rnn-title").text_content()
    traces = page.evaluate("document.getElementById('fig-recurrence').data.map((d) => d.y)")
    rnn, attention, weights = traces
    assert rnn == list(range(1, len(rnn) + 1)) and set(attention) == {1}
    assert all(0 <= w <= 1 for w in weights)
    assert page.locator("#rnn-summary").text_content().strip()
    assert page.locator("#recurrence a[href^='/decode']").get_attribute("href").endswith("#residual")
    shot(page, f"pipeline-recurrence-{lang}")
