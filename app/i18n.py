"""Chinese and English: which language a reader gets, and the strings of each page.

How a page gets its strings (the convention every page follows):

- Its strings are ``app/locales/en/<page>.json`` and ``app/locales/zh/<page>.json``: flat objects
  ``{"<page-prefix>.<name>": "text with {placeholders}"}`` holding the same keys in both languages.
  Strings more than one page uses (site title, nav, footer, the sentence form, ``word.*``,
  ``common.*``) are in ``common.json``. A key lives in exactly one file.
- The HTML route renders through ``app.layout.render_page(request, "<page>", lang, ...)``: the
  template receives ``t`` (``t("key", n=3)``) and ``base.html`` writes *only* ``common`` + the
  page's own strings into the ``<script id="i18n">`` JSON block that ``ITT.t`` reads in the browser.
- A JSON route that needs words (axis titles, legends) declares ``t: PageText`` with
  ``PageText = page_text("<page>")`` from ``app.deps``; ``t`` resolves common + that page's keys.

An unknown key shows itself (easy to spot; the tests look for it). The language comes from the
``lang`` cookie, else the browser's Accept-Language, else English.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

LANGUAGES = ("zh", "en")
DEFAULT_LANGUAGE = "en"
COOKIE = "lang"
COMMON = "common"
LOCALES = Path(__file__).resolve().parent / "locales"


def choose_language(cookie: str | None, accept_language: str | None) -> str:
    """The cookie wins; else the highest-weighted supported language in Accept-Language."""
    if cookie in LANGUAGES:
        return cookie
    best, best_q = DEFAULT_LANGUAGE, 0.0
    for part in (accept_language or "").split(",")[:20]:
        tag, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        primary = tag.strip().lower().split("-")[0]
        if primary in LANGUAGES and q > best_q:
            best, best_q = primary, q
    return best


@cache
def page_strings(lang: str, page: str) -> dict[str, str]:
    """One page's own strings in one language (``{}`` for a page without a locale file)."""
    path = LOCALES / lang / f"{page}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


@cache
def strings(lang: str, page: str) -> dict[str, str]:
    """What a page may use: the common strings and its own."""
    return {**page_strings(lang, COMMON), **page_strings(lang, page)}


def pages() -> list[str]:
    """Every page with a locale file (``common`` excluded)."""
    return sorted(path.stem for path in (LOCALES / DEFAULT_LANGUAGE).glob("*.json")
                  if path.stem != COMMON)


class Translate:
    """``t("key", n=3)`` → the string in this language, with ``{n}`` filled in."""

    def __init__(self, lang: str, page: str = COMMON):
        self.lang = lang
        self.page = page
        self.table = strings(lang, page)

    def __call__(self, key: str, **values: object) -> str:
        text = self.table.get(key, key)
        return text.format(**values) if values else text
