"""Progress of running jobs: every ``ctx.progress`` call is recorded in memory, and a worker writes
what is pending at most once a second, in one statement for all its jobs.

A write rides on whatever transaction of the worker comes first: a heartbeat (which renews the same
jobs' leases), the cycle that reports the job (so the last progress of a job that ends is kept), or,
if neither comes within a second, a write of its own. Each write is fenced like a heartbeat: only the
job's current, running attempt of this worker records progress. Only the latest value per attempt is
kept: a job that reports a thousand times a second costs one row update a second.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from jobloom.core.errors import InvalidOption
from jobloom.core.queries import Q
from jobloom.core.text import storable_text

if TYPE_CHECKING:
    from jobloom.store.base import Store, Tx

log = logging.getLogger("jobloom.worker")
Key = tuple[int, int]
FLUSH_INTERVAL = 1.0
"""Seconds between two progress writes of one worker (so at most one write per job per second)."""
MAX_PROGRESS_MESSAGE_BYTES = 1024
"""A progress message is cut to this many UTF-8 bytes (with a marker saying how much was cut)."""


def progress_json(fraction: object, message: object, at: float, attempt: int) -> str:
    """Progress as stored; a fraction that is not a number from 0 to 1, or a message that is not text,
    raises ``InvalidOption``."""
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not (
            math.isfinite(fraction) and 0.0 <= fraction <= 1.0):
        raise InvalidOption("progress fraction", fraction, "a number from 0 to 1")
    if message is not None and not isinstance(message, str):
        raise InvalidOption("progress message", message, "text (str) or None")
    return json.dumps({"fraction": float(fraction), "message": storable_text(message, MAX_PROGRESS_MESSAGE_BYTES),
                       "at": at, "attempt": attempt})


class ProgressBuffer:
    """A worker's progress not written yet: the latest value per attempt (used on the event loop)."""

    def __init__(self) -> None:
        self.pending: dict[Key, str] = {}
        self.inflight: dict[Key, str] = {}  # taken by a write of its own that may not have committed yet
        self.writes = 0  # transactions that wrote progress (for tests and curiosity)
        self._wake = asyncio.Event()
        self._last = -math.inf  # monotonic time of the last write

    def due(self) -> bool:
        """Whether progress is pending and the last write was at least ``FLUSH_INTERVAL`` ago."""
        return bool(self.pending) and time.monotonic() - self._last >= FLUSH_INTERVAL

    def record(self, key: Key, data: str) -> None:
        """Keep ``data`` as the attempt's latest progress, to be written within a second."""
        self.pending[key] = data
        self._wake.set()

    def take(self, keys: Iterable[Key] | None = None) -> list[dict[str, Any]]:
        """Remove and return the pending rows (of ``keys`` only, if given) as ``set_progress`` rows
        (without the worker).

        Without ``keys`` (a write of its own: call :meth:`settle` when it ends) the rows are in flight
        until settled. With ``keys`` (the report that ends those attempts) a row still in flight is
        returned too: the report may commit first, after which that write no longer applies, and the
        job's last progress would be lost."""
        if keys is None:
            taken, self.pending = self.pending, {}
            self.inflight.update(taken)
        else:
            taken = {}
            for k in keys:
                if k in self.pending:
                    taken[k] = self.pending.pop(k)
                elif k in self.inflight:
                    taken[k] = self.inflight[k]
        return [{"id": k[0], "attempt": k[1], "progress": v} for k, v in sorted(taken.items())]

    def settle(self, rows: list[dict[str, Any]]) -> None:
        """The write of ``rows`` (from :meth:`take` without keys) has ended, committed or not."""
        for row in rows:
            key = (row["id"], row["attempt"])
            if self.inflight.get(key) == row["progress"]:
                del self.inflight[key]

    def restore(self, rows: list[dict[str, Any]]) -> None:
        """Put back rows whose write failed, unless newer progress came meanwhile."""
        for row in rows:
            self.pending.setdefault((row["id"], row["attempt"]), row["progress"])
        if rows:
            self._wake.set()

    async def write(self, tx: Tx, worker: str, rows: list[dict[str, Any]]) -> None:
        """Write ``rows`` (from :meth:`take`) in ``tx``: one statement on PostgreSQL."""
        if rows:
            self.writes += 1
            self._last = time.monotonic()
            await tx.executemany(Q.set_progress, [{**row, "worker": worker} for row in rows])

    async def run(self, store: Callable[[], Awaitable[Store]], worker: str) -> None:
        """Write pending progress in a transaction of its own, at most once every ``FLUSH_INTERVAL`` (a
        heartbeat or a report may have taken it first)."""
        while True:
            await self._wake.wait()
            wait = self._last + FLUSH_INTERVAL - time.monotonic()
            await asyncio.sleep(max(0.0, min(FLUSH_INTERVAL, wait)))
            self._wake.clear()
            rows = self.take()
            if not rows:
                continue

            async def work(tx: Tx, rows: list[dict[str, Any]] = rows) -> None:
                await self.write(tx, worker, rows)

            try:
                await (await store()).transact(work)
            except Exception as exc:  # progress is advisory: keep it for the next write
                log.warning("writing progress failed (%s: %s)", type(exc).__name__, exc)
                self.restore(rows)
            finally:
                self.settle(rows)
