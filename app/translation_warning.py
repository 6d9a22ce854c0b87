""""Check this translation" (issue 75, item 6): the x-ray's warning, its signals, and its
calibration on held-out pairs with references.

The warning reads the model's own numbers for the translation it wrote (static/js/xray/result.js
computes the same from the trace's steps):

* ``expected`` — Σ(1 − p) over the steps the model chose (every step but a forced one, its <eos>
  included): how many of its tokens the model itself expects could have come out differently;
* ``mean`` — the geometric mean of those p;
* ``unknown`` — how many source pieces it could not read (<unk>).

It warns "far" when ``mean`` is below ``mean_below`` or ``unknown`` above 0, "unsure" when
``expected`` reaches ``expected_at`` (None: never), else says nothing. The thresholds are chosen by
``bench/warning_calibration.py`` on the held-out dev pairs of the checkpoint's own splits, each
translated greedily and scored with sentence chrF against its reference; the result,
model/explain/warning_calibration.json, is tied to the sha256 of the weights it measured, and the
page quotes it only for those weights (``calibration_for``).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

CALIBRATION_FILE = Path(__file__).resolve().parents[1] / "model" / "explain" / "warning_calibration.json"
SPECIAL = {"<pad>", "<bos>", "<eos>", "<unk>"}


def signals(steps: list[dict], source_tokens: list[str]) -> dict:
    """The warning's numbers for one decoding: ``steps`` are {prob, forced} (a forced token was the
    learner's choice, not the model's, so it counts for nothing). As result.js's ``confidence``."""
    chosen = [step for step in steps if not step.get("forced")]
    expected = sum(1 - step["prob"] for step in chosen)
    mean_log = sum(math.log(max(step["prob"], 1e-30)) for step in chosen)
    mean = math.exp(mean_log / len(chosen)) if chosen else 1.0
    return {"expected": expected, "mean": mean, "steps": len(chosen),
            "unknown": sum(1 for token in source_tokens if token == "<unk>")}


def level(signal: dict, expected_at: float | None, mean_below: float) -> str:
    """far | unsure | sure: what the page shows for these numbers at these thresholds
    (``expected_at`` None: Σ(1 − p) is not tested)."""
    if signal["mean"] < mean_below or signal["unknown"] > 0:
        return "far"
    return "unsure" if expected_at is not None and signal["expected"] >= expected_at else "sure"


def roc_auc(scores: list[float], bad: list[bool]) -> float | None:
    """The area under the ROC curve of ``scores`` (higher: more likely bad) against ``bad``: the
    chance that a bad item scores above a good one, ties counting half (Mann–Whitney). None when
    either class is empty."""
    positives = [s for s, b in zip(scores, bad, strict=True) if b]
    negatives = [s for s, b in zip(scores, bad, strict=True) if not b]
    if not positives or not negatives:
        return None
    # ranks with ties averaged: the U statistic in O(n log n)
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    rank_sum = sum(r for r, b in zip(ranks, bad, strict=True) if b)
    u = rank_sum - len(positives) * (len(positives) + 1) / 2
    return u / (len(positives) * len(negatives))


def rule_figures(rows: list[dict], bad: list[bool], expected_at: float | None,
                 mean_below: float) -> dict:
    """How the rule does at these thresholds: how many it warns on, how many of those are bad
    (precision), how many of the bad it warns on (recall), and the share it warns on."""
    warned = [level(row, expected_at, mean_below) != "sure" for row in rows]
    hits = sum(1 for w, b in zip(warned, bad, strict=True) if w and b)
    n_warned, n_bad = sum(warned), sum(bad)
    return {
        "expected_at": expected_at, "mean_below": mean_below,
        "warned": n_warned, "warned_bad": hits,
        "precision": round(hits / n_warned, 4) if n_warned else None,
        "recall": round(hits / n_bad, 4) if n_bad else None,
        "warn_rate": round(n_warned / len(rows), 4) if rows else None,
        # a yes/no rule's area under the curve: the mean of its two hit rates
        "auc": round((hits / n_bad + (len(rows) - n_warned - (n_bad - hits)) / (len(rows) - n_bad)) / 2, 4)
        if n_bad and len(rows) > n_bad else None,
    }


def choose(rows: list[dict], bad: list[bool], expected_grid: list[float | None],
           mean_grid: list[float]) -> dict:
    """The thresholds the page uses: of every pair on the grids (``expected_at`` None turns the
    Σ(1 − p) test off, ``mean_below`` 0 the geometric mean's), the one that best tells poor from
    good: the highest mean of its two hit rates (the share of poor translations it warns on and
    the share of good ones it leaves alone; Youden's index, shifted), then the fewest warnings,
    then the lower ``mean_below`` and the higher ``expected_at``. Returns the pair's figures."""
    tried = [rule_figures(rows, bad, e, m) for e in expected_grid for m in mean_grid]
    return max((f for f in tried if f["auc"] is not None),
               key=lambda f: (f["auc"], -f["warned"], -f["mean_below"],
                              math.inf if f["expected_at"] is None else f["expected_at"]))


def lowest_share_cut(values: list[float], share: float) -> float:
    """The value below which ``share`` of ``values`` lie (the lower quartile for 0.25)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


# -- what the page reads ---------------------------------------------------------------------------


@lru_cache(maxsize=4)
def _fingerprint(folder: str) -> str | None:
    from app.pages.coreference import weights_fingerprint
    return weights_fingerprint(Path(folder))


def calibration_for(translator) -> dict | None:
    """The stored calibration when it was measured on this translator's weights, else None."""
    if not CALIBRATION_FILE.is_file():
        return None
    stored = json.loads(CALIBRATION_FILE.read_text(encoding="utf-8"))
    folder = getattr(translator, "path", None)
    if folder is None or _fingerprint(str(folder)) != stored.get("weights_sha256"):
        return None
    return stored


def page_rule(translator) -> dict:
    """What the x-ray's script needs: the thresholds and the measured meaning of a warning, or
    ``calibrated: false`` (the page then says so and shows the model's numbers without a verdict)."""
    stored = calibration_for(translator)
    if stored is None:
        return {"calibrated": False}
    chosen = stored["chosen"]
    return {
        "calibrated": True,
        "expected_at": chosen["expected_at"], "mean_below": chosen["mean_below"],
        "pairs": stored["pairs"], "bad_below": stored["bad_below"],
        "warned": chosen["warned"], "warned_bad": chosen["warned_bad"],
        "precision": chosen["precision"], "recall": chosen["recall"],
        "warn_rate": chosen["warn_rate"], "bad": stored["bad"],
        "quiet_bad_share": stored["quiet_bad_share"],
    }
