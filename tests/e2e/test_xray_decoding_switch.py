"""Beam search against greedy decoding on the x-ray (issue 26 item 5): the page says what the
shipped checkpoint's held-out evaluation found, and one click translates the same sentence with
the other decoding (the player still explains greedy first: it stays the default)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from app.pages.xray import beam_against_greedy
from tests.e2e.test_xray import XRAY, ready

pytestmark = pytest.mark.e2e
EVAL = Path(__file__).resolve().parents[2] / "model" / "checkpoints" / "eval.json"
TEXT = "Tom and Mary went to Paris in 2019."


@pytest.fixture()
def server(shipped_server):
    """The app on the shipped checkpoint (one server for the whole run)."""
    return shipped_server


def test_the_comparison_is_read_from_the_evaluation():
    evaluation = {"sets": {"a": {"greedy": {"bleu": 10.0}, "beam4": {"bleu": 12.5}},
                           "b": {"greedy": {"bleu": 20.0}, "beam4": {"bleu": 19.0}},
                           "c": {"greedy": {"bleu": 5.0}}}}  # no beam figure: not counted
    assert beam_against_greedy(evaluation) == {"sets": 2, "higher": 1, "mean": 0.75, "largest": 2.5}
    assert beam_against_greedy({}) is None  # a Marian model has no eval.json


def test_the_note_says_what_the_evaluation_found_and_switches_the_decoding(page, server):
    shipped = beam_against_greedy(json.loads(EVAL.read_text(encoding="utf-8")))
    page.goto(f"{server}{XRAY}?text={quote(TEXT)}&frame=5")
    ready(page)
    note = page.locator("#xr-beam-note")
    assert f"on {shipped['higher']}" in note.text_content()
    assert f"{shipped['sets']} held-out test sets" in note.text_content()
    link = page.locator("#xr-beam-link")
    assert link.text_content() == "Translate with beam search (beam 4)"
    query = parse_qs(urlsplit(link.get_attribute("href")).query)
    assert query["strategy"] == ["beam"] and query["beam_size"] == ["4"] and "frame" not in query
    greedy = page.evaluate("ITTXray.state.trace.translation")

    link.click()
    page.wait_for_function("() => ITTXray.state.req && ITTXray.state.req.strategy === 'beam'")
    ready(page)
    assert page.evaluate("ITTXray.state.trace.options.strategy") == "beam"
    assert page.evaluate("ITTXray.state.trace.beam.length") > 0  # the beam tree came with it
    assert page.locator("#xr-strategy").input_value() == "beam"  # the form says so too
    assert link.text_content() == "Back to greedy decoding"
    assert page.evaluate("ITTXray.state.req.text") == TEXT

    link.click()
    page.wait_for_function("() => ITTXray.state.req.strategy === 'greedy'")
    ready(page)
    assert page.evaluate("ITTXray.state.trace.translation") == greedy
    assert page.locator("#xr-strategy").input_value() == "greedy"
    page.go_back()  # each switch is a history entry
    page.wait_for_function("() => ITTXray.state.req.strategy === 'beam'")


def test_the_note_reads_in_chinese(page, server):
    page.goto(f"{server}/lang/zh?next={quote('/?text=' + quote(TEXT))}")
    ready(page)
    assert "留出测试集" in page.locator("#xr-beam-note").text_content()
    assert page.locator("#xr-beam-link").text_content() == "改用束搜索（束宽 4）翻译"


def result_lines(page) -> list[dict]:
    return page.locator("#xr-result-lines p").evaluate_all("""ps => ps.map(p => ({
        role: p.dataset.role, label: p.querySelector('.xr-result-label').textContent,
        text: p.querySelector('.xr-result-text').textContent, lang: p.querySelector('.xr-result-text').lang,
        first: p.classList.contains('xr-result-first'), same: p.textContent.includes('(the same)')}))""")


def translated(page, server: str, **options) -> str:
    answer = page.request.post(f"{server}/api/translate", data={"text": MUSEUM, **options})
    assert answer.ok
    return answer.json()["translation"]


MUSEUM = "The museum opens at nine o'clock on Sundays."


def test_the_translation_shown_first_is_beam_searchs_and_the_players_is_beside_it(page, server):
    page.goto(f"{server}{XRAY}?text={quote(MUSEUM)}")
    ready(page)
    beam, greedy = translated(page, server, strategy="beam", beam_size=4), translated(page, server)
    assert page.locator("#xr-result").is_visible()
    assert page.locator("#xr-result-title").text_content() == "Translation"
    first, second = result_lines(page)
    assert first == {"role": "other", "label": "Beam search (4 beams)", "text": beam,
                     "lang": "zh-CN", "first": True, "same": False}
    assert second["role"] == "player" and second["text"] == greedy
    assert second["label"] == "Greedy decoding — the player below steps through this one"
    assert second["text"] == page.evaluate("ITTXray.state.trace.translation")
    assert second["same"] == (beam == greedy)

    page.locator("#xr-beam-link").click()  # the player runs beam 4: it is first, greedy second
    page.wait_for_function("() => ITTXray.state.req && ITTXray.state.req.strategy === 'beam'")
    ready(page)
    first, second = result_lines(page)
    assert (first["role"], first["text"], first["first"]) == ("player", beam, True)
    assert first["label"] == "Beam search (4 beams) — the player below steps through this one"
    assert (second["role"], second["label"], second["text"]) == ("other", "Greedy decoding", greedy)

    # a forced prefix: the player's line says so; beam 4 above it is the unforced sentence's
    page.goto(f"{server}{XRAY}?text={quote(MUSEUM)}&forced=%E5%91%A8&max_len=4")
    ready(page)
    first, second = result_lines(page)
    assert first["text"] == translated(page, server, strategy="beam", beam_size=4, max_len=4) + "…"
    assert second["label"].startswith("Greedy decoding, with the tokens you forced")
    assert second["text"].startswith("周") and second["text"].endswith("…")
    assert page.locator("#xr-result").text_content().count("(cut off at the maximum length)") == 2


def test_the_translation_box_reads_in_chinese(page, server):
    page.goto(f"{server}/lang/zh?next={quote('/?text=' + quote(MUSEUM))}")
    ready(page)
    assert page.locator("#xr-result-title").text_content() == "译文"
    first, second = result_lines(page)
    assert first["label"] == "束搜索（束宽 4）"
    assert second["label"] == "贪心解码——下面的播放器逐步演示的就是这一条"
