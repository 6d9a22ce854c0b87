"""Security layers as plain ASGI middleware: response headers and a request-body size limit."""

from __future__ import annotations

import json

# No third-party origin anywhere, and no inline script: every script is a file under /static.
# style-src needs 'unsafe-inline' because plotly.js sets style attributes and injects a <style>
# element while drawing; styles cannot run code, so this does not reopen script injection.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])
HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
]


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
    """Answer 413 to a body over ``max_bytes``, whether or not it declares Content-Length."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

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
            return await _too_large(send, self.max_bytes)
        if scope["method"] in ("GET", "HEAD", "OPTIONS") and declared is None:
            return await self.app(scope, receive, send)
        # Read the (small) body up front so a lying or missing Content-Length cannot slip past.
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return await _too_large(send, self.max_bytes)
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


async def _too_large(send, limit: int) -> None:
    body = json.dumps({"message": f"body: request bodies are limited to {limit} bytes"}).encode()
    await send({
        "type": "http.response.start",
        "status": 413,
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    })
    await send({"type": "http.response.body", "body": body})
