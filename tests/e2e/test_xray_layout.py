"""The x-ray draws the model's own stages (issue 56, item 10): on the shipped checkpoint the rows
on the page are exactly the view header's ``layout``, in its order, each row named by its stage
(the scripts spell none: tests/app/test_xray_layout.py); the player's frames walk the same list."""

from __future__ import annotations

import urllib.request
from urllib.parse import quote

import pytest

from app import xray
from tests.e2e.conftest import running_server
from tests.e2e.test_xray import SEED, ready

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server():
    with running_server(None, "xray-layout-server.log") as url:
        yield url


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


def test_the_rows_drawn_are_the_headers_stages(server, page):
    layout = header_layout(server)
    assert len(layout["encoder"]) == 1 + 4 * 3 and len(layout["decoder"]) == 1 + 6 * 3 + 1
    page.goto(f"{server}/?text={quote(SEED)}")
    ready(page)
    drawn = page.locator(".xr-row[data-key]").evaluate_all(
        "rows => rows.map(r => [r.dataset.key, r.dataset.block])")
    assert sorted(map(tuple, drawn)) == sorted(expected_rows(layout))
    # in the page's order: the encoder's rows, then the decoder's, each side's stages in turn
    order = [key for key, _ in expected_rows(layout)]
    assert [key for key, _ in drawn] == order
    # every frame of the encoder's phase is one of its stages, in the layout's order
    names = page.evaluate("""() => ITTXray.state.frames.filter((f) => f.t === 0).map((f) => f.name)""")
    assert names == ["tokens"] + [entry["name"] for entry in layout["encoder"]]
    step = page.evaluate("""() => ITTXray.state.frames.filter((f) => f.t === 1).map((f) => f.name)""")
    assert step == [entry["name"] for entry in layout["decoder"]]
