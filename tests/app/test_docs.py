"""/docs: the bilingual page around Swagger UI, whose files come from the fastapi-offline package."""

from __future__ import annotations

import re
from html import unescape
from importlib.resources import files

import pytest

from app.i18n import strings

VENDOR = files("fastapi_offline") / "static"


@pytest.mark.parametrize(("name", "media_type"), [
    ("swagger-ui-bundle.js", "text/javascript"),
    ("swagger-ui.css", "text/css"),
])
def test_swagger_ui_files_are_served_from_the_package(app_client, name, media_type):
    response = app_client.get(f"/vendor/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] == media_type
    assert response.headers["cache-control"] == "public, max-age=86400"
    assert response.content == (VENDOR / name).read_bytes()
    assert app_client.head(f"/vendor/{name}").status_code == 200


def test_only_the_swagger_ui_files_are_served(app_client):
    for path in ("/vendor/redoc.standalone.js", "/vendor/favicon.png", "/vendor/core.py",
                 "/vendor/..%2F__init__.py", "/redoc"):
        assert app_client.get(path).status_code == 404, path


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_loads_swagger_ui_from_this_server_and_explains_the_limits(fresh_client, lang):
    fresh_client.cookies.set("lang", lang)
    html = fresh_client.get("/docs").text
    text = strings(lang, "docs")
    assert 'href="/vendor/swagger-ui.css"' in html and 'src="/vendor/swagger-ui-bundle.js"' in html
    assert 'src="/static/js/docs.js"' in html and 'id="swagger-ui"' in html
    assert text["docs.english"] in unescape(html)  # Swagger UI's own labels stay English: the page says so
    assert "600" in html and "16 KB" in html and "413" in html and "422" in html
    nav = re.search(r"<nav\b.*?</nav>", html, re.S).group(0)
    assert re.search(r'<a href="/docs"[^>]*aria-current="page"', nav)  # in the main nav, not only the footer


def test_every_page_links_the_api_from_the_nav(app_client):
    nav = re.search(r"<nav\b.*?</nav>", app_client.get("/tokens").text, re.S).group(0)
    assert 'href="/docs"' in nav
