"""The retry policy (reports and the reaper): what each attempt outcome does to its job."""

from __future__ import annotations

import random
from typing import Any

import pytest

from jobloom.core import lifecycle
from jobloom.core.lifecycle import (
    CANCELLED,
    FAILED,
    LOST,
    OUTCOMES,
    PERMANENT,
    RETRY,
    SUCCEEDED,
    TIMEOUT,
    Transition,
    next_state,
)
from jobloom.core.options import Backoff

NOW = 50_000.0
# 10 s, 20 s, 40 s, ... with no jitter, so every scheduled time is exact
STEADY = Backoff.exponential(base=10.0, factor=2.0, max=1000.0, jitter="none")


def step(outcome: str, **overrides: Any) -> Transition:
    args: dict[str, Any] = {
        "now": NOW,
        "attempt": 1,
        "retries_from": 0,
        "max_attempts": 3,
        "delivery": "at_least_once",
        "cancel_requested": False,
        "backoff": STEADY,
        "retry_after": None,
        "rng": None,
    }
    args.update(overrides)
    return next_state(outcome, **args)


def test_the_outcome_kinds() -> None:
    assert frozenset({SUCCEEDED, FAILED, TIMEOUT, RETRY, PERMANENT, CANCELLED, LOST, lifecycle.SUSPENDED,
                      lifecycle.SNOOZED, lifecycle.SKIPPED}) == OUTCOMES
    assert lifecycle.FAILED == "failed"


def test_a_skipped_node_ends_skipped_unless_cancelled() -> None:
    for delivery in ("at_least_once", "at_most_once"):
        for cancel, state in ((False, "skipped"), (True, "cancelled")):
            nxt = next_state(lifecycle.SKIPPED, now=NOW, attempt=1, retries_from=0, max_attempts=3, delivery=delivery,
                             cancel_requested=cancel, backoff=Backoff.fixed(1))
            assert nxt == lifecycle.Transition(state)


def _snoozed(snoozes: int, **kw: object) -> lifecycle.Transition:
    return next_state(lifecycle.SNOOZED, now=NOW, attempt=3, retries_from=0, max_attempts=3, delivery="at_most_once",
                      cancel_requested=bool(kw.get("cancel", False)), backoff=Backoff.fixed(1), retry_after=30,
                      snoozes=snoozes, max_snoozes=2)


def test_a_snooze_is_scheduled_whatever_the_attempts_until_max_snoozes() -> None:
    assert _snoozed(0) == lifecycle.Transition("scheduled", NOW + 30)  # attempts spent, at most once: still
    assert _snoozed(1) == lifecycle.Transition("scheduled", NOW + 30)
    assert _snoozed(2) == lifecycle.Transition("failed")
    assert _snoozed(0, cancel=True) == lifecycle.Transition("cancelled")


# ---------------------------------------------------------------- success


@pytest.mark.parametrize("delivery", ["at_least_once", "at_most_once"])
@pytest.mark.parametrize("attempt", [1, 3])
def test_success_succeeds(delivery: str, attempt: int) -> None:
    assert step(SUCCEEDED, attempt=attempt, delivery=delivery) == Transition("succeeded", None)


def test_success_that_beat_a_cancel_request_is_still_a_success() -> None:
    assert step(SUCCEEDED, cancel_requested=True) == Transition("succeeded", None)


# ---------------------------------------------------------------- exceptions and timeouts


@pytest.mark.parametrize("outcome", [FAILED, TIMEOUT])
def test_failure_with_attempts_left_is_scheduled_after_the_backoff(outcome: str) -> None:
    assert step(outcome, attempt=1) == Transition("scheduled", NOW + 10.0)
    assert step(outcome, attempt=2) == Transition("scheduled", NOW + 20.0)


@pytest.mark.parametrize("outcome", [FAILED, TIMEOUT])
def test_failure_on_the_last_attempt_fails(outcome: str) -> None:
    assert step(outcome, attempt=3, max_attempts=3) == Transition("failed", None)
    assert step(outcome, attempt=1, max_attempts=1) == Transition("failed", None)


def test_the_backoff_gets_the_random_source() -> None:
    jittered = Backoff.exponential(base=8.0, factor=2.0, jitter="equal")
    got = step(FAILED, attempt=2, backoff=jittered, rng=random.Random(99))
    expected = jittered.delay(2, random.Random(99))
    assert got.state == "scheduled"
    assert got.run_at == pytest.approx(NOW + expected)
    assert NOW + 8.0 <= got.run_at <= NOW + 16.0


@pytest.mark.parametrize("attempt", [1, 2, 3])
def test_permanent_fails_at_once(attempt: int) -> None:
    assert step(PERMANENT, attempt=attempt, max_attempts=10) == Transition("failed", None)
    assert step(PERMANENT, attempt=attempt, delivery="at_most_once") == Transition("failed", None)


# ---------------------------------------------------------------- Retry(after=...)


@pytest.mark.parametrize("delivery", ["at_least_once", "at_most_once"])
def test_retry_after_is_scheduled_at_now_plus_after(delivery: str) -> None:
    assert step(RETRY, delivery=delivery, retry_after=30.0) == Transition("scheduled", NOW + 30.0)
    assert step(RETRY, delivery=delivery, retry_after=0.0) == Transition("scheduled", NOW)


def test_retry_without_after_uses_the_backoff() -> None:
    assert step(RETRY, attempt=2) == Transition("scheduled", NOW + 20.0)
    assert step(RETRY, attempt=1, delivery="at_most_once") == Transition("scheduled", NOW + 10.0)


def test_retry_is_never_scheduled_in_the_past() -> None:
    assert step(RETRY, retry_after=-5.0) == Transition("scheduled", NOW)


def test_retry_still_spends_the_attempt_budget() -> None:
    # a performer that always raises Retry cannot loop forever
    assert step(RETRY, attempt=3, max_attempts=3, retry_after=1.0) == Transition("failed", None)


# ---------------------------------------------------------------- delivery modes


@pytest.mark.parametrize("outcome", [FAILED, TIMEOUT])
def test_at_most_once_is_not_restarted_after_an_exception_or_timeout(outcome: str) -> None:
    assert step(outcome, attempt=1, max_attempts=5, delivery="at_most_once") == Transition("failed", None)


def test_lost_worker_at_most_once_stalls() -> None:
    assert step(LOST, attempt=1, max_attempts=5, delivery="at_most_once") == Transition("stalled", None)
    assert step(LOST, attempt=5, max_attempts=5, delivery="at_most_once") == Transition("stalled", None)


def test_lost_worker_at_least_once_is_a_failed_attempt() -> None:
    assert step(LOST, attempt=1) == Transition("scheduled", NOW + 10.0)
    assert step(LOST, attempt=2) == Transition("scheduled", NOW + 20.0)
    assert step(LOST, attempt=3, max_attempts=3) == Transition("failed", None)


# ---------------------------------------------------------------- cancellation


@pytest.mark.parametrize("outcome", [FAILED, TIMEOUT, RETRY, PERMANENT, LOST, CANCELLED])
@pytest.mark.parametrize("delivery", ["at_least_once", "at_most_once"])
def test_cancel_requested_ends_cancelled(outcome: str, delivery: str) -> None:
    got = step(outcome, cancel_requested=True, delivery=delivery, retry_after=5.0)
    assert got == Transition("cancelled", None)


def test_a_cancelled_outcome_is_cancelled_even_without_the_flag() -> None:
    assert step(CANCELLED, cancel_requested=False) == Transition("cancelled", None)


# ---------------------------------------------------------------- manual retry: a fresh budget


def test_manual_retry_gives_a_fresh_budget() -> None:
    fixed = Backoff.fixed(7.0)
    # attempts 1..3 spent the budget; without a manual retry the 4th would already be over it
    assert step(FAILED, attempt=3, max_attempts=3, backoff=fixed) == Transition("failed", None)
    assert step(FAILED, attempt=4, max_attempts=3, backoff=fixed) == Transition("failed", None)
    # retried by hand after attempt 3: attempts 4, 5, 6 make a new budget of 3
    again = {"retries_from": 3, "max_attempts": 3, "backoff": fixed}
    assert step(FAILED, attempt=4, **again) == Transition("scheduled", NOW + 7.0)
    assert step(FAILED, attempt=5, **again) == Transition("scheduled", NOW + 7.0)
    assert step(FAILED, attempt=6, **again) == Transition("failed", None)


def test_a_second_manual_retry_resets_the_budget_again() -> None:
    fixed = Backoff.fixed(1.0)
    assert step(TIMEOUT, attempt=7, retries_from=6, max_attempts=2, backoff=fixed) == Transition(
        "scheduled", NOW + 1.0
    )
    assert step(TIMEOUT, attempt=8, retries_from=6, max_attempts=2, backoff=fixed) == Transition("failed", None)


def test_suspended_is_scheduled_at_its_wake_up_time_without_spending_the_budget() -> None:
    t = step(lifecycle.SUSPENDED, attempt=3, max_attempts=3, retry_after=NOW + 50)
    assert t == Transition("scheduled", NOW + 50)
    assert step(lifecycle.SUSPENDED, retry_after=NOW - 5) == Transition("scheduled", NOW)
    assert step(lifecycle.SUSPENDED, cancel_requested=True, retry_after=NOW + 5).state == "cancelled"
