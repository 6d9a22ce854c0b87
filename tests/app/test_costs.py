"""app/costs.py: what an unmeasured kind of call is expected to take, guessed from its
function's measured kinds."""

from __future__ import annotations

import pytest

from app.costs import Costs


def test_a_larger_integer_argument_scales_the_guess_up_to_the_functions_own_ceiling():
    """The server times one 32-step KV-cache race at start-up; a 128-step race of three runs is
    guessed at 4 × 3 times it (it was guessed at the one race's time, admitted by the dozen and
    refused once measured), and never past the most the function says it can take."""
    costs = Costs()
    costs.priors["race_runs"] = 9.0
    costs.learn(("race_runs", 32, 1, 64), 0.2)
    assert costs.estimate(("race_runs", 64, 1, 64)).mean == pytest.approx(0.4)
    assert costs.estimate(("race_runs", 128, 3, 64)).mean == pytest.approx(2.4)
    assert costs.estimate(("race_runs", 128, 3, 256)).mean == pytest.approx(9.0)  # ×48: the ceiling
    assert costs.estimate(("race_runs", 16, 1, 64)).mean == pytest.approx(0.2)  # never scaled down


def test_a_measured_kind_is_its_measurement():
    costs = Costs()
    costs.priors["race_runs"] = 9.0
    costs.learn(("race_runs", 128, 3, 256), 12.0)  # slower than the prior: measured wins
    assert costs.estimate(("race_runs", 128, 3, 256)).mean == 12.0
    assert costs.estimate(("interpret", 64, 128)).mean == 1.0  # never measured: the default prior


def test_integers_of_a_function_without_a_ceiling_say_nothing_of_its_cost():
    """A seed, a layer or a head is an integer too: a word-order test with seed 2**31 is not
    2**31 times one with seed 1 (it was, and was refused for 6,804 s)."""
    costs = Costs()
    costs.learn(("word_order", 1, 32), 2.0)
    assert costs.estimate(("word_order", 2**31, 32)).mean == 2.0


def test_an_idle_refusal_of_a_scaled_guess_relaxes_the_neighbour_it_was_scaled_from():
    """A 64-step race guessed at twice the 32-step one measured at a busy start-up (3 s): refused
    on an idle thread with 5.4 s, it was refused for ever (the 32-step mean was under 5.4 s, so
    nothing was lowered: 12 retries at their appointment refused with two CPU burners running)."""
    costs = Costs()
    costs.priors["race_runs"] = 9.0
    costs.learn(("race_runs", 32, 1, 64), 3.0)
    assert costs.estimate(("race_runs", 64, 1, 64)).mean == pytest.approx(6.0)
    costs.relax(("race_runs", 64, 1, 64), 5.4)
    assert costs.estimate(("race_runs", 64, 1, 64)).mean == pytest.approx(4.5)
    costs.relax(("race_runs", 64, 1, 64), 5.4)  # fits now: nothing more is taken off
    assert costs.estimate(("race_runs", 64, 1, 64)).mean == pytest.approx(4.5)
