"""A page's unexpected error is an HTML page too (issue 59, item 5): written without a template
(the template may be what failed), in both languages, with the security headers."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings


def test_a_pages_500_is_html(tiny_checkpoint, tiny_translator, monkeypatch):
    import app.pages.tour as tour

    def explode(*args, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(tour, "render_page", explode)
    app = create_app(Settings(checkpoint=tiny_checkpoint), translator=tiny_translator)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/tour")
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("text/html")
    assert "content-security-policy" in response.headers
    assert "Something went wrong" in response.text and "出错了" in response.text
    assert "secret" not in response.text and "Traceback" not in response.text
