"""What an attempt's outcome does to its job: a pure function, so every store applies the same rules."""

from __future__ import annotations

import random
from dataclasses import dataclass

from jobloom.core.deadlines import expires_before
from jobloom.core.options import Backoff

# Outcome kinds a worker (or the reaper) reports for one attempt.
SUCCEEDED = "succeeded"
FAILED = "failed"  # an exception: the retry policy applies
TIMEOUT = "timeout"  # ran past its timeout: counts as a failed attempt
RETRY = "retry"  # the performer raised Retry: another attempt, at its delay if given
PERMANENT = "permanent"  # the performer raised Permanent: failed at once
CANCELLED = "cancelled"  # cancelled while running
LOST = "lost"  # the lease expired: the worker is gone
SUSPENDED = "suspended"  # a durable sleep or event wait: runs again later, without spending an attempt
SNOOZED = "snoozed"  # the performer raised Snooze: runs again after its delay, without spending an attempt
SKIPPED = "skipped"  # a flow node whose when= was false: skipped, without running its performer
OUTCOMES = frozenset({SUCCEEDED, FAILED, TIMEOUT, RETRY, PERMANENT, CANCELLED, LOST, SUSPENDED, SNOOZED, SKIPPED})
DEFAULT_MAX_SNOOZES = 100


@dataclass(frozen=True, slots=True)
class Transition:
    """The job's next state, and when it may run again if it is ``scheduled``."""

    state: str
    run_at: float | None = None


def next_state(
    outcome: str,
    *,
    now: float,
    attempt: int,
    retries_from: int,
    max_attempts: int,
    delivery: str,
    cancel_requested: bool,
    backoff: Backoff,
    retry_after: float | None = None,
    rng: random.Random | None = None,
    snoozes: int = 0,
    max_snoozes: int = DEFAULT_MAX_SNOOZES,
    expires_at: float | None = None,
) -> Transition:
    """Apply the retry policy to one finished attempt.

    ``SUSPENDED`` takes ``retry_after`` as the absolute wake-up time. ``SNOOZED`` takes it in seconds
    from now, and fails the job once it was snoozed ``max_snoozes`` times already (``snoozes``).
    ``at_most_once`` jobs are never started again automatically after they may have run: an
    exception, a timeout or a lost worker ends them (``failed``, ``failed``, ``stalled``); only an
    explicit ``Retry`` from the performer (it knows a new start is safe) or a person retries them.
    A retry due at or past ``expires_at`` (the job's expiry) ends the job ``expired`` instead.
    """
    if outcome == SUCCEEDED:
        return Transition("succeeded")
    if cancel_requested or outcome == CANCELLED:
        return Transition("cancelled")
    if outcome == SKIPPED:
        return Transition("skipped")
    if outcome == SUSPENDED:
        return Transition("scheduled", now if retry_after is None else max(now, retry_after))
    if outcome == SNOOZED:
        if snoozes >= max_snoozes:
            return Transition("failed")
        return Transition("scheduled", now + max(0.0, retry_after or 0.0))
    if outcome == PERMANENT:
        return Transition("failed")
    at_most_once = delivery == "at_most_once"
    if outcome == LOST and at_most_once:
        return Transition("stalled")
    if at_most_once and outcome != RETRY:
        return Transition("failed")
    if attempt - retries_from >= max_attempts:
        return Transition("failed")
    explicit = outcome == RETRY and retry_after is not None
    delay = retry_after if explicit and retry_after is not None else backoff.delay(attempt - retries_from, rng)
    run_at = now + max(0.0, delay)
    if expires_before(run_at, expires_at):  # the retry would come too late: it never starts
        return Transition("expired")
    return Transition("scheduled", run_at)
