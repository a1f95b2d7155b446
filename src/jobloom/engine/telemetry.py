"""The engine's one seam for telemetry: what it tells about enqueues, cycles and attempts, to whatever
watches (metrics, traces, logs), without importing any of them.

The engine calls a :class:`Telemetry` at six places: around an enqueue's insert (in the caller's
context, so a tracer sees the enqueuer's span), after a publish to a topic, after each worker cycle
commits (the jobs it claimed and the outcomes it reported, as one batch), at the start and end of each
attempt, and when a cycle fails or succeeds again after failing. The base class does nothing;
:class:`Telemetries` fans out to the ones an app enabled (``App.telemetry``), and asks each child only
for what it wants (:attr:`Telemetry.per_attempt`), so an app with none pays one method call per cycle
and per attempt.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobloom.engine.logs import direct_handler

if TYPE_CHECKING:
    from jobloom.core.types import Job
    from jobloom.engine.jobs import Claimed, NewJob, Outcome

log = logging.getLogger("jobloom.worker")


class Telemetry:
    """What the engine reports as it works; every method does nothing here (override the ones needed)."""

    per_attempt: bool = False
    """Whether :meth:`attempt_started` and :meth:`attempt_ended` are wanted (a call per attempt)."""
    per_enqueue: bool = False
    """Whether :meth:`enqueue_started`, :meth:`enqueue_carry` and :meth:`enqueued` are wanted."""

    def enqueue_started(self, jobs: Sequence[NewJob]) -> Any:
        """Jobs are about to be inserted (in the enqueuer's context; ``NewJob.meta`` may still be set).
        Returns a token handed back to :meth:`enqueued`."""
        return None

    def enqueue_carry(self, jobs: Sequence[NewJob], token: Any) -> None:
        """More jobs of the enqueue that :meth:`enqueue_started` opened (a large batch, chunk by chunk)."""

    def enqueued(self, jobs: Sequence[NewJob], ids: Sequence[int] | None, token: Any,
                 error: BaseException | None) -> None:
        """The insert of ``jobs`` ended: committed with ``ids`` (in job order), or failed with ``error``."""

    def published(self, topic: str, jobs: int) -> None:
        """A publish to ``topic`` made ``jobs`` jobs, one per subscribed binding (0: nobody subscribes to
        it); told once they are inserted (committed, or in the caller's transaction)."""

    def cycle(self, claimed: Sequence[Claimed], reported: Sequence[Outcome], reaped: Sequence[str] = (),
              expired: Sequence[str] = ()) -> None:
        """A worker cycle committed: the attempts it started, the outcomes it stored, the bindings of
        the attempts it reaped (``lost``: their worker stopped heartbeating) and of the jobs it ended
        ``expired`` (not started by their expiry)."""

    def attempt_started(self, claimed: Claimed, worker: str) -> Any:
        """An attempt starts on this worker (in the attempt's task); returns a token for :meth:`attempt_ended`."""
        return None

    def attempt_ended(self, claimed: Claimed, outcome: Outcome, token: Any) -> None:
        """An attempt ended with ``outcome`` (not stored yet: :meth:`cycle` says when it is)."""

    def store_failed(self, worker: str, exc: BaseException, first: bool) -> None:
        """A worker cycle failed (``first``: the first failure since the last success)."""

    def store_back(self, worker: str, failures: int) -> None:
        """A worker cycle succeeded after ``failures`` failed ones."""


OUTCOME_LINE = "job_outcome job_id=%d binding=%s attempt=%d outcome=%s duration_ms=%.1f%s"


class EnqueueTold:
    """One enqueue as the telemetry hears of it: the one place that calls :meth:`Telemetry.enqueue_started`,
    :meth:`~Telemetry.enqueue_carry` and :meth:`~Telemetry.enqueued`, whatever the path (``App.enqueue``
    coalesced or in the caller's transaction, a batch, a stream of chunks, the HTTP API, a flow run's start).

    Made before the insert, in the enqueuer's context (a tracer's span is current, and the trace context can
    still go into the jobs' ``meta``), then ended once: :meth:`done` with the ids of the jobs made, or
    :meth:`failed`; as a context manager, an exception leaving the block ends it as failed. Nothing is
    called when no telemetry wants enqueues (:attr:`Telemetry.per_enqueue`)."""

    __slots__ = ("jobs", "telemetry", "token")

    def __init__(self, telemetry: Telemetry, jobs: Sequence[NewJob]) -> None:
        self.telemetry = telemetry if telemetry.per_enqueue else None
        self.jobs = jobs
        self.token = None if self.telemetry is None else self.telemetry.enqueue_started(jobs)

    def carry(self, jobs: Sequence[NewJob]) -> None:
        """More jobs of this enqueue (a large batch, chunk by chunk)."""
        if self.telemetry is not None:
            self.telemetry.enqueue_carry(jobs, self.token)

    def done(self, ids: Sequence[int] | None, jobs: Sequence[NewJob] | None = None) -> None:
        """The insert committed (or, in the caller's transaction, succeeded): ``ids`` of ``jobs`` (by
        default every job of the enqueue), in job order."""
        if self.telemetry is not None:
            self.telemetry.enqueued(self.jobs if jobs is None else jobs, ids, self.token, None)

    def failed(self, error: BaseException, jobs: Sequence[NewJob] | None = None) -> None:
        """The insert failed with ``error``."""
        if self.telemetry is not None:
            self.telemetry.enqueued(self.jobs if jobs is None else jobs, None, self.token, error)

    def settled(self, fut: asyncio.Future[Job]) -> None:
        """The coalesced insert of a single job ended (a future's done callback)."""
        error = fut.exception() if not fut.cancelled() else asyncio.CancelledError()
        if error is None:
            self.done([fut.result().id])
        else:
            self.failed(error)

    def __enter__(self) -> EnqueueTold:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> None:
        if error is not None:
            self.failed(error)


def _ignore(*_: Any) -> None:
    """Nothing wants this call."""


class Telemetries(Telemetry):
    """Several telemetries as one: each call goes to every child, in the order they were added."""

    def __init__(self, *children: Telemetry) -> None:
        self.children: list[Telemetry] = []
        self._attempts: list[Telemetry] = []
        for child in children:
            self.add(child)

    def add(self, child: Telemetry) -> None:
        """Add a telemetry (one of a class already present is replaced: enabling twice is harmless)."""
        self.children = [c for c in self.children if type(c) is not type(child)] + [child]
        self._attempts = [c for c in self.children if c.per_attempt]
        self._cycles = [c for c in self.children if type(c).cycle is not Telemetry.cycle]
        self._enqueues = [c for c in self.children if c.per_enqueue]
        self.per_attempt = bool(self._attempts)
        self.per_enqueue = bool(self._enqueues)
        # the calls made per attempt and per cycle go straight to the one child that wants them, if one
        for name in ("attempt_started", "attempt_ended", "cycle"):
            self.__dict__.pop(name, None)
        if len(self._attempts) == 1:
            self.attempt_started = self._attempts[0].attempt_started  # type: ignore[method-assign]
            self.attempt_ended = self._attempts[0].attempt_ended  # type: ignore[method-assign]
        if len(self._cycles) == 1:
            self.cycle = self._cycles[0].cycle  # type: ignore[method-assign]
        elif not self._cycles:
            self.cycle = _ignore  # type: ignore[method-assign,assignment]

    def find(self, kind: type[Telemetry]) -> Telemetry | None:
        """The child of class ``kind``, if added."""
        return next((c for c in self.children if isinstance(c, kind)), None)

    def enqueue_started(self, jobs: Sequence[NewJob]) -> Any:
        """Each child that wants enqueues with its token (None if none does): a child added meanwhile
        is not asked to end what it did not start."""
        return [(c, c.enqueue_started(jobs)) for c in self._enqueues] if self._enqueues else None

    def enqueue_carry(self, jobs: Sequence[NewJob], token: Any) -> None:
        """Hand each child its own token."""
        for child, own in token or ():
            child.enqueue_carry(jobs, own)

    def enqueued(self, jobs: Sequence[NewJob], ids: Sequence[int] | None, token: Any,
                 error: BaseException | None) -> None:
        """Hand each child its own token back."""
        for child, own in token or ():
            child.enqueued(jobs, ids, own, error)

    def cycle(self, claimed: Sequence[Claimed], reported: Sequence[Outcome], reaped: Sequence[str] = (),
              expired: Sequence[str] = ()) -> None:
        """Tell every child that wants cycles."""
        for child in self._cycles:
            if expired:
                child.cycle(claimed, reported, reaped, expired)
            else:
                child.cycle(claimed, reported, reaped)

    def attempt_started(self, claimed: Claimed, worker: str) -> Any:
        """Each child that wants attempts with its token. (The worker keeps the ``attempt_ended`` it had
        at the start with the token: children added meanwhile do not change what ends an attempt.)"""
        return [(c, c.attempt_started(claimed, worker)) for c in self._attempts]

    def attempt_ended(self, claimed: Claimed, outcome: Outcome, token: Any) -> None:
        """Hand each child that started the attempt its own token back."""
        for child, own in token:
            child.attempt_ended(claimed, outcome, own)

    def published(self, topic: str, jobs: int) -> None:
        """Tell every child."""
        for child in self.children:
            child.published(topic, jobs)

    def store_failed(self, worker: str, exc: BaseException, first: bool) -> None:
        """Tell every child."""
        for child in self.children:
            child.store_failed(worker, exc, first)

    def store_back(self, worker: str, failures: int) -> None:
        """Tell every child."""
        for child in self.children:
            child.store_back(worker, failures)


class OutcomeLog(Telemetry):
    """One log record per attempt's outcome and per store outage of a worker, on ``jobloom.worker``.

    Each record carries its fields as attributes too (``job_id``, ``binding``, ``attempt``, ``outcome``,
    ``duration``, ``worker``, ``event``), for structured handlers (``--log-format json``)."""

    per_attempt = True

    def attempt_ended(self, claimed: Claimed, outcome: Outcome, token: Any) -> None:
        """``job_outcome job_id=… binding=… attempt=… outcome=… duration_ms=…`` at INFO."""
        if not log.isEnabledFor(logging.INFO):
            return
        c, error = claimed, outcome.error
        duration = outcome.finished_at - c.started_at
        args = (c.id, c.binding, c.attempt, outcome.kind, duration * 1000, f" error={error!r}" if error else "")
        # a line per job: where the worker's own text lines are all that would handle the record, the
        # line is written without making one (its fields are for structured handlers only)
        direct = direct_handler(log, logging.INFO)
        if direct is not None:
            direct.write_line(time.time(), logging.INFO, log.name, OUTCOME_LINE % args)
            return
        fields: dict[str, Any] = {"event": "job_outcome", "job_id": c.id, "binding": c.binding, "attempt": c.attempt,
                                  "outcome": outcome.kind, "duration": round(duration, 6), "worker": outcome.worker}
        if c.run_id is not None:
            fields["run_id"], fields["node"] = c.run_id, c.node
        if error:
            fields["error"] = error
        # made as log.info would, without its look-up of the caller's frame
        log.handle(log.makeRecord(log.name, logging.INFO, __file__, 0, OUTCOME_LINE, args, None, "attempt_ended",
                                  fields))

    def store_failed(self, worker: str, exc: BaseException, first: bool) -> None:
        """``store_lost`` at WARNING, once per outage."""
        if first:
            error = f"{type(exc).__name__}: {exc}"
            log.warning("store_lost worker=%s error=%s", worker, error,
                        extra={"event": "store_lost", "worker": worker, "error": error})

    def store_back(self, worker: str, failures: int) -> None:
        """``store_back`` at INFO, with the number of failed cycles."""
        log.info("store_back worker=%s failed_cycles=%d", worker, failures,
                 extra={"event": "store_back", "worker": worker, "failed_cycles": failures})
