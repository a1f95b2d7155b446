"""A worker's timing and the order of its bindings (jobloom.engine.pacing)."""

from __future__ import annotations

from jobloom.engine.pacing import TIMER_LEAD, TOKEN_EARLY, TOKEN_LEAD_CAP, Pacing, Rotation


def test_the_order_turns_from_cycle_to_cycle() -> None:
    rotation = Rotation(["a", "b", "c"])
    assert [rotation.next() for _ in range(4)] == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]


def test_a_contended_binding_comes_first_once() -> None:
    rotation = Rotation(["a", "b", "c"])
    assert rotation.next() == ["a", "b", "c"]
    rotation.contended(["c", "gone"])  # a binding the worker does not serve is ignored
    assert rotation.next() == ["c", "b", "a"]
    assert rotation.next() == ["c", "a", "b"]  # the turn goes on


def test_a_late_decision_moves_the_wake_up_earlier_within_its_cap() -> None:
    pacing = Pacing()
    assert pacing.wake_at(10.0, None) == 10.0 - TIMER_LEAD
    assert pacing.wake_at(None, 5.0) == 5.0 - TIMER_LEAD
    pacing.slept(5.0 - TIMER_LEAD, 5.0)
    pacing.cycle_done(pacing.take_aim(), 5.004, took=0.003)  # decided 4 ms after the token
    assert pacing.lead > TIMER_LEAD
    assert pacing.take_aim() is None  # an aim is used once
    for _ in range(50):
        pacing.cycle_done(5.0, 5.5, took=1.0)
    assert pacing.lead == TOKEN_LEAD_CAP and pacing.cycle_time <= TOKEN_LEAD_CAP


def test_a_dispatch_waits_for_a_token_due_within_a_cycle() -> None:
    pacing = Pacing()
    for _ in range(40):
        pacing.cycle_done(None, None, took=0.006)
    assert abs(pacing.token_wait() - (0.006 + TOKEN_EARLY)) < 1e-4
    pacing.slept(7.0, None)  # woken for something else: no aim
    assert pacing.take_aim() is None
