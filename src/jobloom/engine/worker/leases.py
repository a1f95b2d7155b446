"""A worker's leases: the heartbeat task that renews them (and the worker's row in the registry of
workers), and the watch that stops an attempt whose lease the worker could not renew in time."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from jobloom.core.tasks import cancel_and_wait
from jobloom.engine import coordinator, registry
from jobloom.engine.progress import ProgressBuffer
from jobloom.engine.running import Key
from jobloom.engine.worker.completer import Completer
from jobloom.engine.worker.executor import Executor
from jobloom.engine.worker.shared import Clock
from jobloom.store.base import Tx

if TYPE_CHECKING:
    from jobloom.engine.host import Host

log = logging.getLogger("jobloom.worker")


class Leases:
    """Keeps the leases of the attempts a worker runs or has outcomes of, and its registry row."""

    def __init__(self, app: Host, name: str, *, lease: float, bindings: list[str], executor: Executor,
                 completer: Completer, progress: ProgressBuffer, clock: Clock) -> None:
        self._app = app
        self._name = name
        self._lease = lease
        self._bindings = bindings
        self._executor = executor
        self._completer = completer
        self._progress = progress
        self._clock = clock
        self.listed = True
        """Whether its heartbeats keep a row in the registry of workers (a drain's do not)."""
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start the heartbeat and the lease watch (on the running loop)."""
        self._tasks = [asyncio.create_task(self._heartbeats()), asyncio.create_task(self._watch())]

    def stop(self) -> list[asyncio.Task[None]]:
        """Cancel the heartbeat and the lease watch; their tasks (for a caller that waits for them)."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        return tasks

    async def halt(self, timeout: float | None = None) -> bool:
        """Stop the heartbeat and the lease watch and wait until they have ended (a heartbeat in a
        transaction is rolled back): from then on nothing renews a lease or the registry row. Whether
        both ended within ``timeout`` s."""
        return await cancel_and_wait(self.stop(), timeout=timeout)

    @property
    def beating(self) -> bool:
        """Whether the heartbeat task is running (started and not yet stopped and ended)."""
        return any(not task.done() for task in self._tasks)

    async def _heartbeats(self) -> None:
        """Renew the leases of this worker's attempts every lease/3 (with one batched statement)."""
        interval = self._lease / 3
        running = self._executor.running
        while True:
            await asyncio.sleep(interval)
            # attempts that finished here but whose outcome is not reported yet keep their lease too
            keys = list(running) + [k for k in self._completer.pending() if k not in running]
            if not keys and not self.listed:
                continue  # nothing to renew, and no registry row to keep
            sent = time.monotonic()
            progress = self._progress.take() if keys and self._progress.due() else []  # rows locked by then
            try:
                store = await self._app.store()

                async def work(tx: Tx, keys: list[Key] = keys, rows: list[Any] = progress
                               ) -> tuple[set[Key], set[Key]]:
                    if self.listed:
                        await self.beat(tx)  # the registry row: a deferred write, sent with the heartbeat
                    if not keys:
                        return set(), set()
                    renewed = await coordinator.heartbeat(tx, self._name, keys, self._clock.now(), self._lease)
                    await self._progress.write(tx, self._name, rows)
                    return renewed

                held, cancels = await store.transact(work)
            except Exception as exc:
                log.warning("heartbeat failed (%s: %s)", type(exc).__name__, exc)
                self._progress.restore(progress)
                continue
            finally:
                self._progress.settle(progress)
            self._renewed(keys, held, cancels, sent)

    def _renewed(self, keys: list[Key], held: set[Key], cancels: set[Key], sent: float) -> None:
        """A heartbeat sent at ``sent`` renewed the leases ``held`` of ``keys``: stop the others, and the
        attempts whose cancel was asked."""
        for key in keys:
            rec = self._executor.running.get(key)
            if key in held:
                if rec is not None:
                    rec.lease_until = max(rec.lease_until, sent + self._lease)
            else:
                self._executor.stop_job(key, "lease_lost")
        for key in cancels:
            self._executor.stop_job(key, "cancel")

    async def beat(self, tx: Tx) -> None:
        """Write or renew this worker's row in the registry of workers (every heartbeat)."""
        await registry.beat(tx, self._name, self._bindings, self._executor.concurrency, self._lease / 3,
                            self._clock.now())

    async def _watch(self) -> None:
        """Stop every attempt whose lease this worker could not renew before it expired: the job may
        be reaped and started elsewhere from then on, and two live attempts of one job must never run."""
        running = self._executor.running
        while True:
            now = time.monotonic()
            for rec in list(running.values()):
                if rec.lease_until <= now and rec.stop_reason is None:
                    log.warning("job %d attempt %d: lease not renewed in time; stopping it", *rec.key)
                    self._executor.stop_job(rec.key, "lease_lost")
            live = [r.lease_until for r in running.values() if r.stop_reason is None]
            wait = self._lease / 3 if not live else max(0.01, min(self._lease / 3, min(live) - now))
            await asyncio.sleep(wait)
