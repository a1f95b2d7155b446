"""The registry of workers: one row per worker process in ``jobloom_workers``, saying which bindings
it serves. Written when the worker starts, renewed with its lease heartbeats (one deferred write per
heartbeat, never one per job), deleted when it stops; rows of workers that died without a word are
pruned by the others once they have missed ten heartbeats."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobloom.core.queries import Q
from jobloom.core.types import to_datetime
from jobloom.store.base import Tx

ALIVE_BEATS = 3.0
"""A worker whose row was renewed within this many heartbeat intervals counts as alive."""


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker process as the registry shows it."""

    name: str
    host: str
    pid: int
    bindings: tuple[str, ...]
    concurrency: int
    beat: float
    started_ts: float
    seen_ts: float

    @property
    def remote(self) -> bool:
        """Whether it is a remote worker, pulling jobs over HTTP (``App.remote_claim``)."""
        return self.host == REMOTE_HOST and self.pid == 0

    def alive(self, now: float) -> bool:
        """Whether its row was renewed recently enough (within ``ALIVE_BEATS`` heartbeats, plus a second)."""
        return now - self.seen_ts <= ALIVE_BEATS * self.beat + 1.0

    def as_json(self) -> dict[str, Any]:
        """Plain JSON values (times as ISO 8601)."""
        started, seen = to_datetime(self.started_ts), to_datetime(self.seen_ts)
        return {"name": self.name, "host": self.host, "pid": self.pid, "bindings": list(self.bindings),
                "concurrency": self.concurrency, "started_at": started.isoformat() if started else None,
                "seen_at": seen.isoformat() if seen else None}


async def beat(tx: Tx, name: str, bindings: Sequence[str], concurrency: int, every: float, now: float) -> None:
    """Write or renew ``name``'s row, and prune the rows of workers gone silent (deferred writes: on
    PostgreSQL they go out with the transaction's next statement or its commit)."""
    await tx.executemany(Q.beat_worker, [{
        "name": name, "host": socket.gethostname(), "pid": os.getpid(), "bindings": json.dumps(list(bindings)),
        "concurrency": concurrency, "beat": every, "now": now,
    }])
    await tx.executemany(Q.prune_workers, [{"now": now}])


REMOTE_HOST = "remote"
"""The host a remote (pull) worker's registry row names: it runs elsewhere and says no more of itself."""


async def beat_remote(tx: Tx, name: str, bindings: Sequence[str], concurrency: int, every: float, now: float) -> None:
    """Write or renew the row of the remote worker ``name`` (one that pulls jobs over HTTP), seen claiming
    jobs of ``bindings`` or renewing its leases now; ``every``: how long it may stay silent while alive
    (its lease or its long poll's wait), so it counts as alive for :data:`ALIVE_BEATS` times that."""
    await tx.executemany(Q.beat_worker, [{
        "name": name, "host": REMOTE_HOST, "pid": 0, "bindings": json.dumps(list(bindings)),
        "concurrency": concurrency, "beat": every, "now": now,
    }])


async def forget(tx: Tx, name: str) -> None:
    """Delete ``name``'s row (the worker stops)."""
    await tx.execute(Q.forget_worker, {"name": name})


async def workers(tx: Tx) -> list[WorkerInfo]:
    """Every registered worker, alive or not yet pruned, by name."""
    return [WorkerInfo(r.name, r.host, r.pid, tuple(json.loads(r.bindings)), r.concurrency, r.beat, r.started_at,
                       r.seen_at)
            for r in await tx.fetch(Q.list_workers)]
