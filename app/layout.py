"""The layout every page shares: the nav, the example sentences, ``render_page`` and the
language switch. Each page renders a shell; its script reads the sentence and the settings from
the URL, asks the page's JSON routes (which read the engine's cached trace) and draws the figures."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from urllib.parse import urlsplit

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from app.i18n import COOKIE, LANGUAGES, Translate
from app.model_facts import activation_name, model_facts
from app.schemas import MAX_TEXT_CHARS, decoding_contract
from model.api import MAX_SOURCE_TOKENS


def asset_folder(name: str) -> Path:
    """``templates`` or ``static``: inside the installed package (a wheel carries them as
    ``app/templates`` and ``app/static``: pyproject.toml's package-dir), else at the top of the
    checkout beside ``app/`` (a clone, an editable install, the Docker image)."""
    packaged = Path(str(files("app") / name))
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[1] / name


TEMPLATES, STATIC = asset_folder("templates"), asset_folder("static")
templates = Jinja2Templates(directory=TEMPLATES)  # autoescape is on for .html

router = APIRouter(include_in_schema=False)

# (path, i18n key) in the order a sentence travels through the model.
NAV = [
    ("/", "nav.xray"),
    ("/pipeline", "nav.pipeline"),
    ("/tokens", "nav.tokens"),
    ("/embeddings", "nav.embeddings"),
    ("/attention", "nav.attention"),
    ("/coreference", "nav.coreference"),
    ("/ablation", "nav.ablation"),
    ("/decode", "nav.decode"),
    ("/kv-cache", "nav.kv-cache"),
    ("/training", "nav.training"),
    ("/timeline", "nav.timeline"),
    ("/scale", "nav.scale"),
    ("/tour", "nav.tour"),
    ("/docs", "nav.docs"),
]
# Pages long enough to open with an "on this page" list of their sections (static/js/layout.js).
LONG_PAGES = {"decode", "training", "embeddings", "attention", "scale"}
EXAMPLES = [
    "The cat sits on the mat.",
    "The woman said that she was tired.",
    "I like green tea.",
    "Where is the station?",
]
DEFAULT_TEXT = EXAMPLES[0]


def render_page(request: Request, page: str, lang: str, **context) -> HTMLResponse:
    """Render ``templates/<page>.html`` inside base.html, with ``static/js/<page>.js`` and only
    the strings of ``app/locales/<lang>/{common,<page>}.json``."""
    t = Translate(lang, page)
    translator = request.app.state.translator
    text = request.query_params.get("text", DEFAULT_TEXT)  # whole: a long one is refused, never cut
    return templates.TemplateResponse(
        request,
        f"{page}.html",
        {
            "t": t,
            "lang": lang,
            "page": page,
            "nav": NAV,
            "long_pages": LONG_PAGES,
            "examples": EXAMPLES,
            "text": text,
            "max_chars": MAX_TEXT_CHARS,
            "decoding": decoding_contract(),  # the strategies and their options (common.js)
            "max_pieces": MAX_SOURCE_TOKENS,
            "text_refused": refusal(translator, text, t),
            "config": translator.config,
            "about": model_line(translator, t),
            "facts": model_facts(translator),
            "strings": t.table,
            **context,
        },
        headers={"Content-Language": lang, "Vary": "Accept-Language, Cookie"},
    )


def refusal(translator, text: str, t: Translate) -> str | None:
    """Why the model cannot take the sentence in the box, in plain words that say how much to
    cut; None when it can. The page shows it instead of sending the sentence (common.js)."""
    if len(text) > MAX_TEXT_CHARS:
        return t("form.limit.chars", n=len(text), limit=MAX_TEXT_CHARS, cut=len(text) - MAX_TEXT_CHARS)
    pieces = len(translator.english.encode(text))  # with the end mark, as the model counts them
    if pieces <= MAX_SOURCE_TOKENS:
        return None
    words = text.split()
    fit, over = 0, len(words)  # the most whole words from the start that the model can read
    while fit + 1 < over:
        middle = (fit + over) // 2
        if len(translator.english.encode(" ".join(words[:middle]))) <= MAX_SOURCE_TOKENS:
            fit = middle
        else:
            over = middle
    values = {"n": pieces, "limit": MAX_SOURCE_TOKENS, "cut": pieces - MAX_SOURCE_TOKENS}
    if not fit:
        return t("form.limit.pieces_word", **values)
    end = " ".join(words[max(0, fit - 4):fit])  # the last words it can read
    return t("form.limit.pieces", **values, fit=fit, words=len(words), end=end)


def model_line(translator, t: Translate) -> dict:
    """What the footer says about the model being served: its name, kind and languages, its FFN
    activation, and a note when that is not the ReLU of this project's own model."""
    about = translator.about
    lang = "zh" if t.lang == "zh" else "en"
    config = translator.config
    activation = activation_name(config)
    return {
        "kind": about["kind"],
        "name": about["name"],
        "line": t(f"site.model_{'marian' if about['kind'] == 'marian' else 'ours'}",
                  name=about["name"], source=about["source"][lang], target=about["target"][lang],
                  layers=f"{config.n_encoder_layers}+{config.n_decoder_layers}",
                  heads=config.n_heads,
                  vocab=f"{about.get('vocab_size', translator.chinese.vocab_size):,}"),
        "activation": activation,
        "activation_note": "" if activation == "ReLU" else t("site.model_activation", act=activation),
    }


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
