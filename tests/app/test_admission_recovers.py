"""A kind of call once measured slower than its time limit (the machine was overloaded) is not
refused for ever: an idle thread's refusals relax the estimate until one runs and is measured
again; and a call stopped at its deadline teaches that it takes at least that long."""

from __future__ import annotations

import time

from app.costs import Costs, kind
from app.engine import Engine
from tests.app.test_admission import serve


def quick() -> None:
    time.sleep(0.05)


def test_a_kind_measured_too_slow_once_is_run_again_on_an_idle_thread(tiny_translator):
    from tests.app import test_admission

    engine = Engine(tiny_translator)
    engine.costs.learn(kind(quick, ()), 100.0)  # measured while the machine was overloaded
    test_admission.ROUTES["/quick"] = [quick]
    try:
        statuses = [serve(engine, "/quick", timeout_s=4.0)["status"] for _ in range(20)]
    finally:
        del test_admission.ROUTES["/quick"]
    assert statuses[0] == "shed", statuses  # still refused at first: the thread believes 100 s
    first = statuses.index("served")  # then tried again, measured, and served from then on
    assert first < 15 and set(statuses[first:]) == {"served"}, statuses


def test_a_call_stopped_at_its_deadline_is_learnt_as_a_lower_bound():
    costs = Costs()
    slow = ("race", 0)
    costs.learn(slow, 2.0)
    costs.at_least(slow, 0.1)  # its client left early: says nothing
    assert costs.estimate(slow).mean == 2.0
    costs.at_least(slow, 20.0)  # stopped at a 20 s deadline: it takes at least that
    assert costs.estimate(slow).mean > 2.0
    costs.at_least(("never measured", 0), 20.0)
    assert ("never measured", 0) not in costs.calls
