"""What the engine's parts hand each other: a job to insert, a claim, an attempt's outcome, and the
outbox's event rows (appended in the transaction that made the change they record)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from jobloom.core.codecs import Codec, encode_opt
from jobloom.core.outbox import count_events
from jobloom.core.queries import Q
from jobloom.core.rows import CandidateRow, ClaimRow, ExpiredRow, MovedRow, PolicyRow, RunningRow
from jobloom.store.base import Later, Tx


@dataclass(slots=True)
class NewJob:
    """A job to insert, already validated and encoded."""

    binding: str
    payload: str
    priority: int
    run_at: float
    state: str
    max_attempts: int
    delivery: str
    timeout: float | None
    unique_key: str | None
    unique_until: float | None
    concurrency_key: str | None
    created_at: float
    run_id: str | None = None
    node: str | None = None
    tags: tuple[str, ...] | None = None
    meta: str | None = None  # JSON text
    debounce_key: str | None = None  # enqueues with this key collapse into one job (with debounce)
    expires_at: float | None = None  # never starts after this moment
    debounce: float | None = None  # the debounce window (seconds), not a column
    debounce_max: float | None = None  # at most this long after the first enqueue of the key, not a column
    depends_on: tuple[int, ...] | None = None  # inserted waiting until these jobs end
    on_dependency_failure: str = "skip"

    def params(self, codec: Codec) -> dict[str, Any]:
        """The row as named parameters, its payload stored as ``codec`` says."""
        return {
            "binding": self.binding, "state": self.state, "payload": encode_opt(codec, self.payload),
            "priority": self.priority,
            "run_at": self.run_at, "max_attempts": self.max_attempts, "delivery": self.delivery,
            "timeout": self.timeout, "unique_key": self.unique_key, "unique_until": self.unique_until,
            "concurrency_key": self.concurrency_key, "created_at": self.created_at, "run_id": self.run_id,
            "node": self.node, "tags": None if self.tags is None else json.dumps(self.tags), "meta": self.meta,
            "debounce_key": self.debounce_key, "expires_at": self.expires_at,
        }


class Claimed(NamedTuple):
    """A job handed to a worker: run attempt ``attempt`` under a lease until reported.

    A named tuple (read-only, built in C): one is made per claimed job on the worker's hot path, where
    a frozen dataclass's ``__init__`` (a Python call setting each field) cost about three times as much.
    """

    id: int
    binding: str
    payload: str
    attempt: int
    max_attempts: int
    timeout: float | None
    delivery: str
    started_at: float
    run_id: str | None = None
    node: str | None = None
    run_at: float | None = None  # when it became due (None where unknown)
    meta: str | None = None  # JSON text, as enqueued


@dataclass(slots=True)
class Outcome:
    """A worker's report of one attempt; (job_id, attempt) makes it idempotent."""

    job_id: int
    attempt: int
    kind: str
    worker: str
    started_at: float
    finished_at: float
    result: str | None = None
    error: str | None = None
    traceback: str | None = None
    retry_after: float | None = None  # RETRY: seconds; SUSPENDED: the absolute wake-up time
    payload: str | None = None  # a flow node's payload, built when it ran
    wait: str | None = None  # SUSPENDED on wait_for_event: the event's name
    run_id: str | None = None  # the job's flow run (Claimed.run_id): its lock is taken before the job's
    max_snoozes: int | None = None  # SNOOZED: the performer's max_snoozes


@dataclass(slots=True)
class ReportResult:
    """What a batch of reports did: applied, fenced off as stale, or duplicates of applied ones."""

    applied: int = 0
    stale: list[int] = field(default_factory=list)
    duplicate: int = 0
    finished: list[int] = field(default_factory=list)
    released: int = 0  # waiting jobs queued because their last dependency ended
    woken: int = 0  # callers queued again because a child they called ended
    ended: list[tuple[Outcome, str, str]] = field(default_factory=list)  # (outcome, binding, event kind)


def claims(rows: Sequence[ClaimRow], now: float) -> list[Claimed]:
    """The jobs a claim returned, as a worker runs them (started at ``now``)."""
    return [Claimed(r.id, r.binding, r.payload, r.attempt, r.max_attempts, r.timeout, r.delivery, now, r.run_id,
                    r.node, r.run_at, r.meta) for r in rows]


@dataclass(frozen=True, slots=True)
class DeferredClaim:
    """A claim of ``n`` jobs at ``at`` sent with its transaction's next round trip (:meth:`Tx.claim`)."""

    later: Later[ClaimRow]
    at: float
    n: int

    def jobs(self) -> list[Claimed]:
        """The claimed jobs, once the round trip that carried the claim is over (after the commit)."""
        return claims(self.later.rows(), self.at)


@dataclass(frozen=True, slots=True)
class Dispatched:
    """Jobs handed out by one dispatch, and when a rate token comes next if tokens ran out."""

    claimed: list[Claimed]
    next_token_at: float | None = None
    batch: bool = False  # a batch performer's binding: the claimed jobs are one batch
    decided_at: float | None = None  # a rate-limited binding: the clock when it first decided (before any wait)
    waited: float = 0.0  # seconds it waited for a rate token, holding the binding's lock
    locked: bool = False  # it took the binding's row lock (held until the transaction ends)
    contended: bool = False  # it could not wait for the binding's lock, which another transaction held
    deferred: DeferredClaim | None = None  # dispatch(defer=True): the claim, sent with the next round trip


@dataclass(frozen=True, slots=True)
class Prefetched:
    """A binding's candidates read in a cycle's first batch, before its policy (:func:`~jobloom.engine.
    coordinator.read_cycle`): by priority, then (``aging``) by age, up to ``limit`` of each."""

    rows: list[CandidateRow]
    limit: int
    aging: bool


@dataclass(slots=True)
class CycleReads:
    """What a worker's cycle reads first, in one batch: see :func:`read_cycle`."""

    locked: list[RunningRow] | None
    expired: list[RunningRow]
    promoted: list[MovedRow]
    lapsed: list[ExpiredRow]  # jobs that ended expired: not started by their expiry
    cancels: set[tuple[int, int]]
    bindings: dict[str, list[PolicyRow]]
    candidates: dict[str, Prefetched] = field(default_factory=dict)


def event(
    at: float, job_id: int, binding: str, kind: str, attempt: int = 0, duration: float | None = None
) -> dict[str, Any]:
    """One outbox row: what happened to which job, when (and how long the attempt ran)."""
    return {"at": at, "job_id": job_id, "binding": binding, "kind": kind, "attempt": attempt,
            "duration": duration}


async def emit(tx: Tx, events: Sequence[dict[str, Any]]) -> None:
    """Append events to the outbox, in the transaction that made the state changes (many events of one
    kind and binding as one counted row: :func:`~jobloom.core.outbox.count_events`)."""
    if not events:
        return
    single, counted = count_events(events)
    if single:
        await tx.executemany(Q.insert_event, single)
    if counted:
        await tx.executemany(Q.insert_counted_event, counted)
