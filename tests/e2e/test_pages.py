"""Tokens, embeddings, coreference, training, KV cache, scale, tour and the API page in headless Chromium
against a real server on the shipped checkpoint: figures render with the real model's sizes and
translations, state lives in the URL, no console errors, no request leaves localhost."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from app.i18n import strings
from app.pages.kv_cache import MAX_KV_STEPS
from tests.conftest import SHIPPED_CHECKPOINT, warm_page
from tests.e2e.conftest import BATCH_CELLS, SHIPPED_TRANSLATIONS, Watch, shot, unfold, wait_idle

pytestmark = pytest.mark.e2e
CAT = "The cat sits on the mat."
DOG = "The dog runs in the park."
CONFIG = json.loads((SHIPPED_CHECKPOINT / "config.json").read_text(encoding="utf-8"))


@pytest.fixture()
def server(shipped_server):
    return shipped_server


def drawn(page, selector: str) -> bool:
    return page.locator(f"{selector} .main-svg").count() > 0


def test_tokens_batch_and_masks(page, server):
    page.goto(f"{server}/tokens?text={quote(DOG)}")
    wait_idle(page)
    english = page.locator("#english-table").text_content()
    assert "dog" in english and "<eos>" in english
    assert page.locator("#translation").text_content().strip() == SHIPPED_TRANSLATIONS[DOG]
    for plot in ("#batch-source", "#batch-decoder", "#batch-labels", "#mask-padding",
                 "#mask-causal", "#mask-cross"):
        assert drawn(page, plot), plot
    for chart in page.evaluate(BATCH_CELLS):  # wide enough: no chart scrolls sideways
        assert chart["column"] >= 44 and not chart["scrolls"] and not chart["focusable"], chart
    assert "padding" in page.locator("#padding-share").text_content()
    assert page.locator("#mask-row option").count() == 3
    page.select_option("#mask-row", "1")
    wait_idle(page)
    assert parse_qs(urlsplit(page.url).query)["row"] == ["1"]
    shot(page, "tokens")


def test_embeddings_figures(page, server):
    page.goto(f"{server}/embeddings?text={quote(CAT)}")
    wait_idle(page)
    unfold(page, "#scaling", "#cosine", "#projection-card")
    for plot in ("#emb-token", "#emb-position", "#emb-sum", "#emb-norms", "#pe-table",
                 "#pe-cosine", "#pe-offset", "#projection"):
        assert drawn(page, plot), plot
    assert f"× √{CONFIG['d_model']}" in page.locator("#sample-table").text_content()
    assert page.locator("#projection .textpoint").count() >= 3 * len(CAT.split())
    shot(page, "embeddings")


def test_coreference_ranking(page, server):
    page.goto(f"{server}/coreference")
    wait_idle(page)
    assert drawn(page, "#coref-grid") and drawn(page, "#coref-best")
    assert page.locator("#coref-ranking tbody tr").count() == CONFIG["n_encoder_layers"] * CONFIG["n_heads"]
    assert "0." in page.locator("#uniform").text_content()
    page.locator("a.example", has_text="The boy kicked").click()
    page.wait_for_url(re.compile("pronoun=he"))
    wait_idle(page)
    assert page.locator("#coref-referent").input_value() == "boy"
    headers = page.locator("#coref-ranking thead th").all_text_contents()
    assert "distractor weight" in headers and headers[1:3] == ["Layer", "Head"]
    shot(page, "coreference")


def test_training_scores_a_pair(page, server):
    page.goto(f"{server}/training?text={quote(CAT)}&reference={quote('猫坐在垫子上。')}")
    wait_idle(page)
    first_row = page.locator("#shift-table tbody tr").first.locator("th, td").all_text_contents()
    assert first_row[1:] == ["<bos>", "猫", "坐", "在", "垫", "子", "上", "。"]
    loss = page.locator("#loss-line").text_content()
    assert "Mean cross-entropy" in loss
    assert "clipped to 1" in page.locator("#grad-line").text_content()
    unfold(page, "#schedule-card", "#curves-card")
    for plot in ("#score-figure", "#schedule", "#curves", "#epochs"):
        assert drawn(page, plot), plot
    page.fill("#reference", "狗在公园里跑。")
    page.locator("#score-button").click()
    page.wait_for_url(re.compile("reference="))
    wait_idle(page)
    assert page.locator("#loss-line").text_content() != loss
    assert "狗" in parse_qs(urlsplit(page.url).query)["reference"][0]
    shot(page, "training")


def test_training_asks_for_a_real_reference_instead_of_the_models_own(page, server):
    """Issue 25: with the model's own output as the default reference, free running matched it
    everywhere and the page showed nothing. A sentence without a human translation now asks for
    one (or a preset pair); the model's own output is one explicit click away."""
    sentence = "My neighbour repaired his old bicycle last weekend."
    page.goto(f"{server}/training?text={quote(sentence)}")
    wait_idle(page)
    assert page.locator("#reference").input_value() == ""
    assert "no human translation" in page.locator("#reference-source").text_content()
    assert page.locator("#teacher-table tbody tr").count() == 0  # nothing scored against itself
    presets = page.locator(".preset-pair")
    assert presets.count() >= 3
    english, chinese = presets.first.get_attribute("data-text"), presets.first.get_attribute("data-reference")
    presets.first.click()
    page.wait_for_url(re.compile("reference="))
    wait_idle(page)
    query = parse_qs(urlsplit(page.url).query)
    assert query["text"] == [english] and query["reference"] == [chinese]
    assert page.locator("#teacher-table tbody tr").count() == 3
    assert "human translation" in page.locator("#reference-source").text_content()
    assert page.locator("#reference-choices").is_hidden()


# what each tour stop's figure must be (issue 25: "Self-attention" showed a cross-attention
# matrix, "Pieces and ids" a causal mask): read from the figure drawn
TOUR_FIGURES = {
    # the x-ray: each token's vector size after every stage, encoder and decoder
    0: lambda fig: [d["type"] for d in fig["data"]] == ["heatmap", "heatmap"]
    and fig["data"][0]["y"][0].startswith("embedding"),
    # pieces and ids: the sentence's own pieces with their ids, not a mask
    2: lambda fig: "cat" in str(fig["data"]) and "mask" not in str(fig["layout"]).lower(),
    # self-attention (the encoder is lit): English rows and English columns, not Chinese × English
    4: lambda fig: fig["data"][0]["x"] == fig["data"][0]["y"] and "cat" in fig["data"][0]["x"],
}


@pytest.mark.parametrize("stop", sorted(TOUR_FIGURES))
def test_every_tour_stop_shows_its_own_figure(page, server, stop):
    page.goto(f"{server}/tour?step={stop}&text={quote(CAT)}")
    wait_idle(page)
    figure = page.evaluate("() => { const n = document.getElementById('tour-preview');"
                           " return {data: n.data, layout: n.layout}; }")
    assert figure["data"], stop
    assert TOUR_FIGURES[stop](figure), stop


def test_kv_cache_race(page, server):
    page.goto(f"{server}/kv-cache?text={quote(CAT)}&steps=16")
    wait_idle(page)
    assert "16 steps" in page.locator("#kv-summary").text_content()
    assert "exactly the same" in page.locator("#kv-identical").text_content()
    for plot in ("#kv-timing", "#kv-work", "#kv-grid-cached", "#kv-grid-uncached"):
        assert drawn(page, plot), plot
    page.fill("#steps", "24")
    page.locator("#steps-form button").click()
    page.wait_for_url(re.compile("steps=24"))
    wait_idle(page)
    assert "24 steps" in page.locator("#kv-summary").text_content()
    shot(page, "kv-cache")


def test_scale_calculator(page, server):
    page.goto(f"{server}/scale")
    wait_idle(page)
    assert page.locator("#calc-total").text_content() == "174,604,259,328"  # GPT-3
    assert drawn(page, "#calc-figure")
    page.select_option("#preset", "this")
    wait_idle(page)
    this_row = page.locator("#gpt-models tr.total td").last.text_content()
    assert page.locator("#calc-total").text_content() == this_row
    page.select_option("#preset", "GPT-2")
    page.fill("#f-layers", "12")
    page.fill("#f-d_model", "768")
    page.fill("#f-heads", "12")
    page.fill("#f-d_ff", "3072")
    page.locator("#calc-form button[type=submit]").click()
    page.wait_for_url(re.compile("d_model=768"))
    wait_idle(page)
    assert page.locator("#calc-total").text_content() == "124,439,808"  # GPT-2 small
    page.reload()
    wait_idle(page)
    assert page.locator("#calc-total").text_content() == "124,439,808"  # state in the URL
    shot(page, "scale")


def test_tour_walks_through_the_pages(page, server):
    page.goto(f"{server}/tour?text={quote('I like green tea.')}")
    wait_idle(page)
    assert page.locator("#tour-source").text_content() == "I like green tea."
    assert "X-ray" in page.locator("#tour-open").text_content()  # the tour starts at the x-ray
    page.locator("#tour-next").click()
    page.wait_for_url(re.compile("step=1"))
    page.locator("#tour-next").click()
    page.wait_for_url(re.compile("step=2"))
    assert page.locator(".tour-pipeline .stage.current").all_text_contents() == ["Tokens"]
    wait_idle(page)
    assert drawn(page, "#tour-preview")
    page.locator("h1").click()
    page.keyboard.press("ArrowRight")
    page.wait_for_url(re.compile("step=3"))
    wait_idle(page)
    assert page.locator(".tour-pipeline .stage.current").all_text_contents() == [
        "Embedding + position"]
    assert drawn(page, "#tour-preview"), "each stop draws a live figure of the sentence"
    shot(page, "tour")
    page.locator("#tour-open").click()
    page.wait_for_url(re.compile(r"/embeddings\?text=I"))
    wait_idle(page)
    assert drawn(page, "#emb-token")


def test_pages_in_chinese(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="zh-CN")
    page = context.new_page()
    watch = Watch()
    page.on("console", lambda m: watch.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: watch.errors.append(str(e)))
    page.on("request", lambda r: watch.urls.append(r.url))
    try:
        page.goto(f"{server}/kv-cache?text={quote(CAT)}&steps=8")
        wait_idle(page)
        assert page.locator("h1").text_content() == "KV 缓存：为什么要缓存"
        assert "用缓存" in page.locator("#kv-summary").text_content()
        page.goto(f"{server}/scale")
        wait_idle(page)
        assert page.locator("h1").text_content() == "从这个模型到 GPT-4"
        assert "估计值" in page.locator("#gpt-models").text_content()
        shot(page, "scale-zh")
    finally:
        context.close()
    watch.check()


KV_OPERATION = "#operations-model-kv_cache_api_kv_cache_get"
LONG_FOR_CURL = "The weather is nice today, so he gave her a flower because she was sad and tired."


def open_kv_cache_in_swagger_ui(page, server: str, lang: str) -> None:
    """/docs in ``lang``: wait for Swagger UI's operations, open GET /api/kv-cache, send it."""
    page.goto(f"{server}/lang/{lang}?next=/docs")
    page.locator("#swagger-ui .opblock").first.wait_for()
    page.locator(f"{KV_OPERATION} .opblock-summary-control").click()
    page.locator(f"{KV_OPERATION} .try-out__btn").click()
    page.fill(f"{KV_OPERATION} tr[data-param-name=text] input", LONG_FOR_CURL)
    page.fill(f"{KV_OPERATION} tr[data-param-name=steps] input", "4")
    page.locator(f"{KV_OPERATION} .execute").click()
    page.locator(f"{KV_OPERATION} .live-responses-table .response .response-col_status").wait_for()


def test_api_docs_show_query_limits_and_try_it_out_stays_local(page, server):
    """/docs is Swagger UI from this server: a GET endpoint's query parameters with their limits,
    "Try it out" answering from this server; no CSP violation, no other host (the fixture checks)."""
    open_kv_cache_in_swagger_ui(page, server, "en")
    assert page.locator("header.site nav a[href='/docs']").get_attribute("aria-current") == "page"
    steps = page.locator(f"{KV_OPERATION} tr[data-param-name=steps]").text_content()
    assert "integer" in steps and f"maximum: {MAX_KV_STEPS}" in steps and "minimum: 1" in steps
    assert "maxLength: 600" in page.locator(f"{KV_OPERATION} tr[data-param-name=text]").text_content()
    status = page.locator(f"{KV_OPERATION} .live-responses-table .response .response-col_status")
    assert status.text_content().strip() == "200"
    answer = page.locator(f"{KV_OPERATION} .live-responses-table .microlight").first
    assert '"steps": 4' in answer.text_content()
    assert any(urlsplit(u).path == "/vendor/swagger-ui-bundle.js" for u in page.watch.urls)
    assert any(urlsplit(u).path == "/api/kv-cache" for u in page.watch.urls)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_api_docs_fit_a_phone(warm_context, server, lang):
    page = warm_page(warm_context, 390, 844)
    watch = Watch()
    page.on("console", lambda m: watch.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: watch.errors.append(str(e)))
    page.on("request", lambda r: watch.urls.append(r.url))
    page.set_default_timeout(30_000)
    try:
        open_kv_cache_in_swagger_ui(page, server, lang)
        # the curl command, the request URL and the JSON answer wrap or scroll inside their boxes
        wide = "document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth"
        assert page.evaluate(wide) <= 0
        assert page.locator("h1:visible").all_text_contents() == [strings(lang, "docs")["docs.title"]]
        assert page.locator("#swagger-language").text_content() == strings(lang, "docs")["docs.english"]
        shot(page, f"docs-390-{lang}")
    finally:
        page.close()
    watch.check()
