"""The security headers every answer carries: one list, read by the ``SecurityHeaders``
middleware (app/middleware.py) and by the answers uvicorn writes itself before the app sees a
request (app/cli.py: a malformed request's 400, the 503 beyond ``ITT_MAX_CONNECTIONS``). Kept apart
from the middleware so that the supervisor process imports no torch."""

from __future__ import annotations

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
