"""When a debounced job runs and when a job's expiry ends it: pure decisions of the enqueue and the report.

A debounced enqueue (``debounce=`` seconds, ``debounce_key=``) collapses into the job its key already
has, if that job is still scheduled, never started and its window is still open; the job then runs
``debounce`` seconds after the latest enqueue, but never later than ``debounce_max`` seconds after the
first (the moment the job was made). A job with an expiry (``expires_at``) never starts after it: a
retry whose backoff would end past it ends the job as expired instead.
"""

from __future__ import annotations


def collapses(now: float, window_ends: float) -> bool:
    """Whether an enqueue at ``now`` collapses into its key's job, due at ``window_ends``: only while the
    window is open (a job whose window ended runs with what it has; the enqueue starts a new one)."""
    return window_ends > now


def debounced_run_at(now: float, window: float, first_at: float, max_wait: float | None) -> float:
    """When a debounced job runs after an enqueue at ``now``: ``window`` seconds later, capped at
    ``max_wait`` seconds after the key's first enqueue (``first_at``), never before ``now``."""
    due = now + window
    if max_wait is not None:
        due = min(due, max(now, first_at + max_wait))
    return due


def expires_before(run_at: float, expires_at: float | None) -> bool:
    """Whether a job due at ``run_at`` would start too late: at or past its expiry, it never starts."""
    return expires_at is not None and run_at >= expires_at
