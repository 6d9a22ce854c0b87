"""/docs — the API reference: a bilingual introduction, then FastAPI's own Swagger UI drawn from
/openapi.json. Swagger UI's script and stylesheet come from the ``fastapi-offline`` package and are
served here (no CDN); static/js/docs.js starts it, so the page needs no inline script.

There is no /redoc: ReDoc 2.5 (the one fastapi-offline ships) always draws its side-menu logo from
https://cdn.redoc.ly, with no option to turn it off, so every visit would try to reach another site
(the CSP blocks it and the browser logs a violation). Swagger UI shows everything it would."""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse

from app.deps import LanguageDep
from app.layout import render_page
from app.schemas import MAX_TEXT_CHARS

router = APIRouter(include_in_schema=False)

# Swagger UI 5 as fastapi-offline ships it: served name → media type.
VENDOR_DIR = files("fastapi_offline") / "static"
VENDOR_FILES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
}


@router.get("/docs", response_class=HTMLResponse)
def page(request: Request, lang: LanguageDep) -> HTMLResponse:
    settings = request.app.state.settings
    return render_page(request, "docs", lang, max_chars=MAX_TEXT_CHARS,
                       body_kb=f"{settings.max_body_bytes / 1024:g}",
                       timeout_s=f"{settings.request_timeout_s:g}", max_queue=settings.max_queue)


def _vendor_route(name: str, media_type: str):
    path = str(VENDOR_DIR / name)

    def vendor_file() -> FileResponse:
        return FileResponse(path, media_type=media_type, headers={"Cache-Control": "public, max-age=86400"})

    vendor_file.__doc__ = f"{name} from the fastapi-offline package, cached for a day like plotly.js."
    return vendor_file


for _name, _media_type in VENDOR_FILES.items():
    router.add_api_route(f"/vendor/{_name}", _vendor_route(_name, _media_type), methods=["GET"])
