"""/docs — the API reference, drawn in the browser from /openapi.json by a local script (no CDN)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.deps import LanguageDep
from app.layout import render_page

router = APIRouter(include_in_schema=False)


@router.get("/docs", response_class=HTMLResponse)
def page(request: Request, lang: LanguageDep) -> HTMLResponse:
    return render_page(request, "docs", lang)
