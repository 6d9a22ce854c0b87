"""A learner's flows through /pipeline, /attention and /decode in headless Chromium, against a real
server on the shipped checkpoint: typing a sentence, its real translation, a head opened, decoding
stepped through and forced, the strategies, the language switch."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conftest import SHIPPED_CHECKPOINT, warm_page
from tests.e2e.conftest import SHIPPED_TRANSLATIONS, shot, wait_idle

pytestmark = pytest.mark.e2e
SENTENCE = "The dog runs in the park."
TRANSLATION = SHIPPED_TRANSLATIONS[SENTENCE]  # 狗在公园里跑步。
CONFIG = json.loads((SHIPPED_CHECKPOINT / "config.json").read_text(encoding="utf-8"))


@pytest.fixture()
def server(shipped_server):
    """The shipped checkpoint: the flows end in real Chinese."""
    return shipped_server


def test_type_a_sentence_and_see_the_translation(page, server):
    page.goto(f"{server}/pipeline?max_len=10")
    wait_idle(page)
    page.fill("#text", SENTENCE)
    page.press("#text", "Enter")
    page.wait_for_url(re.compile(r"text=The\+dog"))
    wait_idle(page)
    tokens = page.locator("#source-tokens li").all_text_contents()
    assert tokens == ["the", "dog", "runs", "in", "the", "park", ".", "<eos>"]
    assert page.locator("#translation").text_content().strip() == TRANSLATION
    assert page.locator("#probabilities .main-svg").count() > 0
    # every block of the architecture links to its view, carrying the sentence along
    href = page.locator("a.block.decoder").get_attribute("href")
    assert href.startswith("/decode?") and "dog" in href
    shot(page, "pipeline")


def test_example_links(page, server):
    page.goto(f"{server}/pipeline")
    wait_idle(page)
    examples = page.locator("a.example").all_text_contents()
    assert examples[0] == "The cat sits on the mat."
    page.locator("a.example", has_text="The woman said").click()
    page.wait_for_url(re.compile("woman"))
    wait_idle(page)
    assert "she" in page.locator("#source-tokens li").all_text_contents()


def test_open_a_head_and_follow_a_query(page, server):
    page.goto(f"{server}/attention?text={SENTENCE}&max_len=6")
    wait_idle(page)
    # encoder self-attention, decoder self-attention and cross-attention: every layer's heads
    layers = CONFIG["n_encoder_layers"] + 2 * CONFIG["n_decoder_layers"]
    assert page.locator("button.head-cell").count() == layers * CONFIG["n_heads"]
    assert page.locator(".head-cell.placeholder").count() == 0
    cell = page.locator('.head-cell[data-kind="cross"][data-layer="1"][data-head="2"]')
    cell.focus()
    page.keyboard.press("Enter")  # keyboard reachable
    wait_idle(page)
    assert cell.get_attribute("aria-pressed") == "true"
    assert "Layer 2" in page.locator("#enlarged-label").text_content()
    assert parse_qs(urlsplit(page.url).query)["kind"] == ["cross"]
    assert page.locator("#enlarged .main-svg").count() > 0
    page.locator("#enlarged .nsewdrag").hover()  # hovering a cell shows its exact weight
    hover = page.locator("#enlarged .hoverlayer .hovertext")
    hover.wait_for()
    assert re.search(r"→.*\d\.\d{4}", hover.text_content())
    rows_before = page.locator("#weighted-sum tr").count()
    assert rows_before == 8 + 2  # the dog runs in the park . <eos>, a header and the output row
    page.select_option("#query-select", "2")
    wait_idle(page)
    assert "q=2" in page.url
    for stage in ("raw", "scaled", "masked", "weights"):
        assert page.locator(f"#stage-{stage} .main-svg").count() > 0
    shot(page, "attention")


def test_step_through_decoding_with_the_keyboard_and_force_a_candidate(page, server):
    page.goto(f"{server}/decode?text={SENTENCE}&max_len=6")
    wait_idle(page)
    assert page.locator("#step-title").text_content().startswith("Step 1 of")
    page.locator("h1").click()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert page.locator("#step-title").text_content().startswith("Step 3 of")
    assert "step=2" in page.url
    page.keyboard.press("ArrowLeft")
    assert page.locator("#step-title").text_content().startswith("Step 2 of")
    assert page.locator("#step-slider").input_value() == "1"
    page.keyboard.press("End")
    assert page.locator("#step-title").text_content() == "Step 6 of 6"
    page.keyboard.press("Home")
    assert page.locator("#step-title").text_content() == "Step 1 of 6"
    page.keyboard.press("ArrowRight")
    for box in ("self_attention", "add_norm1", "cross_attention", "add_norm2", "ffn",
                "add_norm3", "softmax"):
        assert page.locator(f"#fig-{box} .main-svg").count() > 0, box
    shot(page, "decode")

    candidate = page.locator("#candidates button.candidate:not(.chosen):not([disabled])").first
    token = candidate.get_attribute("data-token")
    candidate.click()
    page.wait_for_url(re.compile("forced="))
    wait_idle(page)
    forced = parse_qs(urlsplit(page.url).query)["forced"]
    assert len(forced) == 2 and forced[-1] == token  # the token before this step, then ours
    assert forced[0] == TRANSLATION[0]
    assert page.locator("#step-title").text_content().startswith("Step 2 of")
    chosen = page.locator("#chosen").text_content()
    assert token in chosen and "(forced)" in chosen
    assert page.locator("#reset-forced").is_visible()
    # before and after, as on the x-ray (issue 25 item 9): the unforced translation beside the
    # forced one, parting at the forced step
    compare = page.locator("#forced-compare")
    assert compare.is_visible()
    original = page.locator("#compare-original li").all_text_contents()
    now = page.locator("#compare-forced li").all_text_contents()
    assert now[1] == token and original[0] == now[0]
    assert "".join(original) == TRANSLATION[:6]  # max_len 6: the real translation's first six
    if original[1] != token:
        assert page.locator("#compare-forced li.diff").first.text_content() == token
        assert "step 2" in page.locator("#compare-part").text_content()
    shot(page, "decode-forced")
    page.go_back()
    wait_idle(page)
    assert "forced=" not in page.url
    assert page.locator("#forced-compare").is_hidden()


def test_strategies_and_beam_tree(page, server):
    page.goto(f"{server}/decode?text={SENTENCE}&max_len=5")
    wait_idle(page)
    assert page.locator("#beam").is_hidden()
    page.check('input[name="strategy"][value="beam"]')
    page.fill('input[name="beam_size"]', "3")
    page.click("#strategy-form button[type=submit]")
    page.wait_for_url(re.compile("strategy=beam"))
    wait_idle(page)
    assert "max_len=5" in page.url  # settings not in view survive a new strategy
    assert page.locator("#beam").is_visible()
    assert page.locator("#beam-tree .main-svg").count() > 0
    shot(page, "decode-beam")
    page.check('input[name="strategy"][value="sample"]')
    page.fill('input[name="temperature"]', "0.7")
    page.fill('input[name="top_k"]', "5")
    page.click("#strategy-form button[type=submit]")
    page.wait_for_url(re.compile("strategy=sample"))
    wait_idle(page)
    assert page.locator("#fig-softmax .main-svg").count() > 0
    page.go_back()  # the form follows the URL
    wait_idle(page)
    assert page.locator('input[name="strategy"][value="beam"]').is_checked()
    assert page.locator('input[name="top_k"]').input_value() == ""
    # A hand-edited URL out of range: the form would refuse it, so the server explains.
    page.goto(f"{server}/decode?text={SENTENCE}&strategy=sample&temperature=9")
    error = page.locator("#error")
    error.wait_for(state="visible")
    assert "temperature" in error.text_content()
    page.watch.errors.clear()  # the browser logs the 422 response itself


def test_switch_language_is_remembered(page, server):
    page.goto(f"{server}/decode?text={SENTENCE}&max_len=4")
    wait_idle(page)
    assert page.locator("h1").text_content() == "Decoding, step by step"
    page.click("#lang-toggle")
    page.wait_for_url(re.compile(r"/decode\?text="))
    wait_idle(page)
    assert page.locator("h1").text_content() == "逐步解码"
    assert page.locator("html").get_attribute("lang") == "zh-CN"
    page.goto(f"{server}/attention?text={SENTENCE}&max_len=4")
    wait_idle(page)
    assert page.locator("h1").text_content() == "注意力：每个词元在看谁"
    shot(page, "attention-zh")
    page.click("#lang-toggle")
    wait_idle(page)
    assert page.locator("h1").text_content().startswith("Attention")


def test_non_english_input_gets_a_clear_message(page, server):
    """Issue 25 item 6: the message says what to do, in the reader's language, with no field
    names ("Something went wrong: text: text must be English…" before)."""
    page.goto(f"{server}/pipeline?text=猫坐在垫子上")
    error = page.locator("#error")
    error.wait_for(state="visible")
    message = error.text_content()
    assert message.startswith("Please change your input: Type an English sentence")
    assert "text:" not in message and "Something went wrong" not in message
    page.goto(f"{server}/lang/zh?next=/pipeline%3Ftext%3D%E7%8C%AB")
    error.wait_for(state="visible")
    assert error.text_content().startswith("请修改输入：")
    assert "请输入一个英文句子" in error.text_content()
    page.watch.errors.clear()  # the browser logs the 422 response itself


def test_narrow_window(warm_context, server):
    page = warm_page(warm_context, 390, 800)
    for path in ("/pipeline", "/decode?max_len=4", "/attention?max_len=4"):
        page.goto(server + path)
        wait_idle(page)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, (path, overflow)
    shot(page, "attention-narrow")
    page.close()


def test_the_mode_bar_only_downloads_the_chart_as_png_or_svg(page, server, tmp_path):
    """No Plotly logo, no cloud or edit links, no lasso/select tools: download as PNG or SVG,
    both made in the browser, named after the chart's caption."""
    page.goto(f"{server}/pipeline?max_len=6")
    wait_idle(page)
    page.locator("#probabilities").hover()
    buttons = page.locator("#probabilities .modebar-btn")
    assert buttons.count() == 2
    assert buttons.nth(0).get_attribute("data-title").lower() == "download plot as a png"
    assert buttons.nth(1).get_attribute("data-title") == "Download as SVG (vector)"
    assert page.locator("#probabilities .modebar a[href]").count() == 0  # no plotly.com logo
    # named after the chart's caption when it has one, else after its element's id
    captions = page.locator("#probabilities").locator("xpath=..").locator(".plot-title")
    caption = captions.text_content() if captions.count() and captions.is_visible() else "probabilities"
    files = {}
    for index, kind in ((0, "png"), (1, "svg")):
        with page.expect_download() as download:
            buttons.nth(index).click()
        name = download.value.suggested_filename
        stem = name.split("-")[0].split(".")[0]
        assert name.endswith(f".{kind}") and stem == caption.split()[0], (name, caption)
        files[kind] = tmp_path / name
        download.value.save_as(files[kind])
    assert files["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = files["svg"].read_text()
    assert svg.startswith("<svg") and "</svg>" in svg and "<script" not in svg


def test_decoder_rows_say_what_each_position_produces(page, server):
    """Issue 25: a cross-attention row labelled only by its input read one step late (the row
    that produces 猫 said <bos>). Each row now reads "input → produced"."""
    page.goto(f"{server}/attention?text={SENTENCE}&max_len=6&kind=cross&layer=0&head=0")
    wait_idle(page)
    trace = page.evaluate("""async () => (await (await fetch('/api/trace', {method: 'POST',
        headers: {'content-type': 'application/json'},
        body: JSON.stringify({text: new URLSearchParams(location.search).get('text'), max_len: 6})
    })).json())""")
    expected = [f"{read} → {step['token']}" for read, step in zip(trace["decoder_input"], trace["steps"],
                                                                 strict=True)]
    options = [text.split(": ", 1)[1] for text in page.locator("#query-select option").all_text_contents()]
    assert options == expected and options[0] == f"<bos> → {TRANSLATION[0]}"
    ticks = page.locator("#enlarged .yaxislayer-above text").all_text_contents()
    assert ticks and all(" → " in tick for tick in ticks)
