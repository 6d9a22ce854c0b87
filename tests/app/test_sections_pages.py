"""Section pages render in both languages, run no inline script, and escape user text."""

from __future__ import annotations

import re

import pytest

from app.i18n import STRINGS

PAGES = {
    "/tokens": "tokens.title",
    "/embeddings": "emb.title",
    "/coreference": "coref.title",
    "/training": "training.title",
    "/kv-cache": "kv.title",
    "/scale": "scale.title",
    "/tour": "tour.title",
}


@pytest.mark.parametrize("path", PAGES)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_section_pages_render(fresh_client, path, lang):
    fresh_client.cookies.set("lang", lang)  # a client of its own: the cookie cannot leak out
    response = fresh_client.get(path)
    assert response.status_code == 200
    html = response.text
    title = STRINGS[PAGES[path]][lang]
    assert title.replace("“", "&#8220;") in html or title in html
    assert "sections.css" in html and "/static/js/" in html
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert 'type="application/json"' in tag or re.search(r'src="/(static|vendor)/', tag), tag
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert not re.search(r"<[^>]+\son[a-z]+\s*=", html)
    assert response.headers["content-security-policy"].startswith("default-src 'self'")


@pytest.mark.parametrize("path", ["/tour", "/tokens", "/training", "/coreference"])
def test_user_text_is_escaped(app_client, path):
    evil = '<img src=x onerror="alert(1)">'
    html = app_client.get(path, params={"text": evil, "pronoun": "x", "referent": evil,
                                        "reference": evil}).text
    assert evil not in html and "<img src=x" not in html


def test_scale_page_tables(app_client, tiny_translator):
    html = app_client.get("/scale").text
    for anchor in ("gpt-table", "calculator", "chatgpt", "design", "improvements", "timeline",
                   "why-moe", "imp-efficiency-flash", "imp-positions-rope", "imp-positions-alibi",
                   "imp-architecture-prenorm", "imp-architecture-swiglu", "imp-efficiency-gqa",
                   "stage-sft", "stage-rm", "stage-ppo", "year-2017"):
        assert f'id="{anchor}"' in html, anchor
    assert "174,604,259,328" in html  # GPT-3 by the calculator
    total = sum(p.numel() for p in tiny_translator.model.parameters())
    assert f"{total:,}" in html
    assert html.count('class="badge"') == 1  # GPT-4 marked as an estimate
    assert 'id="scale-presets"' in html


def test_tour_steps_carry_the_sentence(app_client):
    html = app_client.get("/tour", params={"step": 2, "text": "I like green tea."}).text
    assert 'href="/tour?step=1&amp;text=I%20like%20green%20tea."' in html
    assert 'href="/tour?step=3&amp;text=I%20like%20green%20tea."' in html
    assert 'href="/embeddings?text=I%20like%20green%20tea."' in html
    assert 'class="stage current" data-stage="embedding"' in html
    first = app_client.get("/tour").text
    assert 'id="tour-back"' not in first and 'id="tour-next"' in first
    last = app_client.get("/tour", params={"step": 999}).text
    assert 'id="tour-next"' not in last and 'id="tour-back"' in last
    assert app_client.get("/tour", params={"step": "abc"}).status_code == 200


def test_tour_visits_every_section_in_order():
    from app.section_content import TOUR

    assert [path for path, _, _ in TOUR] == [
        "/", "/tokens", "/embeddings", "/attention", "/coreference", "/training", "/decode",
        "/kv-cache", "/scale"]
    for _, _, key in TOUR:
        assert f"{key}.title" in STRINGS and f"{key}.text" in STRINGS


def test_coreference_page_defaults_to_an_example(app_client):
    html = app_client.get("/coreference", params={"text": "I like green tea."}).text
    assert 'value="The woman said that she was tired."' in html
    html = app_client.get("/coreference", params={
        "text": "The boy kicked the ball and he laughed.", "pronoun": "he", "referent": "boy"}).text
    assert 'value="The boy kicked the ball and he laughed."' in html and 'value="boy"' in html
