"""Every layer a request passes before and after its route, as plain ASGI middleware. From the
outside in:

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

Expected errors (422, 404, 503 + Retry-After …) are answered by the exception handlers of
``app/errors.py``, which ``install`` adds too; the layers here answer in the same shape.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import time
from datetime import UTC, datetime

from fastapi import FastAPI
from fastapi.middleware.gzip import GZipMiddleware

from app import errors
from app.errors import SERVER_ERROR_PAGE, answer, error_body, is_page
from app.security import HEADERS
from app.settings import Settings
from app.tickets import CURRENT_TICKET, REQUEST_OVER, Ticket

log = logging.getLogger("app")
ACCESS_LOGGER = "app.access"
MODEL_TIMING = re.compile(r"(?:^|,)\s*model;dur=([0-9.]+)")
QUEUE_TIMING = re.compile(r"(?:^|,)\s*queue;dur=([0-9.]+)")


def install(app: FastAPI, settings: Settings) -> None:
    """Add the error handlers and the middleware stack (innermost first)."""
    errors.install(app)
    app.add_middleware(HeadAsGet)
    # Errors and time-outs become answers that still get gzip and the headers.
    app.add_middleware(ServerErrors)
    app.add_middleware(RequestTimeout, seconds=settings.request_timeout_s)
    # Level 1: a 10-word trace (280 KB of JSON) becomes 105 KB in 2.3 ms; level 4 gives 95 KB in
    # 4.1 ms, level 6 87 KB in 17 ms. On a classroom network the time matters more than 10 KB.
    app.add_middleware(GZipMiddleware, minimum_size=1024, compresslevel=1)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes,
                       read_timeout_s=settings.body_read_timeout_s)
    app.add_middleware(SameOrigin)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(AccessLog, enabled=settings.access_log)


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


class SameOrigin:
    """The model runs only for the page's own origin: a request to ``/api/`` that a browser marks
    as sent from another site (``Sec-Fetch-Site: cross-site`` or ``same-site``), or whose
    ``Origin`` is not this server's own address (``Host``), gets 403 in the one error shape before
    anything is read or computed. A plain client (curl, a script) sends neither header and is
    served; so is a browser on the page itself (``same-origin``) or typing the address (``none``)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith("/api/"):
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers", []))
        site = headers.get(b"sec-fetch-site", b"").decode("latin-1").strip().lower()
        origin = headers.get(b"origin")
        if site in ("cross-site", "same-site") or (origin is not None
                                                   and not _own_origin(origin, headers)):
            return await answer(send, 403, "the model answers only the pages of this server; "
                                           "open the page here instead of from another site",
                                field="origin")
        return await self.app(scope, receive, send)


def _own_origin(origin: bytes, headers: dict) -> bool:
    """Whether ``Origin`` (``scheme://host[:port]``) names the host the request was sent to. The
    ports are not compared: a proxy may pass ``Host`` without its port (nginx's ``$host``), and a
    page on another port of the same host is ``Sec-Fetch-Site: same-site``, refused above."""
    host = headers.get(b"host", b"").decode("latin-1").strip().lower()
    scheme, _, rest = origin.decode("latin-1").strip().lower().partition("://")
    if scheme not in ("http", "https") or not rest or not host:
        return False  # "null" (a sandboxed frame, a file) or anything malformed
    return _hostname(rest) == _hostname(host)


def _hostname(authority: str) -> str:
    """``host`` of ``host[:port]`` (``[::1]:8000`` → ``[::1]``)."""
    if authority.startswith("["):
        return authority.split("]", 1)[0] + "]"
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


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
