"""create_app(): load the translator once, mount the routers, static files and security layers."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from app import api, pages, sections
from app.observability import AccessLog
from app.resilience import RequestTimeout, ServerErrors
from app.security import BodySizeLimit, SecurityHeaders
from app.settings import Settings
from app.traces import TraceCache
from model.translator import InputError, Translator, set_threads

ROOT = Path(__file__).resolve().parents[1]
PLOTLY_JS = Path(__import__("plotly").__file__).parent / "package_data" / "plotly.min.js"
log = logging.getLogger("app")


def create_app(settings: Settings | None = None, translator: Translator | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        model = translator or Translator.load(settings.checkpoint)
        if settings.torch_threads:
            set_threads(settings.torch_threads)
        app.state.translator = model
        app.state.traces = TraceCache(model, settings.cache_size)
        log.info("loaded checkpoint %s", settings.checkpoint)
        yield

    app = FastAPI(
        title="Inside the Transformer",
        summary="A real English→Chinese Transformer, with every internal number exposed.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # the stock Swagger page loads its code from a CDN; /docs is our own page
        redoc_url=None,
    )
    app.state.settings = settings
    app.include_router(api.router)
    app.include_router(pages.router)
    app.include_router(sections.router)

    @app.get("/vendor/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        """plotly.js as shipped inside the plotly Python package: no CDN."""
        return FileResponse(PLOTLY_JS, media_type="text/javascript",
                            headers={"Cache-Control": "public, max-age=86400"})

    app.mount("/static", StaticFiles(directory=ROOT / "static"), name="static")

    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(InputError, _input_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _server_error)

    # Innermost first: errors and time-outs become answers that still get gzip and the headers.
    app.add_middleware(ServerErrors)
    app.add_middleware(RequestTimeout, seconds=settings.request_timeout_s)
    # Level 4: a trace compresses to ~10% more bytes than at level 9, ten times faster.
    app.add_middleware(GZipMiddleware, minimum_size=1024, compresslevel=4)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(AccessLog, enabled=settings.access_log)
    return app


def _field(loc: tuple) -> str:
    parts = [str(part) for part in loc if part != "body"]
    return ".".join(parts) or "body"


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 whose message names each field and its limit, e.g. 'temperature: ... ≤ 5'."""
    errors = []
    for error in exc.errors():
        message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        field = _field(tuple(error.get("loc", ())))
        if error.get("type") == "json_invalid":  # loc is ("body", <character offset>)
            field, message = "body", f"the request body is not valid JSON ({message})"
        errors.append({"field": field, "message": message})
    text = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return JSONResponse({"message": text, "errors": errors}, status_code=422)


async def _input_error(request: Request, exc: InputError) -> JSONResponse:
    message = f"{exc.field}: {exc}"
    return JSONResponse(
        {"message": message, "errors": [{"field": exc.field, "message": str(exc)}]},
        status_code=422,
    )


async def _http_error(request: Request, exc: StarletteHTTPException):
    """A body that is not even text (400 from FastAPI) is answered like malformed JSON: 422."""
    if exc.status_code == 400:
        message = "body: the request body must be UTF-8 JSON"
        return JSONResponse({"message": message, "errors": [{"field": "body", "message": message}]},
                            status_code=422)
    return await http_exception_handler(request, exc)


async def _server_error(request: Request, exc: Exception) -> JSONResponse:
    """Log the traceback on the server; the client only learns that it failed."""
    log.exception("unhandled error on %s", request.url.path)
    return JSONResponse({"message": "internal server error"}, status_code=500)
