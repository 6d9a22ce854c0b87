"""/tour: every stop in order, carrying the sentence."""

from __future__ import annotations

from app.i18n import strings
from app.pages.tour import TOUR


def test_tour_steps_carry_the_sentence(app_client):
    html = app_client.get("/tour", params={"step": 3, "text": "I like green tea."}).text
    assert 'href="/tour?step=2&amp;text=I%20like%20green%20tea."' in html
    assert 'href="/tour?step=4&amp;text=I%20like%20green%20tea."' in html
    assert 'href="/embeddings?text=I%20like%20green%20tea."' in html
    assert 'class="stage current" data-stage="embedding"' in html
    first = app_client.get("/tour").text
    assert 'id="tour-back"' not in first and 'id="tour-next"' in first
    last = app_client.get("/tour", params={"step": 999}).text
    assert 'id="tour-next"' not in last and 'id="tour-back"' in last
    assert app_client.get("/tour", params={"step": "abc"}).status_code == 200


def test_tour_visits_every_page_in_order():
    assert [path for path, _, _ in TOUR] == [
        "/", "/pipeline", "/tokens", "/embeddings", "/attention", "/coreference", "/training", "/timeline",
        "/decode",
        "/kv-cache", "/scale"]
    for _, _, key in TOUR:
        for lang in ("en", "zh"):
            assert {f"{key}.title", f"{key}.text"} <= set(strings(lang, "tour"))
