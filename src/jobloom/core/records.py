"""Rows to values: jobs, attempts and binding policies as the stores return them."""

from __future__ import annotations

import functools
import json
from dataclasses import asdict
from typing import Any

from jobloom.core.codecs import IDENTITY, Codec, readable
from jobloom.core.errors import InvalidOption
from jobloom.core.options import Backoff, RateLimit, concurrency, positive_int, seconds
from jobloom.core.rows import AttemptRow, BindingRow, JobRow, PolicyRow
from jobloom.core.types import Attempt, Bucket, Job, Policy, Turn, job_of, to_datetime


def job_from_row(row: JobRow, codec: Codec = IDENTITY) -> Job:
    """A job's record (``get_job``, ``list_jobs``) to a :class:`Job`, its payload and result decoded by
    ``codec`` (content that no key of ``codec`` opens reads as the JSON string ``"encrypted"``)."""
    return job_of((
        row.id, row.binding, row.state, row.attempt, row.max_attempts, row.priority, row.unique_key,
        row.concurrency_key, row.delivery, row.error, readable(codec, row.payload, f"payload of job {row.id}"),
        readable(codec, row.result, f"result of job {row.id}"), row.run_at, row.created_at,
        row.started_at, row.finished_at, bool(row.cancel_requested), row.run_id, row.node,
        row.tags, row.meta, row.progress, row.retries_from, row.parent_id,
    ))


def attempt_from_row(row: AttemptRow) -> Attempt:
    """An attempt's record (``get_attempts``) to an :class:`Attempt`."""
    return Attempt(
        job_id=row.job_id, attempt=row.attempt, worker=row.worker,
        started_at=to_datetime(row.started_at),  # type: ignore[arg-type]
        finished_at=to_datetime(row.finished_at), outcome=row.outcome, error=row.error, traceback=row.traceback,
        reported_outcome=row.reported_outcome, reported_at=to_datetime(row.reported_at),
    )


LIMIT_FIELDS = ("concurrency", "key_concurrency", "rate_limit", "priority_aging", "key_rate_limit")


def policy_from_row(row: PolicyRow | BindingRow | None) -> tuple[Policy, Bucket | None, Backoff]:
    """A binding's record (``get_binding``, ``lock_binding``, ``list_bindings``) to the effective policy
    (code values under run-time overrides), its token bucket and its retry backoff.

    Every worker cycle reads each binding's record, and the record rarely changes: the policy and the
    backoff are parsed once per distinct record (both are immutable); the bucket is made anew."""
    if row is None:
        return Policy(), None, Backoff()
    policy = _policy(row.concurrency, row.key_concurrency, row.priority_aging, row.rate, row.burst,
                     bool(row.paused), row.batch_size, row.batch_wait, row.overrides, row.key_rules)
    bucket = Bucket(row.tokens, row.tokens_at) if row.tokens is not None and row.tokens_at is not None else None
    return policy, bucket, _backoff(row.backoff) if row.backoff else Backoff()


@functools.lru_cache(maxsize=1024)
def _policy(
    concurrency: int | None, key_concurrency: int | None, aging: float | None, rate: float | None,
    burst: float | None, paused: bool, batch_size: int | None, batch_wait: float | None, overrides: str | None,
    key_rules: str | None,
) -> Policy:
    limit = RateLimit(rate, burst or 1.0) if rate else None
    rules = json.loads(key_rules) if key_rules else {}
    key_rate = RateLimit(rules["key_rate"], rules.get("key_burst") or 1.0) if rules.get("key_rate") else None
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
            elif name == "key_rate_limit":
                key_rate = RateLimit.parse(value) if value else None
    return Policy(
        concurrency=concurrency, key_concurrency=key_concurrency or 1, rate=limit, priority_aging=aging or None,
        paused=paused, batch_size=batch_size or None, batch_wait=batch_wait or 0.0,
        fairness=rules.get("fairness"), key_weights=tuple(sorted((rules.get("key_weights") or {}).items())),
        key_rate=key_rate,
    )


def turn_from_row(row: PolicyRow | None) -> Turn:
    """Whose turn it is under round-robin fairness, as a binding's record (``lock_binding``) holds it."""
    if row is None or not row.turn_used:
        return Turn()
    return Turn(row.turn_key, row.turn_used)


def key_rules_json(policy: Policy) -> str | None:
    """The limits between keys of a performer's code (fairness, weights, key rate), as stored with its
    binding (None: none)."""
    rules: dict[str, Any] = {}
    if policy.fairness is not None:
        rules["fairness"] = policy.fairness
    if policy.key_weights:
        rules["key_weights"] = dict(policy.key_weights)
    if policy.key_rate is not None:
        rules["key_rate"], rules["key_burst"] = policy.key_rate.rate, policy.key_rate.burst
    return json.dumps(rules, sort_keys=True) if rules else None


@functools.lru_cache(maxsize=256)
def _backoff(text: str) -> Backoff:
    return Backoff(**json.loads(text))


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
        elif name in ("rate_limit", "key_rate_limit") and value is not None:
            RateLimit.parse(value, binding, name)
        elif name == "priority_aging":
            seconds(name, value, binding)

