"""Every layer a request passes before and after its route, as plain ASGI middleware, and the
error answers. From the outside in:

- ``AccessLog`` — one JSON line per request on the ``app.access`` logger, and ``Server-Timing``::

      {"ts": "2026-11-29T09:41:07.123Z", "method": "POST", "path": "/api/trace", "status": 200,
       "duration_ms": 61.4, "model_ms": 55.2, "queue_ms": 3.1, "bytes": 48213,
       "client": "127.0.0.1"}

  ``model_ms`` is read from the ``model;dur=…`` entry a JSON route puts in ``Server-Timing`` (0 when
  the trace came from the cache, absent for requests that never touch the model), ``queue_ms``
  from ``queue;dur=…`` (the wait for the model thread); ``app;dur=…`` is added to every response,
  so browser dev tools show all three side by side.
- ``SecurityHeaders`` — Content-Security-Policy (no third-party origin, no inline script) and friends.
- ``BodySizeLimit`` — 413 for a body over the limit, whether or not it declares Content-Length;
  408 for a body that does not arrive in time.
- gzip, then ``RequestTimeout`` — the request's ticket (deadline; cancelled when the client
  disconnects), and 503 when no answer has started after the limit: the model stops with it.
- ``ServerErrors`` — the one error path for unhandled exceptions: log the traceback, answer a bare
  500. It lives *inside* the security headers: Starlette's own ``ServerErrorMiddleware`` is
  outermost, where no user middleware wraps it, so a 500 from there would lack the headers.
- ``HeadAsGet`` — ``HEAD`` answered like ``GET``, without the body (FastAPI routes are GET only).

Expected errors are answered by the exception handlers at the bottom: 422 naming the field and its
limit (``RequestValidationError``, ``InputError``, a body that is not UTF-8); 503 + Retry-After
when the model thread's queue is full (``Busy``) or a model call was stopped (``Cancelled``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import time
from datetime import UTC, datetime
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.i18n import COOKIE, choose_language
from app.layout import render_page
from app.schemas import NotFound
from app.security import HEADERS
from app.settings import Settings
from app.tickets import CURRENT_TICKET, REQUEST_OVER, Busy, Cancelled, Ticket
from model.translator import InputError

log = logging.getLogger("app")
ACCESS_LOGGER = "app.access"
MODEL_TIMING = re.compile(r"(?:^|,)\s*model;dur=([0-9.]+)")
QUEUE_TIMING = re.compile(r"(?:^|,)\s*queue;dur=([0-9.]+)")


def install(app: FastAPI, settings: Settings) -> None:
    """Add the error handlers and the middleware stack (innermost first)."""
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(InputError, _input_error)  # NotFound (a subclass): 404
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Busy, _busy)
    app.add_exception_handler(Cancelled, _cancelled)
    app.add_middleware(HeadAsGet)
    # Errors and time-outs become answers that still get gzip and the headers.
    app.add_middleware(ServerErrors)
    app.add_middleware(RequestTimeout, seconds=settings.request_timeout_s)
    # Level 1: a 10-word trace (280 KB of JSON) becomes 105 KB in 2.3 ms; level 4 gives 95 KB in
    # 4.1 ms, level 6 87 KB in 17 ms. On a classroom network the time matters more than 10 KB.
    app.add_middleware(GZipMiddleware, minimum_size=1024, compresslevel=1)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes,
                       read_timeout_s=settings.body_read_timeout_s)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(AccessLog, enabled=settings.access_log)


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


# -- access log -----------------------------------------------------------------------------------



class JSONLineFormatter(logging.Formatter):
    """The record's message is already a JSON object: write it as is, one per line."""

    def format(self, record: logging.LogRecord) -> str:
        return record.getMessage()


def access_logger() -> logging.Logger:
    """``app.access`` writes bare JSON lines to stderr, whatever format the root logger uses."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JSONLineFormatter())
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


class AccessLog:
    """Outermost layer: time the request, add ``Server-Timing: app``, log one JSON line."""

    def __init__(self, app, enabled: bool = True):
        self.app = app
        self.enabled = enabled
        self.log = access_logger()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status, model_ms, queue_ms, sent = 500, None, None, 0

        async def timed_send(message):
            nonlocal status, model_ms, queue_ms, sent
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                app_ms = (time.perf_counter() - started) * 1000
                timing = [value.decode("latin-1") for name, value in headers if name == b"server-timing"]
                match = MODEL_TIMING.search(", ".join(timing))
                if match:
                    model_ms = float(match.group(1))
                match = QUEUE_TIMING.search(", ".join(timing))
                if match:
                    queue_ms = float(match.group(1))
                headers = [(name, value) for name, value in headers if name != b"server-timing"]
                merged = ", ".join([*timing, f"app;dur={app_ms:.1f}"])
                headers.append((b"server-timing", merged.encode("latin-1")))
                message = {**message, "headers": headers}
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        finally:
            if self.enabled:
                self.log.info(json.dumps(self.entry(scope, status, started, model_ms, sent,
                                                    queue_ms)))

    @staticmethod
    def entry(scope, status: int, started: float, model_ms: float | None, sent: int,
              queue_ms: float | None = None) -> dict:
        client = scope.get("client")
        entry = {
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "method": scope.get("method"),
            "path": scope.get("path"),
            "status": status,
            "duration_ms": round((time.perf_counter() - started) * 1000, 2),
        }
        if model_ms is not None:
            entry["model_ms"] = model_ms
        if queue_ms is not None:
            entry["queue_ms"] = queue_ms
        entry["bytes"] = sent
        if client:
            entry["client"] = client[0]
        return entry


# -- security -----------------------------------------------------------------------------------


class SecurityHeaders:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                names = {name for name, _ in message.get("headers", [])}
                message["headers"] = list(message.get("headers", [])) + [
                    header for header in HEADERS if header[0] not in names
                ]
            await send(message)

        await self.app(scope, receive, send_with_headers)


class BodySizeLimit:
    """Answer 413 to a body over ``max_bytes``, whether or not it declares Content-Length, and 408
    to a body that does not arrive within ``read_timeout_s`` (a slow client holds no worker)."""

    def __init__(self, app, max_bytes: int, read_timeout_s: float = 10.0):
        self.app = app
        self.max_bytes = max_bytes
        self.read_timeout_s = read_timeout_s

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers", []))
        declared = headers.get(b"content-length")
        try:
            declared_size = int(declared) if declared is not None else None
        except ValueError:
            declared_size = None
        if declared_size is not None and declared_size > self.max_bytes:
            return await self.refuse(receive, send)
        if scope["method"] in ("GET", "HEAD", "OPTIONS") and declared is None:
            return await self.app(scope, receive, send)
        # Read the (small) body up front so a lying or missing Content-Length cannot slip past.
        chunks, size = [], 0
        deadline = time.monotonic() + self.read_timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                return await answer(send, 408, f"the request body did not arrive within "
                                               f"{self.read_timeout_s:g} s", close=True,
                                    field="body")
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return await self.refuse(receive, send, more=message.get("more_body", False))
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


    async def refuse(self, receive, send, more: bool = True) -> None:
        """413 at once, then read and drop the rest of the body (at most ``DRAIN_BYTES``, within
        ``read_timeout_s``) before the connection closes: a client still sending its body reads
        the answer, instead of a connection reset (the kernel resets a connection closed with
        unread data) or a send that blocks forever."""
        body = json.dumps(error_body(f"request bodies are limited to {self.max_bytes} bytes",
                                     "body"))
        await send({"type": "http.response.start", "status": 413, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body.encode(), "more_body": True})
        drained, deadline = 0, time.monotonic() + self.read_timeout_s
        while more and drained < DRAIN_BYTES:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                break
            if message["type"] == "http.disconnect":
                break
            drained += len(message.get("body", b""))
            more = message.get("more_body", False)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


DRAIN_BYTES = 16 * 1024 * 1024  # a body this far past the limit is cut off (connection reset)


class HeadAsGet:
    """``HEAD`` on any page or GET route: answer as ``GET`` would, headers only (not 405)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "HEAD":
            return await self.app(scope, receive, send)

        async def headers_only(message):
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)


# -- resilience ---------------------------------------------------------------------------------


class ServerErrors:
    """An exception before the answer started → log the traceback, send ``{"message": ...}`` 500."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def watched_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watched_send)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:  # half an answer is out: all we can do is drop the connection
                raise
            if is_page(scope.get("path", "")):  # no template: it may be what failed
                body = SERVER_ERROR_PAGE.encode()
                await send({"type": "http.response.start", "status": 500, "headers": [
                    (b"content-type", b"text/html; charset=utf-8"),
                    (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
            await answer(send, 500, "internal server error")


SERVER_ERROR_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>500 · Inside the Transformer</title>
<link rel="stylesheet" href="/static/css/app.css"></head>
<body><main><h1>Something went wrong · <span lang="zh-CN">出错了</span></h1>
<p>The server could not show this page; the error is in its log. Try again, or
<a href="/">go back to the x-ray</a>.</p>
<p lang="zh-CN">服务器无法显示此页面，错误已记入日志。请重试，或<a href="/">回到透视页</a>。</p>
</main></body></html>
"""


class RequestTimeout:
    """Give each request a :class:`~app.tickets.Ticket` with its deadline, cancel it when the client
    disconnects, and answer 503 when no response has started after ``seconds``.

    The ticket is what stops the model: a queued call whose request is gone never runs, a running
    one stops at its next layer (app/engine.py), so after a 503 nothing keeps computing. The
    ticket's queue time goes into ``Server-Timing`` as ``queue;dur=…`` beside the route's
    ``model;dur=…``. Responses that have started (e.g. a slow client downloading plotly.js) are
    never cut.
    """

    def __init__(self, app, seconds: float):
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        ticket = Ticket(self.seconds, route=scope.get("path"))
        started, abandoned, answered = asyncio.Event(), False, False
        inbox: asyncio.Queue = asyncio.Queue()

        async def listen():
            """Read the client's messages as they come; the disconnect cancels the ticket (the
            server also says "disconnect" once the answer is sent: then the request is over)."""
            while True:
                message = await receive()
                inbox.put_nowait(message)
                if message["type"] == "http.disconnect":
                    ticket.cancel(REQUEST_OVER if answered else "the client disconnected")
                    return

        async def guarded_send(message):
            nonlocal answered
            if abandoned:
                return
            if message["type"] == "http.response.start":
                started.set()
                message = {**message, "headers": _with_queue_timing(message.get("headers", []),
                                                                    ticket.queue_ms)}
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True
            await send(message)

        token = CURRENT_TICKET.set(ticket)  # copied into the task below and the route's thread
        try:
            task = asyncio.ensure_future(self.app(scope, inbox.get, guarded_send))
        finally:
            CURRENT_TICKET.reset(token)
        listener = asyncio.ensure_future(listen())
        waiter = asyncio.ensure_future(started.wait())
        try:
            await asyncio.wait({task, waiter}, timeout=self.seconds,
                               return_when=asyncio.FIRST_COMPLETED)
            if task.done() or started.is_set():
                return await task
            abandoned = True
            ticket.cancel(ticket.too_long())
            task.add_done_callback(_consume)
            task.cancel()
            log.warning("request timed out after %.1f s: %s %s", self.seconds, scope.get("method"),
                        scope.get("path"))
            await answer(send, 503, ticket.too_long(), retry_after=max(1, round(self.seconds / 4)))
        finally:
            waiter.cancel()
            listener.cancel()
            ticket.cancel(REQUEST_OVER)  # whatever still runs for it stops


def _with_queue_timing(headers, queue_ms: float) -> list:
    """Add ``queue;dur=…`` to a ``Server-Timing`` header that reports ``model;dur=…``."""
    out, added = [], False
    for name, value in headers:
        if name == b"server-timing" and b"model;dur=" in value and not added:
            value = value + f", queue;dur={queue_ms:.1f}".encode("latin-1")
            added = True
        out.append((name, value))
    return out


def _consume(task: asyncio.Task) -> None:
    """Read the abandoned task's outcome so asyncio does not warn that nobody did."""
    if not task.cancelled():
        task.exception()


# -- error answers --------------------------------------------------------------------------------

# Addresses a program reads (JSON, files); every other address is a page a reader opens, and its
# errors are a small HTML page in the reader's language (templates/error.html).
NOT_PAGES = ("/api/", "/static/", "/vendor/", "/healthz", "/openapi.json")


def is_page(path: str) -> bool:
    return not path.startswith(NOT_PAGES)


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
