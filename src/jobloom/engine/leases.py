"""A worker's leases: the heartbeat task that renews them (and the worker's row in the registry of
workers), and the watch that stops an attempt whose lease the worker could not renew in time."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jobloom.engine import coordinator, registry
from jobloom.engine.jobs import Outcome
from jobloom.engine.progress import ProgressBuffer
from jobloom.engine.running import Key, Running
from jobloom.store.base import Tx

if TYPE_CHECKING:
    from jobloom.engine.host import Host

log = logging.getLogger("jobloom.worker")


class LeaseKeeping:
    """The lease tasks of :class:`~jobloom.engine.worker.Worker` (a base class: they use its state)."""

    app: Host
    name: str
    lease: float
    concurrency: int
    bindings: list[str]
    running: dict[Key, Running]
    outcomes: list[Outcome]
    progress: ProgressBuffer
    listed: bool  # whether it keeps a row in the registry of workers (a drain does not)
    _now: Callable[[], float]  # the store's clock: the worker's

    def _stop_job(self, key: Key, reason: str) -> None:  # pragma: no cover - the worker's
        raise NotImplementedError

    async def _heartbeats(self) -> None:
        """Renew the leases of this worker's attempts every lease/3 (with one batched statement)."""
        interval = self.lease / 3
        while True:
            await asyncio.sleep(interval)
            # attempts that finished here but whose outcome is not reported yet keep their lease too
            keys = list(self.running) + [k for o in self.outcomes if (k := (o.job_id, o.attempt)) not in self.running]
            if not keys and not self.listed:
                continue  # nothing to renew, and no registry row to keep
            sent = time.monotonic()
            progress = self.progress.take() if keys and self.progress.due() else []  # rows locked by then
            try:
                store = await self.app.store()

                async def work(tx: Tx, keys: list[Key] = keys, rows: list[Any] = progress
                               ) -> tuple[set[Key], set[Key]]:
                    if self.listed:
                        await self._beat(tx)  # the registry row: a deferred write, sent with the heartbeat
                    if not keys:
                        return set(), set()
                    renewed = await coordinator.heartbeat(tx, self.name, keys, self._now(), self.lease)
                    await self.progress.write(tx, self.name, rows)
                    return renewed

                held, cancels = await store.transact(work)
            except Exception as exc:
                log.warning("heartbeat failed (%s: %s)", type(exc).__name__, exc)
                self.progress.restore(progress)
                continue
            finally:
                self.progress.settle(progress)
            for key in keys:
                rec = self.running.get(key)
                if key in held:
                    if rec is not None:
                        rec.lease_until = max(rec.lease_until, sent + self.lease)
                else:
                    self._stop_job(key, "lease_lost")
            for key in cancels:
                self._stop_job(key, "cancel")

    async def _beat(self, tx: Tx) -> None:
        """Write or renew this worker's row in the registry of workers (every heartbeat)."""
        await registry.beat(tx, self.name, self.bindings, self.concurrency, self.lease / 3, self._now())

    async def _lease_watch(self) -> None:
        """Stop every attempt whose lease this worker could not renew before it expired: the job may
        be reaped and started elsewhere from then on, and two live attempts of one job must never run."""
        while True:
            now = time.monotonic()
            for rec in list(self.running.values()):
                if rec.lease_until <= now and rec.stop_reason is None:
                    log.warning("job %d attempt %d: lease not renewed in time; stopping it", *rec.key)
                    self._stop_job(rec.key, "lease_lost")
            live = [r.lease_until for r in self.running.values() if r.stop_reason is None]
            wait = self.lease / 3 if not live else max(0.01, min(self.lease / 3, min(live) - now))
            await asyncio.sleep(wait)
