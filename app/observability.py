"""Structured access logs and the ``Server-Timing`` header, as plain ASGI middleware.

Every request leaves one JSON line on the ``app.access`` logger::

    {"ts": "2026-11-29T09:41:07.123Z", "method": "POST", "path": "/api/trace", "status": 200,
     "duration_ms": 61.4, "model_ms": 55.2, "bytes": 48213, "client": "127.0.0.1"}

``model_ms`` is read from the ``model;dur=…`` entry the JSON API puts in ``Server-Timing`` (0 when the
trace came from the cache, absent for requests that never touch the model). This middleware adds
``app;dur=…`` — the time the server spent before it started answering — to every response, so
browser dev tools show both numbers side by side.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from datetime import UTC, datetime

ACCESS_LOGGER = "app.access"
MODEL_TIMING = re.compile(r"(?:^|,)\s*model;dur=([0-9.]+)")


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
        status, model_ms, sent = 500, None, 0

        async def timed_send(message):
            nonlocal status, model_ms, sent
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                app_ms = (time.perf_counter() - started) * 1000
                timing = [value.decode("latin-1") for name, value in headers if name == b"server-timing"]
                match = MODEL_TIMING.search(", ".join(timing))
                if match:
                    model_ms = float(match.group(1))
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
                self.log.info(json.dumps(self.entry(scope, status, started, model_ms, sent)))

    @staticmethod
    def entry(scope, status: int, started: float, model_ms: float | None, sent: int) -> dict:
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
        entry["bytes"] = sent
        if client:
            entry["client"] = client[0]
        return entry
