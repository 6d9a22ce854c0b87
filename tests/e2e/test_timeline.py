"""/timeline in headless Chromium against a real server (the tiny checkpoint is the served model;
the snapshots are the committed model/checkpoints/timeline): a typed sentence, the slider scrubbed
from the first snapshot to the last, the translation changing; two side by side with where they
part; the state in the URL and back in history; 390 px without sideways scrolling; screenshots in
both languages at 1440 and 390 px."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest

from model.timeline import FOLDER, MANIFEST
from tests.e2e.conftest import shot

pytestmark = pytest.mark.e2e
NAMES = [e["name"] for e in json.loads((FOLDER / MANIFEST).read_text("utf-8"))["snapshots"]]
TEXT = "Where is the station?"


def wait_shown(page, snapshot: str, vs: str = "") -> None:
    """Until the page has drawn ``snapshot`` (beside ``vs``) for the sentence in the box."""
    page.wait_for_function(
        "([want]) => document.body.dataset.shown === want && !document.body.classList.contains('busy')",
        arg=[f"{snapshot}|{vs}|{TEXT}"])


def query(page) -> dict:
    return parse_qs(urlsplit(page.url).query)


def scrub_to(page, index: int) -> None:
    slider = page.locator("#snapshot-slider")
    slider.focus()
    current = int(slider.input_value())
    for _ in range(abs(index - current)):
        slider.press("ArrowRight" if index > current else "ArrowLeft")


def test_scrubbing_the_timeline_changes_the_translation(page, server):
    page.goto(f"{server}/timeline")
    page.locator("#text").fill(TEXT)
    page.locator("#sentence-form button[type=submit]").click()
    wait_shown(page, NAMES[0])
    first = page.locator("#translation-a").text_content()
    assert page.locator("#probs-a li").count() > 0
    assert page.locator("#attention-a .main-svg").count() > 0
    assert page.locator("#curve-plot .main-svg").count() > 0
    assert "BLEU" in page.locator("#facts-a").text_content()
    seen = {first}
    for index in range(1, len(NAMES)):
        scrub_to(page, index)
        wait_shown(page, NAMES[index])
        assert query(page)["at"] == [NAMES[index]]
        seen.add(page.locator("#translation-a").text_content())
    last = page.locator("#translation-a").text_content()
    assert last != first, (first, last)
    assert len(seen) >= 2
    shot(page, "timeline-scrubbed")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_two_snapshots_side_by_side_and_phones(page, server, lang):
    page.context.add_cookies([{"name": "lang", "value": lang, "url": server}])
    page.goto(f"{server}/timeline?text={TEXT}&at={NAMES[-1]}&vs={NAMES[0]}&layer=0")
    wait_shown(page, NAMES[-1], NAMES[0])
    assert page.locator("#side-b").is_visible()
    assert page.locator("#compare-select").input_value() == NAMES[0]
    assert page.locator("#layer-select").input_value() == "0"
    parting = page.locator("#parting").text_content()
    assert parting.strip()
    assert page.locator("#difference-line").is_visible()
    assert page.locator("#stored-table tbody tr").count() == len(NAMES)
    shot(page, f"timeline-{lang}-1440")
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_function("() => document.documentElement.scrollWidth <= 390")
    shot(page, f"timeline-{lang}-390")
    # the served model beside it
    page.set_viewport_size({"width": 1440, "height": 900})
    page.locator("#compare-select").select_option("shipped")
    wait_shown(page, NAMES[-1], "shipped")
    assert query(page)["vs"] == ["shipped"]
    # its own vocabulary: a difference map where its pieces are the snapshot's, else the reason
    answer = page.request.post(f"{server}/api/timeline/read",
                               data={"text": TEXT, "snapshot": NAMES[-1], "compare": "shipped"})
    comparable = answer.json()["difference"]["comparable"]
    assert page.locator("#difference-line").text_content().strip()
    assert page.locator("#difference-plot").is_visible() == comparable
    page.go_back()
    wait_shown(page, NAMES[-1], NAMES[0])
    assert page.locator("#compare-select").input_value() == NAMES[0]


def test_a_bad_snapshot_in_the_url_falls_back_and_the_api_says_why(page, server):
    page.goto(f"{server}/timeline?text={TEXT}&at=step999999&layer=9")
    wait_shown(page, NAMES[0])
    answer = page.request.post(f"{server}/api/timeline/read",
                               data={"text": TEXT, "snapshot": "step999999"})
    assert answer.status == 422 and "snapshot" in answer.json()["message"]
