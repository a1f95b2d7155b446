"""The report plan: what a batch of attempt outcomes writes, as a function of the rows it read.

:func:`~jobloom.engine.coordinator.report` reads the outcomes' jobs (locked), their runs' spawned
children, their snooze counts and their bindings' backoffs; :class:`ReportPlan` decides, outcome by
outcome and without I/O, whether each is stale and what it does to its job (the next state, the attempt
row, the outbox event); the coordinator then writes the plan's rows in a few statements.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobloom.core import lifecycle
from jobloom.core.codecs import IDENTITY, Codec, encode_opt
from jobloom.core.options import Backoff
from jobloom.core.rows import RunningRow
from jobloom.core.states import EXPIRED
from jobloom.core.text import MAX_ERROR_BYTES, MAX_TRACEBACK_BYTES, storable_text
from jobloom.engine.hooks import Finished
from jobloom.engine.jobs import Outcome, event

_SUCCEEDED = lifecycle.Transition("succeeded")
_FAILED = lifecycle.Transition("failed")


def unique(outcomes: Iterable[Outcome]) -> list[Outcome]:
    """The outcomes, the first of each claim only (job, attempt, worker, started_at): a repeated report is
    applied once. Two claims of one attempt (a lost one and the re-run's) are two outcomes."""
    first: dict[tuple[int, int, str, float], Outcome] = {}
    for o in outcomes:
        first.setdefault((o.job_id, o.attempt, o.worker, o.started_at), o)
    return list(first.values())


def attempt_row(o: Outcome) -> dict[str, Any]:
    """The ``jobloom_attempts`` row of an outcome."""
    return {
        "job_id": o.job_id, "attempt": o.attempt, "worker": o.worker, "started_at": o.started_at,
        "finished_at": o.finished_at, "outcome": o.kind, "error": storable_text(o.error, MAX_ERROR_BYTES),
        "traceback": storable_text(o.traceback, MAX_TRACEBACK_BYTES),
    }


def holds_claim(row: RunningRow, o: Outcome) -> bool:
    """Whether the job is still running the very claim that the outcome reports: the same attempt, leased
    to the same worker, started at the moment that claim wrote (``started_at``, which the worker carries
    from its claim). A claim lost with a server (an asynchronous commit, a failover to an asynchronous
    standby) gives its attempt number back, and the re-run's claim takes it again: the owner and the
    start tell the two runs apart."""
    return (row.state == "running" and row.attempt == o.attempt and row.lease_owner == o.worker
            and row.started_at == o.started_at)


def fence(o: Outcome) -> dict[str, Any]:
    """The parameters that fence an attempt's statement to its claim (see :func:`holds_claim`)."""
    return {"id": o.job_id, "attempt": o.attempt, "worker": o.worker, "started_at": o.started_at}


def needs_backoff(o: Outcome) -> bool:
    """Whether deciding the outcome takes its binding's retry backoff (anything but a success)."""
    return o.kind != lifecycle.SUCCEEDED


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one live outcome does: ``step`` is ``"finish"`` (``finish_attempt``: the job moves to
    ``transition``), ``"hold"`` (a flow node that waits for its children) or ``"snooze"`` (scheduled
    again, no attempt spent). ``error``: the error to record instead of the outcome's, if any."""

    step: str
    transition: lifecycle.Transition
    error: str | None = None


def verdict(
    o: Outcome, row: RunningRow, now: float, *, spawned: tuple[bool, str | None] | None, snoozes: int,
    backoff: Backoff | None, rng: random.Random,
) -> Verdict:
    """Decide one live outcome (its job running this very attempt). ``spawned``: for a succeeding flow
    job that spawned children, whether one is still active and the error if one did not succeed;
    ``snoozes``: how often the job was snoozed; ``backoff``: its binding's (needed unless it succeeded)."""
    if o.kind == lifecycle.SUCCEEDED:
        if spawned is None:
            return Verdict("finish", _SUCCEEDED)
        active, spawn_error = spawned
        if active:  # it waits (no worker, no slot) with its result; its last child settles it
            return Verdict("hold", _SUCCEEDED)
        return Verdict("finish", _FAILED if spawn_error is not None else _SUCCEEDED, spawn_error)
    assert backoff is not None
    nxt = lifecycle.next_state(
        o.kind, now=now, attempt=row.attempt, retries_from=row.retries_from, max_attempts=row.max_attempts,
        delivery=row.delivery, cancel_requested=bool(row.cancel_requested), backoff=backoff,
        retry_after=o.retry_after, rng=rng, snoozes=snoozes, max_snoozes=o.max_snoozes or lifecycle.DEFAULT_MAX_SNOOZES,
        expires_at=row.expires_at,
    )
    if o.kind == lifecycle.SNOOZED and nxt.state == "scheduled":  # no attempt spent, one snooze counted
        return Verdict("snooze", nxt)
    if o.kind == lifecycle.SNOOZED and nxt.state == "failed":
        return Verdict("finish", nxt, f"snoozed {snoozes} times, the most its performer's max_snoozes allows: "
                                      "failed rather than snoozed again")
    if nxt.state == EXPIRED:
        return Verdict("finish", nxt, f"expired: its retry would come at or past its expiry "
                                      f"({_iso(row.expires_at)}); {o.error or o.kind}")
    return Verdict("finish", nxt)


def _iso(at: float | None) -> str:
    return "never" if at is None else datetime.fromtimestamp(at, UTC).isoformat()


@dataclass
class ReportPlan:
    """The rows a report writes, collected outcome by outcome (:meth:`live`, then :meth:`add`)."""

    now: float
    finishes: list[dict[str, Any]] = field(default_factory=list)
    snoozed: list[dict[str, Any]] = field(default_factory=list)
    holds: list[dict[str, Any]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)  # jobs now in a final state
    in_runs: list[Finished] = field(default_factory=list)  # those of flow runs, for the flows' hook
    with_dependants: list[tuple[int, str]] = field(default_factory=list)  # those other jobs depend on: (id, state)
    moved: set[int] = field(default_factory=set)  # jobs an earlier outcome moved: no longer running
    codec: Codec = IDENTITY  # how results and payloads are stored (the transaction's codec)
    ended: list[tuple[Outcome, str, str]] = field(default_factory=list)  # (outcome, binding, event kind)

    def live(self, o: Outcome, row: RunningRow | None) -> bool:
        """Whether the outcome is for its job's running claim (:func:`holds_claim`; and no earlier outcome moved
        the job): if not, it is stale and never applied."""
        return row is not None and holds_claim(row, o) and o.job_id not in self.moved

    @property
    def applied(self) -> int:
        """How many outcomes it applies."""
        return len(self.finishes) + len(self.holds) + len(self.snoozed)

    def add(self, o: Outcome, row: RunningRow, decided: Verdict) -> None:
        """Note the rows a live outcome writes. A replaced error is the outcome's own from now on."""
        if decided.error is not None:
            o.error = decided.error
        now, nxt = self.now, decided.transition
        self.attempts.append(attempt_row(o))
        self.moved.add(o.job_id)
        took = o.finished_at - o.started_at
        if decided.step == "hold":
            self.holds.append(fence(o) | {"result": encode_opt(self.codec, o.result),
                               "payload": encode_opt(self.codec, o.payload)})
            self.events.append(event(now, o.job_id, row.binding, "waiting", o.attempt, took))
            return
        if decided.step == "snooze":
            self.snoozed.append(fence(o) | {"run_at": nxt.run_at})
            self.events.append(event(now, o.job_id, row.binding, "snoozed", o.attempt, took))
            return
        finished = nxt.state != "scheduled"
        suspended = o.kind == lifecycle.SUSPENDED and nxt.state == "scheduled"
        self.finishes.append({  # fence(o)'s keys written out: one dict per outcome on the drain's path
            "id": o.job_id, "attempt": o.attempt, "worker": o.worker, "started_at": o.started_at,
            "state": nxt.state, "result": encode_opt(self.codec, o.result),
            "error": storable_text(o.error, MAX_ERROR_BYTES), "run_at": nxt.run_at if nxt.run_at is not None else now,
            "finished_at": now if finished else None, "refund": 1 if suspended else 0,
            "payload": encode_opt(self.codec, o.payload),
        })
        kind = "suspended" if suspended else ("retried" if nxt.state == "scheduled" else nxt.state)
        self.events.append(event(now, o.job_id, row.binding, kind, o.attempt, took))
        self.ended.append((o, row.binding, kind))
        if finished:
            self.finished.append(o.job_id)
            if row.run_id is not None:
                self.in_runs.append((o.job_id, row.run_id, row.node, nxt.state))
            if row.dependants:
                self.with_dependants.append((o.job_id, nxt.state))


def spawn_questions(outcomes: Sequence[Outcome], current: dict[int, RunningRow]) -> list[tuple[int, str, str]]:
    """The succeeding flow jobs of live outcomes whose spawned children the report asks about:
    ``(job id, run id, node)``."""
    return [(o.job_id, row.run_id, row.node) for o in outcomes
            if o.kind == lifecycle.SUCCEEDED and (row := current.get(o.job_id)) is not None
            and holds_claim(row, o) and row.run_id is not None
            and row.node is not None]
