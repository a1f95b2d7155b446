"""Rows to values: jobs, attempts and binding policies as the stores return them."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from jobloom.core.errors import InvalidOption
from jobloom.core.options import Backoff, RateLimit, concurrency, positive_int, seconds
from jobloom.core.types import Attempt, Bucket, Job, Policy, to_datetime


def job_from_row(row: tuple[Any, ...]) -> Job:
    """A ``get_job``-shaped row to a :class:`Job`."""
    (id_, binding, state, payload, attempt, max_attempts, priority, run_at, unique_key, concurrency_key,
     delivery, result, error, created_at, started_at, finished_at, cancel_requested, run_id, node) = row
    return Job(
        id_, binding, state, attempt, max_attempts, priority, unique_key, concurrency_key, delivery, error,
        payload, result, run_at, created_at, started_at, finished_at, bool(cancel_requested), run_id, node,
    )


def attempt_from_row(row: tuple[Any, ...]) -> Attempt:
    """A ``get_attempts``-shaped row to an :class:`Attempt`."""
    job_id, attempt, worker, started, finished, outcome, error, tb, reported, reported_at = row
    return Attempt(
        job_id=job_id, attempt=attempt, worker=worker, started_at=to_datetime(started),  # type: ignore[arg-type]
        finished_at=to_datetime(finished), outcome=outcome, error=error, traceback=tb,
        reported_outcome=reported, reported_at=to_datetime(reported_at),
    )


LIMIT_FIELDS = ("concurrency", "key_concurrency", "rate_limit", "priority_aging")


def policy_from_row(row: tuple[Any, ...] | None) -> tuple[Policy, Bucket | None, Backoff]:
    """A ``get_binding``-shaped row to the effective policy (code values under run-time overrides)."""
    if row is None:
        return Policy(), None, Backoff()
    concurrency, key_concurrency, rate, burst, aging, backoff, overrides, tokens, tokens_at = row[:9]
    paused = bool(row[9]) if len(row) > 9 else False
    batch_size, batch_wait = (row[10], row[11]) if len(row) > 11 else (None, None)
    limit = RateLimit(rate, burst or 1.0) if rate else None
    if overrides:
        for name, value in json.loads(overrides).items():
            if name == "concurrency":
                concurrency = value
            elif name == "key_concurrency":
                key_concurrency = value
            elif name == "rate_limit":
                limit = RateLimit.parse(value) if value else None
            elif name == "priority_aging":
                aging = value
    policy = Policy(
        concurrency=concurrency, key_concurrency=key_concurrency or 1, rate=limit, priority_aging=aging or None,
        paused=paused, batch_size=batch_size or None, batch_wait=batch_wait or 0.0,
    )
    bucket = Bucket(tokens, tokens_at) if tokens is not None and tokens_at is not None else None
    return policy, bucket, Backoff(**json.loads(backoff)) if backoff else Backoff()


def backoff_json(backoff: Backoff) -> str:
    """A backoff policy as stored with its binding."""
    return json.dumps(asdict(backoff))


def check_limits(binding: str, limits: dict[str, Any]) -> None:
    """Check the run-time limits given to ``set_limits`` (names in ``LIMIT_FIELDS``, values by kind)."""
    for name, value in limits.items():
        if name not in LIMIT_FIELDS:
            raise InvalidOption(name, value, f"one of {', '.join(LIMIT_FIELDS)}", binding)
        if name == "concurrency":
            concurrency(value, binding)
        elif name == "key_concurrency":
            positive_int(name, value, binding, allow_none=False)
        elif name == "rate_limit" and value is not None:
            RateLimit.parse(value, binding)
        elif name == "priority_aging":
            seconds(name, value, binding)
