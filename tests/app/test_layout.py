"""The layout every page shares (app/layout.py, templates/base.html): every page renders in both
languages, carries the security headers, runs no inline script and never lets user text become
markup; the language switch."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from app.i18n import strings

ROOT = Path(__file__).resolve().parents[2]
PLOTLY_SHA256 = "79542150855a52c567260e3137095dbe2b744e6d702a5cabe67da246942fba7a"
PAGES = ["/", "/pipeline", "/tokens", "/embeddings", "/attention", "/coreference", "/decode", "/kv-cache",
         "/training", "/timeline", "/scale", "/tour", "/docs"]


@pytest.mark.parametrize("path", PAGES)
def test_pages_link_every_page(app_client, path):
    response = app_client.get(path)
    assert response.status_code == 200
    html = response.text
    assert "text/html" in response.headers["content-type"]
    for link in ("/tokens", "/embeddings", "/attention", "/decode", "/training", "/kv-cache",
                 "/scale", "/tour"):
        assert f'href="{link}"' in html
    assert 'id="lang-toggle"' in html and 'id="loading"' in html


@pytest.mark.parametrize("path", PAGES)
def test_no_inline_script_and_no_third_party_origin(app_client, path):
    html = app_client.get(path).text
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert 'type="application/json"' in tag or re.search(r'src="/(static|vendor)/', tag), tag
    inline = re.findall(r"<script(?![^>]*application/json)(?![^>]*src=)[^>]*>(.*?)</script>",
                        html, re.S)
    assert inline == []
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert not re.search(r"<[^>]+\son[a-z]+\s*=", html)  # no inline event handlers


def test_security_headers(app_client):
    for path in ("/", "/api/model", "/static/js/common.js"):
        headers = app_client.get(path).headers
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert "unsafe-eval" not in csp and "http" not in csp
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"


def test_plotly_is_served_locally(app_client):
    """The cartesian bundle of plotly.js, byte for byte what npm publishes (static/vendor/README.md
    names the package, the version and this hash)."""
    response = app_client.get("/vendor/plotly.min.js")
    assert response.status_code == 200
    assert "javascript" in response.headers["content-type"]
    assert response.content.startswith(b"/**\n* plotly.js (cartesian - minified) v4.1.1")
    assert hashlib.sha256(response.content).hexdigest() == PLOTLY_SHA256
    readme = (ROOT / "static" / "vendor" / "README.md").read_text(encoding="utf-8")
    assert PLOTLY_SHA256 in readme and "plotly.js-cartesian-dist-min@4.1.1" in readme


def test_user_text_is_escaped(app_client):
    evil = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    html = app_client.get("/", params={"text": evil}).text
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_language_from_accept_language(app_client):
    zh = app_client.get("/pipeline", headers={"accept-language": "zh-CN,zh;q=0.9,en;q=0.8"})
    assert '<html lang="zh-CN">' in zh.text and "一句话在 Transformer 里走一遍" in zh.text
    en = app_client.get("/pipeline", headers={"accept-language": "en-GB,en;q=0.9"})
    assert '<html lang="en">' in en.text and "One sentence through the Transformer" in en.text
    fallback = app_client.get("/pipeline", headers={"accept-language": "fr-FR"})
    assert '<html lang="en">' in fallback.text


def test_the_first_address_of_the_xray_leads_to_it(app_client):
    response = app_client.get("/xray", params={"text": "Hi there."}, follow_redirects=False)
    assert response.status_code == 308 and response.headers["location"] == "/?text=Hi+there."


def test_language_toggle_sets_a_cookie(tiny_checkpoint, tiny_translator):
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(checkpoint=tiny_checkpoint), translator=tiny_translator)
    with TestClient(app) as client:
        response = client.get("/lang/zh", params={"next": "/decode?text=a+cat"},
                              follow_redirects=False)
        assert response.status_code == 303
        assert response.headers["location"] == "/decode?text=a+cat"
        assert "lang=zh" in response.headers["set-cookie"]
        page = client.get("/decode", headers={"accept-language": "en"})
        assert "逐步解码" in page.text  # the cookie beats the browser's language


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/\\evil", "x"])
def test_language_toggle_is_not_an_open_redirect(app_client, target):
    response = app_client.get("/lang/en", params={"next": target}, follow_redirects=False)
    assert response.headers["location"] == "/"


# path → (page, the key of its <h1>)
TITLES = {
    "/": ("xray", "xray.title"),
    "/pipeline": ("pipeline", "pipeline.title"),
    "/tokens": ("tokens", "tokens.title"),
    "/embeddings": ("embeddings", "emb.title"),
    "/attention": ("attention", "attention.title"),
    "/coreference": ("coreference", "coref.title"),
    "/decode": ("decode", "decode.title"),
    "/kv-cache": ("kv_cache", "kv.title"),
    "/training": ("training", "training.title"),
    "/timeline": ("timeline", "timeline.title"),
    "/scale": ("scale", "scale.title"),
    "/tour": ("tour", "tour.title"),
    "/docs": ("docs", "docs.title"),
}


@pytest.mark.parametrize("path", PAGES)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_page_renders_in_both_languages(fresh_client, path, lang):
    fresh_client.cookies.set("lang", lang)  # a client of its own: the cookie cannot leak out
    response = fresh_client.get(path)
    assert response.status_code == 200
    html = response.text
    page, title_key = TITLES[path]
    title = strings(lang, page)[title_key]
    assert title.replace("“", "&#8220;") in html or title in html
    # the x-ray is ES modules (static/js/xray/*.js), entered through main.js
    script = f'src="/static/js/{page}.js"'
    if page == "xray":
        script = '<script type="module" src="/static/js/xray/main.js">'
    assert script in html and 'href="/static/css/app.css"' in html
    assert response.headers["content-security-policy"].startswith("default-src 'self'")
    assert response.headers["content-language"] == lang


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_page_says_how_to_run_another_model(app_client, lang):
    """Issue 25 item 11: the footer names the model running and how to bring a Marian model."""
    for path in ("/", "/pipeline", "/attention"):
        html = app_client.get(path, headers={"cookie": f"lang={lang}"}).text
        assert 'id="model-line"' in html and 'id="bring-model"' in html
        assert "python -m app --model PATH" in html
        assert "Use a real pretrained model" in html  # the README section, by its heading
