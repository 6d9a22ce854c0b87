"""Keep every answer well-formed: unhandled errors become a plain 500, slow requests a 503.

Both live *inside* the security-header layer. Starlette answers an unhandled exception in its
outermost ``ServerErrorMiddleware``, which no user middleware wraps, so without this layer a 500
would leave without the Content-Security-Policy and friends.
"""

from __future__ import annotations

import asyncio
import json
import logging

log = logging.getLogger("app")


async def _json(send, status: int, message: str) -> None:
    body = json.dumps({"message": message}).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    })
    await send({"type": "http.response.body", "body": body})


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
            await _json(send, 500, "internal server error")


class RequestTimeout:
    """Answer 503 when a request has not started its response after ``seconds``.

    The model runs in a worker thread, which cannot be interrupted; it finishes in the background
    (bounded by the request limits) and its late answer is dropped. Responses that have started
    (e.g. a slow client downloading plotly.js) are never cut.
    """

    def __init__(self, app, seconds: float):
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, abandoned = asyncio.Event(), False

        async def guarded_send(message):
            if abandoned:
                return
            if message["type"] == "http.response.start":
                started.set()
            await send(message)

        task = asyncio.ensure_future(self.app(scope, receive, guarded_send))
        waiter = asyncio.ensure_future(started.wait())
        try:
            await asyncio.wait({task, waiter}, timeout=self.seconds,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if task.done() or started.is_set():
            return await task
        abandoned = True
        task.add_done_callback(_consume)
        task.cancel()
        log.warning("request timed out after %.1f s: %s %s", self.seconds, scope.get("method"),
                    scope.get("path"))
        await _json(send, 503, f"the model took longer than {self.seconds:g} s; "
                               "try a shorter sentence, a smaller beam or a smaller max_len")


def _consume(task: asyncio.Task) -> None:
    """Read the abandoned task's outcome so asyncio does not warn that nobody did."""
    if not task.cancelled():
        task.exception()
