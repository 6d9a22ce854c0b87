"""HTML pages. Each renders a shell with the shared layout; its script reads the sentence and the
settings from the URL, asks the JSON API (which serves the cached trace) and draws the figures."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from app import texts  # noqa: F401  (registers the strings of the pages below)
from app.dependencies import LanguageDep, TranslatorDep
from app.i18n import COOKIE, LANGUAGES, Translate

ROOT = Path(__file__).resolve().parents[1]
templates = Jinja2Templates(directory=ROOT / "templates")  # autoescape is on for .html

router = APIRouter(include_in_schema=False)

# (path, i18n key) in the order a sentence travels through the model; sections.py fills the rest.
NAV = [
    ("/", "nav.pipeline"),
    ("/tokens", "nav.tokens"),
    ("/embeddings", "nav.embeddings"),
    ("/attention", "nav.attention"),
    ("/coreference", "nav.coreference"),
    ("/decode", "nav.decode"),
    ("/kv-cache", "nav.kv-cache"),
    ("/training", "nav.training"),
    ("/scale", "nav.scale"),
    ("/tour", "nav.tour"),
]
EXAMPLES = [
    "The cat sits on the mat.",
    "The woman said that she was tired.",
    "I like green tea.",
    "Where is the station?",
]
DEFAULT_TEXT = EXAMPLES[0]


def render_page(request: Request, template: str, page: str, lang: str, **context) -> HTMLResponse:
    """Render ``template`` inside base.html; ``page`` names the nav entry and static/js/<page>.js."""
    t = Translate(lang)
    translator = request.app.state.translator
    return templates.TemplateResponse(
        request,
        template,
        {
            "t": t,
            "lang": lang,
            "page": page,
            "nav": NAV,
            "examples": EXAMPLES,
            "text": request.query_params.get("text", DEFAULT_TEXT)[:400],
            "config": translator.config,
            "strings": t.table(),
            **context,
        },
        headers={"Content-Language": lang, "Vary": "Accept-Language, Cookie"},
    )


@router.get("/", response_class=HTMLResponse)
def pipeline(request: Request, lang: LanguageDep, translator: TranslatorDep) -> HTMLResponse:
    return render_page(request, "pipeline.html", "pipeline", lang,
                       parameters=translator.parameter_counts())


@router.get("/attention", response_class=HTMLResponse)
def attention(request: Request, lang: LanguageDep) -> HTMLResponse:
    return render_page(request, "attention.html", "attention", lang)


@router.get("/decode", response_class=HTMLResponse)
def decode(request: Request, lang: LanguageDep) -> HTMLResponse:
    return render_page(request, "decode.html", "decode", lang)


@router.get("/docs", response_class=HTMLResponse)
def docs(request: Request, lang: LanguageDep) -> HTMLResponse:
    """The API reference, drawn from /openapi.json by a local script (no CDN)."""
    return render_page(request, "docs.html", "docs", lang)


@router.get("/lang/{code}")
def switch_language(code: str, next: str = Query("/", max_length=2000)) -> RedirectResponse:
    """Remember the chosen language in a cookie and go back to the page the reader was on."""
    target = next if _local(next) else "/"
    response = RedirectResponse(target, status_code=303)
    if code in LANGUAGES:
        response.set_cookie(COOKIE, code, max_age=365 * 24 * 3600, samesite="lax", httponly=True)
    return response


def _local(url: str) -> bool:
    """Only same-site paths: '/x?y', never '//host' or 'http://host' (no open redirect)."""
    parts = urlsplit(url)
    return url.startswith("/") and not url.startswith("//") and not parts.scheme and not parts.netloc \
        and "\\" not in url
