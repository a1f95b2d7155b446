"""A worker's bookkeeping: one attempt it runs (its lease, its task, why it was stopped), what one
cycle did, and the worker's name."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any

from jobloom.engine import runners
from jobloom.engine.jobs import Claimed, DeferredClaim, Dispatched, Outcome

Key = tuple[int, int]
"""A running attempt: (job id, attempt number)."""


@dataclass(slots=True)
class Running:
    """One attempt this worker runs."""

    claimed: Claimed
    lease_until: float  # monotonic: the lease has surely expired by then unless renewed
    key: Key  # (claimed.id, claimed.attempt)
    task: asyncio.Task[None] | None = None
    started: bool = False
    stop_reason: str | None = None  # "cancel", "timeout", "shutdown" or "lease_lost"
    timer: asyncio.TimerHandle | None = None
    sync: runners.SyncRun | None = None  # a sync perform under way: stopped through it, not by cancelling
    batch: int = 0  # a batch performer's job: the size of its batch (it shares the batch's task)


@dataclass(slots=True)
class CycleResult:
    """What one cycle did: jobs claimed, cancels asked, the next due moment, whether to wake others."""

    claimed: list[Claimed] = field(default_factory=list)
    deferred: list[DeferredClaim] = field(default_factory=list)  # claims read after the commit (then in claimed)
    batches: list[list[Claimed]] = field(default_factory=list)  # of batch performers (also in claimed)
    cancels: set[Key] = field(default_factory=set)
    next_due: float | None = None
    token_at: float | None = None  # when a rate token that jobs wait for is next due (also in next_due)
    decided_at: float | None = None  # the earliest clock at which a rate-limited binding's dispatch decided
    waited: float = 0.0  # seconds its dispatches waited for rate tokens
    notify: bool = False
    reaped: list[str] = field(default_factory=list)  # the bindings of the attempts reaped as lost
    expired: list[str] = field(default_factory=list)  # the bindings of the jobs ended expired, unstarted
    contended: list[str] = field(default_factory=list)  # bindings skipped: another transaction held their lock
    began: float = 0.0  # monotonic, read just before the clock the claims' leases count from
    reported: int = 0  # the outcomes this cycle reported

    def add(self, binding: str, got: Dispatched) -> int:
        """Note what one binding's dispatch claimed (claimed now, or deferred): how many jobs."""
        if got.contended:
            self.contended.append(binding)
        self.claimed.extend(got.claimed)
        n = len(got.claimed)
        if got.deferred is not None:  # its jobs are read after the commit
            self.deferred.append(got.deferred)
            n += got.deferred.n
        if got.batch and got.claimed:
            self.batches.append(got.claimed)
        if got.decided_at is not None:
            self.decided_at = got.decided_at if self.decided_at is None else min(self.decided_at, got.decided_at)
        self.waited += got.waited
        return n


@dataclass(slots=True)
class CycleAsk:
    """What one cycle is to do, fixed before its transaction (which may run more than once): the outcomes
    to report, the room to claim in (``sync_free``: of it, for sync performers), the bindings in
    rotation order, whether jobs run (their leases are watched), their last progress, the candidates to
    read ahead, whether an outcome is a flow job's, and the pacing of rate-limited bindings."""

    outcomes: list[Outcome]
    free: int
    sync_free: int
    order: list[str]
    watching: bool = False
    progress: list[dict[str, Any]] = field(default_factory=list)
    prefetch: dict[str, tuple[int, bool]] | None = None
    flows: bool = False
    token_wait: float = 0.0
    aimed: float | None = None


def worker_name() -> str:
    """A unique, readable worker id: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
