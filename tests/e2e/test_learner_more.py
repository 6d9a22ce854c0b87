"""Issue 11, the rest of it: the beam search as a lineage tree, the FFN box and the encoder's
sublayers, the KV cache's timings and real K/V rows, fewer Tab presses on /decode, and the ideas
from the articles (RNN vs attention, residual connections) drawn from the live model."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import shot

pytestmark = pytest.mark.e2e
CAT = "text=The+cat+sits+on+the+mat."


def wait_idle(page) -> None:
    page.wait_for_load_state("networkidle")
    page.locator("body.busy").wait_for(state="detached")


def test_beam_tree_is_a_lineage_tree_with_scores_and_ranked_endings(page, server):
    page.goto(f"{server}/decode?{CAT}&strategy=beam&max_len=12")
    wait_idle(page)
    figure = page.evaluate("""() => {
        const node = document.getElementById('beam-tree');
        return node.data.map((d) => ({mode: d.mode, name: d.name || '', text: d.text || [],
                                      x: d.x, y: d.y, showlegend: d.showlegend}));
    }""")
    points = [d for d in figure if "markers" in d["mode"]]
    # every node carries its cumulative log-probability as a number
    labels = [t for d in points for t in d["text"]]
    assert labels and all(t.rsplit(" ", 1)[-1].lstrip("-").replace(".", "").isdigit() for t in labels)
    # every kind of node beyond the plain "kept" ones is named in the legend
    assert all(d["name"] for d in points if d["showlegend"])
    # the ended hypotheses, ranked by their length-penalised score, the winner marked
    rows = page.locator("#beam-ended tbody tr")
    assert rows.count() >= 1
    assert "winner" in (rows.first.get_attribute("class") or "")
    scores = [float(rows.nth(i).locator("td").nth(4).text_content()) for i in range(rows.count())]
    assert scores == sorted(scores, reverse=True)
    assert page.locator("#beam-stop").text_content().strip()
    shot(page, "decode-beam-lineage")
