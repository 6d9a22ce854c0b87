"""The x-ray's "check this translation" warning (issue 75, item 6): the AUC and threshold code on
data made here, the committed calibration reproduced from its own rows, the signals computed as
the page computes them, and the thresholds reaching the page only for the weights measured."""

from __future__ import annotations

import json
import math

import pytest

from app.pages.coreference import weights_fingerprint
from app.translation_warning import (
    CALIBRATION_FILE,
    calibration_for,
    choose,
    level,
    lowest_share_cut,
    page_rule,
    roc_auc,
    rule_figures,
    signals,
)
from bench.warning_calibration import EXPECTED_GRID, MEAN_GRID, calibrate, expand
from model.translator import DEFAULT_CHECKPOINT


def test_auc_is_the_chance_a_bad_item_scores_above_a_good_one():
    assert roc_auc([1, 2, 3, 4], [False, False, True, True]) == 1.0
    assert roc_auc([4, 3, 2, 1], [False, False, True, True]) == 0.0
    assert roc_auc([5, 5, 5, 5], [True, False, True, False]) == 0.5  # ties count half
    # bad at 3 and 1, good at 2 and 0: of the 4 (bad, good) pairs, 3 have the bad one higher
    assert roc_auc([3, 2, 1, 0], [True, False, True, False]) == 0.75
    # a tie between a bad and a good item: half a pair
    assert roc_auc([2, 2, 1], [True, False, False]) == pytest.approx((1 + 0.5) / 2)
    assert roc_auc([1, 2], [True, True]) is None


def row(expected: float, mean: float, unknown: int = 0) -> dict:
    return {"expected": expected, "mean": mean, "unknown": unknown, "steps": 10}


def test_the_rule_and_its_figures():
    assert level(row(1.0, 0.9), 2.0, 0.6) == "sure"
    assert level(row(2.0, 0.9), 2.0, 0.6) == "unsure"  # at the threshold: warned
    assert level(row(1.0, 0.59), 2.0, 0.6) == "far"
    assert level(row(1.0, 0.9, unknown=1), 2.0, 0.6) == "far"
    rows = [row(3, 0.9), row(3, 0.9), row(1, 0.5), row(1, 0.9), row(1, 0.9)]
    bad = [True, False, True, True, False]
    figures = rule_figures(rows, bad, 2.0, 0.6)  # warns on the first three: two of them bad
    assert (figures["warned"], figures["warned_bad"]) == (3, 2)
    assert figures["precision"] == round(2 / 3, 4) and figures["recall"] == round(2 / 3, 4)
    assert figures["warn_rate"] == 0.6
    assert figures["auc"] == round((2 / 3 + 1 / 2) / 2, 4)  # its hit rates on bad and on good


def test_choose_takes_the_thresholds_that_best_tell_bad_from_good():
    # bad translations expect 3–5 characters to differ, good ones 0.5–2.5; one good one at 4
    rows = [row(e, 0.9) for e in (3, 4, 5, 3.5)] + [row(e, 0.9) for e in (0.5, 1, 2, 2.5, 4)]
    bad = [True] * 4 + [False] * 5
    chosen = choose(rows, bad, [1.0, 2.0, 3.0, 4.0, 5.0, None], [0.0, 0.5])
    # 3.0: every bad one warned, 4 of the 5 good left alone: (1 + 0.8) / 2; 2.0 leaves 2 of 5
    # alone (0.7), 4.0 finds 2 of 4 (0.65), None none (0.5); mean_below 0 and 0.5 warn alike
    assert (chosen["expected_at"], chosen["mean_below"]) == (3.0, 0.0)
    assert (chosen["warned"], chosen["warned_bad"], chosen["precision"], chosen["auc"]) == (5, 4, 0.8, 0.9)
    # the geometric mean alone separates them: Σ(1 − p) off, the lowest mean_below that does
    rows = [row(1, m) for m in (0.3, 0.4, 0.5)] + [row(e, 0.9) for e in (1, 5)]
    chosen = choose(rows, [True, True, True, False, False], [1.0, 2.0, None], [0.0, 0.55, 0.6])
    assert (chosen["expected_at"], chosen["mean_below"], chosen["auc"]) == (None, 0.55, 1.0)
    assert lowest_share_cut([5, 1, 3, 2, 4, 6, 7, 8], 0.25) == 3


def test_calibrate_on_made_up_rows():
    """bench.warning_calibration.calibrate on rows made here: poor below the cut, the AUCs of its
    signals, the thresholds chosen."""
    rows = ([{"source": "a", "chrf": 10.0, **row(4.0 + i / 10, 0.5 + i / 100)} for i in range(6)]
            + [{"source": "b", "chrf": 60.0, **row(0.5 + i / 10, 0.9)} for i in range(12)]
            + [{"source": "b", "chrf": 50.0, **row(4.5, 0.9)}])
    result = calibrate(rows, bad_below=25.0)
    assert (result["pairs"], result["bad"]) == (19, 6)
    # every poor one above the 12 low good ones; against the good 4.5, one tie (4.5): half a pair
    assert result["auc"]["expected"] == round((6 * 12 + 0.5) / (6 * 13), 4)
    assert result["auc"]["one_minus_mean"] == 1.0  # every poor one less sure on the whole
    chosen = result["chosen"]  # the mean (0.5–0.55 poor, 0.9 good) tells them apart exactly
    assert (chosen["expected_at"], chosen["mean_below"]) == (None, 0.6)
    assert (chosen["warned"], chosen["warned_bad"], chosen["precision"], chosen["recall"]) == (6, 6, 1.0, 1.0)
    assert result["quiet_bad_share"] == 0.0


@pytest.fixture(scope="module")
def stored() -> dict:
    assert CALIBRATION_FILE.is_file(), "run python -m bench.warning_calibration --write"
    return json.loads(CALIBRATION_FILE.read_text(encoding="utf-8"))


def test_the_committed_calibration_is_reproduced_from_its_rows(stored):
    """The thresholds and figures the page quotes follow from the pairs' own figures, by the
    script's code (the rows were measured on the held-out pairs; the data folder stays out)."""
    rows = [expand(values) for values in stored["rows"]]
    assert len(rows) == stored["pairs"] >= 500
    again = calibrate(rows, stored["bad_below"])
    for key in ("bad", "auc", "chosen", "quiet_bad_share", "hand_set_rule", "lowest_quartile_chrf"):
        assert again[key] == stored[key], key
    assert stored["chosen"]["expected_at"] in EXPECTED_GRID and stored["chosen"]["mean_below"] in MEAN_GRID


def test_the_calibration_was_measured_on_the_shipped_weights(stored, shipped_translator):
    assert stored["weights_sha256"] == weights_fingerprint(DEFAULT_CHECKPOINT)
    rule = page_rule(shipped_translator)
    assert rule["calibrated"] is True
    assert (rule["expected_at"], rule["mean_below"]) == (stored["chosen"]["expected_at"],
                                                         stored["chosen"]["mean_below"])
    assert rule["precision"] == stored["chosen"]["precision"]


def test_other_weights_get_no_thresholds(tiny_translator):
    assert calibration_for(tiny_translator) is None
    assert page_rule(tiny_translator) == {"calibrated": False}


def test_the_signals_are_the_pages_numbers(shipped_translator):
    """Σ(1 − p) over every chosen step, <eos> included, and their geometric mean, from the
    translation's own steps (static/js/xray/result.js reads the same steps)."""
    translation = shipped_translator.translate("The cat sat on the mat.")
    steps = [{"prob": s.prob, "forced": s.forced} for s in translation.steps]
    got = signals(steps, translation.source_tokens)
    assert got["steps"] == len(translation.steps) == len(translation.target_tokens) + 1  # <eos>
    assert got["expected"] == pytest.approx(sum(1 - s.prob for s in translation.steps))
    assert got["mean"] == pytest.approx(math.exp(sum(math.log(s.prob) for s in translation.steps)
                                                 / len(translation.steps)))
    assert got["unknown"] == 0
    forced = signals([{"prob": 0.01, "forced": True}, {"prob": 0.5, "forced": False}], ["<unk>"])
    assert (forced["expected"], forced["mean"], forced["steps"], forced["unknown"]) == (0.5, 0.5, 1, 1)
