"""The x-ray draws the model's own stages (issue 56, item 10): on the shipped checkpoint the rows
on the page are exactly the view header's ``layout``, in its order, each row named by its stage
(the scripts spell none: tests/app/test_xray_layout.py); the player's frames walk the same list."""

from __future__ import annotations

import urllib.request
from urllib.parse import quote

import pytest

from app import xray
from tests.e2e.test_xray import SEED, ready

pytestmark = pytest.mark.e2e


@pytest.fixture()
def server(shipped_server):
    """The app on the shipped checkpoint (one server for the whole run)."""
    return shipped_server


def header_layout(server: str) -> dict:
    request = urllib.request.Request(f"{server}/api/xray/view", data=f'{{"text": "{SEED}"}}'.encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return xray.unpack(response.read())[0]["layout"]


def expected_rows(layout: dict) -> list[tuple[str, str]]:
    """(data-key, data-block) of every row, as the header's layout lists the stages."""
    rows = []
    for side, prefix in (("encoder", "enc"), ("decoder", "dec")):
        rows.append((f"{prefix}-tokens", "tokens"))
        for entry in layout[side]:
            key = (f"{prefix}-{entry['name']}" if entry["layer"] is None
                   else f"{side[0]}-{entry['layer']}-{entry['name']}")
            rows.append((key, entry["name"]))
    rows.append(("dec-chosen", "chosen"))
    return rows


def rows_and_frames_follow_the_header(server: str, page) -> dict:
    """The rows drawn and the player's frames are the header's stages, in order; the layout."""
    layout = header_layout(server)
    page.goto(f"{server}/?text={quote(SEED)}")
    ready(page)
    drawn = page.locator(".xr-row[data-key]").evaluate_all(
        "rows => rows.map(r => [r.dataset.key, r.dataset.block])")
    # in the page's order: the encoder's rows, then the decoder's, each side's stages in turn
    assert [tuple(row) for row in drawn] == expected_rows(layout)
    # every frame of the encoder's phase and of a decoding step is one of its stages, in order
    names = page.evaluate("""() => ITTXray.state.frames.filter((f) => f.t === 0).map((f) => f.name)""")
    assert names == ["tokens"] + [entry["name"] for entry in layout["encoder"]]
    step = page.evaluate("""() => ITTXray.state.frames.filter((f) => f.t === 1).map((f) => f.name)""")
    assert step == [entry["name"] for entry in layout["decoder"]]
    assert page.locator("#error").is_hidden()
    return layout


def test_the_rows_drawn_are_the_headers_stages(server, page):
    layout = rows_and_frames_follow_the_header(server, page)
    assert len(layout["encoder"]) == 1 + 4 * 3 and len(layout["decoder"]) == 1 + 6 * 3 + 1


def test_a_model_with_another_number_of_layers_draws_its_own(marian_server, page):
    """A Marian model of 2 + 2 layers (tests/marian_folder.py): the same scripts draw its layers."""
    layout = rows_and_frames_follow_the_header(marian_server, page)
    assert len(layout["encoder"]) == 1 + 4 * 2 and len(layout["decoder"]) == 1 + 6 * 2 + 1
    assert page.locator(".xr-group").count() == 4
