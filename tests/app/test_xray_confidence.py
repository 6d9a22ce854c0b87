"""The x-ray's comparison (the other decoding, /api/xray/compare) carries the model's probability
for each character it wrote (issue 56, item 6), the numbers static/js/xray/result.js marks the
unsure characters with."""

from __future__ import annotations

import math

from app import xray

TEXT = "The cat sits on the mat."


def test_the_other_decoding_carries_each_steps_token_and_probability(app_client):
    for body in ({"text": TEXT}, {"text": TEXT, "strategy": "beam", "beam_size": 4}):
        header, _ = xray.unpack(app_client.post("/api/xray/view", json=body).content)
        other = app_client.post("/api/xray/compare", json=body).json()
        assert len(other["tokens"]) == len(other["probs"]) >= 1
        assert all(0 < p <= 1 for p in other["probs"])
        # one step per character written, the special tokens written as nothing
        written = [token for token in other["tokens"] if token not in ("<eos>", "<unk>")]
        assert len(written) == len(other["translation"])
        # the player's own steps carry theirs as before
        assert all(0 < step["prob"] <= 1 for step in header["steps"])


def test_the_probabilities_are_the_models_own(app_client):
    """The same numbers /api/translate gives for that decoding: its steps' probabilities."""
    other = app_client.post("/api/xray/compare", json={"text": TEXT}).json()
    steps = app_client.post("/api/translate", json={"text": TEXT, "strategy": "beam",
                                                    "beam_size": 4}).json()["steps"]
    assert other["probs"] == [round(step["prob"], 4) for step in steps]
    # what the page judges by: the characters the model expects to differ, and their mean
    expected = sum(1 - p for p in other["probs"])
    assert 0 <= expected <= len(steps)
    assert math.isfinite(sum(math.log(p) for p in other["probs"]))
