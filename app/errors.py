"""The error answers, in one shape: JSON ``{"message", "errors"}`` for a program, the error page
in the reader's language for a page (``is_page``). The exception handlers answer what a route
raises: 422 naming the field and its limit (``RequestValidationError``, ``InputError``, a body
that is not UTF-8), 404/405 and the other HTTP errors, 503 + Retry-After when the model thread
cannot take the request in time (``Busy``) or a model call was stopped (``Cancelled``). The
middleware (``app/middleware.py``) answers with ``answer`` and ``SERVER_ERROR_PAGE`` before or
around the routes.
"""

from __future__ import annotations

import json
import sys
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.i18n import COOKIE, choose_language
from app.layout import render_page
from app.schemas import NotFound
from app.tickets import Busy, Cancelled
from model.api import InputError


def install(app: FastAPI) -> None:
    """Add the exception handlers."""
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(InputError, _input_error)  # NotFound (a subclass): 404
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Busy, _busy)
    app.add_exception_handler(Cancelled, _cancelled)


async def answer(send, status: int, message: str, retry_after: int | None = None,
                 close: bool = False, field: str | None = None) -> None:
    """A complete error response in the one shape (``error_body``), sent from inside a
    middleware."""
    body = json.dumps(error_body(message, field)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    if close:  # the rest of the request is still on the wire: do not read it as the next one
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def error_body(message: str, field: str | None = None) -> dict:
    """The one error shape: ``{"message": "field: what to fix", "errors": [{"field", "message"}]}``
    (the field named once, as the message's prefix; no field: an empty list)."""
    if field is None:
        return {"message": message, "errors": []}
    return {"message": f"{field}: {message}", "errors": [{"field": field, "message": message}]}


# Addresses a program reads (JSON, files); every other address is a page a reader opens, and its
# errors are a small HTML page in the reader's language (templates/error.html).
NOT_PAGES = ("/api/", "/static/", "/vendor/", "/healthz", "/openapi.json")


def is_page(path: str) -> bool:
    return not path.startswith(NOT_PAGES)


# The 500 page the middleware sends when a page failed (no template: it may be what failed).
SERVER_ERROR_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>500 · Inside the Transformer</title>
<link rel="stylesheet" href="/static/css/app.css"></head>
<body><main><h1>Something went wrong · <span lang="zh-CN">出错了</span></h1>
<p>The server could not show this page; the error is in its log. Try again, or
<a href="/">go back to the x-ray</a>.</p>
<p lang="zh-CN">服务器无法显示此页面，错误已记入日志。请重试，或<a href="/">回到透视页</a>。</p>
</main></body></html>
"""


def error_response(request: Request, status: int, message: str, errors: list[dict] | None = None,
                   headers: dict | None = None) -> Response:
    """An error in the one shape: JSON ``{"message", "errors"}``, or for a page the error page."""
    if is_page(request.url.path):
        lang = choose_language(request.cookies.get(COOKIE), request.headers.get("accept-language"))
        page = render_page(request, "error", lang, status=status, detail=message,
                           back=request.url.path)
        page.status_code = status
        page.headers.update(headers or {})
        return page
    return JSONResponse({"message": message, "errors": errors or []}, status_code=status,
                        headers=headers)


def _field(loc: tuple) -> str:
    parts = [str(part) for part in loc if part != "body"]
    return ".".join(parts) or "body"


async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
    """422 whose message names each field and its limit, e.g. 'temperature: ... ≤ 5'."""
    errors = []
    for error in exc.errors():
        message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        field = _field(tuple(error.get("loc", ())))
        if error.get("type") == "json_invalid":  # loc is ("body", <character offset>)
            field, message = "body", f"the request body is not valid JSON ({message})"
        errors.append({"field": field, "message": message})
    text = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return error_response(request, 422, text, errors)


async def _input_error(request: Request, exc: InputError) -> Response:
    body = error_body(str(exc), exc.field)
    status = 404 if isinstance(exc, NotFound) else 422
    return error_response(request, status, body["message"], body["errors"])


async def _busy(request: Request, exc: Busy) -> JSONResponse:
    """503 at once, with the seconds after which the queue should have room again."""
    return JSONResponse({"message": str(exc), "errors": []}, status_code=503,
                        headers={"Retry-After": str(exc.retry_after)})


async def _cancelled(request: Request, exc: Cancelled) -> JSONResponse:
    """The model call was stopped (deadline, or a client that left and reads nothing)."""
    return JSONResponse({"message": str(exc), "errors": []}, status_code=503,
                        headers={"Retry-After": "1"})


def unreadable_body(cause: BaseException | None) -> str:
    """Why FastAPI could not read a body as JSON (it answers 400 with one sentence for all)."""
    if isinstance(cause, UnicodeDecodeError):
        return (f"the request body is not UTF-8 text (byte 0x{cause.object[cause.start]:02x} at "
                f"offset {cause.start}); send JSON encoded as UTF-8")
    if isinstance(cause, RecursionError):
        return ("the request body is JSON nested too deeply to read; no field nests more than two "
                "levels")
    if isinstance(cause, ValueError) and "integer string conversion" in str(cause):
        return (f"the request body has a number of more than {sys.get_int_max_str_digits()} digits"
                "; no field takes one (the largest, seed, is at most 10 digits)")
    return "the request body could not be read as JSON"


HTTP_MESSAGES = {
    404: "not found: no page or endpoint has this address (the API is listed at /docs)",
}


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """Every HTTP error in the one shape. A body FastAPI could not parse (its 400) is answered
    like malformed JSON, 422, saying why."""
    if exc.status_code == 400:
        body = error_body(unreadable_body(exc.__cause__), "body")
        return error_response(request, 422, body["message"], body["errors"])
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        allowed = next((value for name, value in headers.items() if name.lower() == "allow"), "")
        message = f"method not allowed: this address answers {allowed}"
    elif exc.detail and exc.detail != HTTPStatus(exc.status_code).phrase:  # a route's own words
        message = str(exc.detail)
    else:
        message = HTTP_MESSAGES.get(exc.status_code, HTTPStatus(exc.status_code).phrase.lower())
    return error_response(request, exc.status_code, message, headers=headers)
