"""A worker's shutdown: :meth:`~jobloom.engine.worker.Worker.stop`, the grace period in which running
jobs may finish, the interruption of the rest, the release of claimed jobs that never started, the
last report of outcomes and the removal of the worker's row from the registry; and the abandon of a
shutdown still held up ``ABANDON_MARGIN`` seconds after the grace period (the leases of what it could
not report expire, and the reaper handles those jobs)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobloom.engine import coordinator, registry
from jobloom.engine.running import Key
from jobloom.engine.worker.completer import Completer
from jobloom.engine.worker.cycle import Cycle
from jobloom.engine.worker.executor import Executor
from jobloom.engine.worker.leases import Leases
from jobloom.engine.worker.shared import Clock, Stopping, Wakes
from jobloom.store.base import Store, Tx

if TYPE_CHECKING:
    from jobloom.engine.host import Host

log = logging.getLogger("jobloom.worker")
ABANDON_MARGIN = 2.0  # seconds after the grace period at which a stuck shutdown is abandoned


@dataclass
class Stopped:
    """What a worker's shutdown did with the jobs it held, as the store holds it afterwards."""

    interrupted: int = 0
    """Attempts stopped at the end of the grace period (or at once, by :meth:`Shutdown.stop_now`) and
    reported ``lost``: retried after their backoff, or ``stalled`` if at most once."""
    released: int = 0
    """Jobs claimed that never started, given back (``queued`` again, no attempt spent)."""
    left_running: int = 0
    """Sync jobs in threads that could not be stopped: ``running`` in the store until their leases expire."""
    unreported: int = 0
    """Outcomes the store could not take before the worker stopped: ``running`` until their leases expire."""


class Shutdown:
    """The shutdown sequence of a worker: its stop, the grace period, and what it does with the jobs left."""

    def __init__(self, app: Host, name: str, *, grace: float, executor: Executor, completer: Completer,
                 cycle: Cycle, leases: Leases, clock: Clock, stopping: Stopping, wakes: Wakes) -> None:
        self._app = app
        self._name = name
        self.grace = grace
        self._executor = executor
        self._completer = completer
        self._cycle = cycle
        self._leases = leases
        self._clock = clock
        self._stopping = stopping
        self._wakes = wakes
        self.stopped = Stopped()
        """What the shutdown did with the jobs the worker held."""
        self.abandoned = False
        """Whether the shutdown was abandoned (held up past the grace period)."""
        self._main: asyncio.Task[None] | None = None

    def started(self, main: asyncio.Task[None] | None) -> None:
        """The worker's loop runs on ``main``: the task a stuck shutdown cancels."""
        self._main = main
        if self._stopping.requested:  # stopped before it started
            asyncio.get_running_loop().call_later(self.grace + ABANDON_MARGIN, self._abandon)

    def stop(self) -> None:
        """Ask the worker to stop claiming and shut down gracefully, within its grace period.

        Whatever still holds the shutdown up ``ABANDON_MARGIN`` seconds after the grace period (a
        store that does not answer, a job that ignores cancellation) is abandoned: the worker returns,
        and the leases of the jobs it could not report expire (the reaper then handles them)."""
        if self._stopping.requested:
            return
        self._stopping.requested = True
        self._stopping.deadline = time.monotonic() + self.grace
        self._wakes.all()
        if self._main is not None:
            self._main.get_loop().call_later(self.grace + ABANDON_MARGIN, self._abandon)

    def stop_now(self) -> None:
        """Stop at once (a second Ctrl-C): running jobs are interrupted now instead of at the end of the
        grace period, as the grace period's end would (each reported ``lost``: retried by its backoff, or
        ``stalled`` if at most once), claimed jobs that never started are released, and the worker returns.
        A sync job in a thread cannot be interrupted: it is left running, unreported, and its lease
        expires (the reaper then handles its job). Whatever still holds the stop up ``ABANDON_MARGIN``
        seconds later is abandoned."""
        self.stop()
        self._stopping.now_requested = True
        self._stopping.deadline = time.monotonic()
        self._wakes.loop.set()
        if self._main is not None:
            self._main.get_loop().call_later(ABANDON_MARGIN, self._abandon)

    def _abandon(self) -> None:
        if self._main is not None and not self._main.done():
            self.abandoned = True
            self._completer.closed = True
            log.error("worker %s did not stop within its grace period (%.1f s): abandoning %d running job(s) "
                      "and %d unreported outcome(s); their leases will expire", self._name, self.grace,
                      len(self._executor.running), len(self._completer.outcomes))
            self._main.cancel()

    async def _interrupt(self) -> set[Key]:
        """Stop every running attempt (those not begun are cancelled) and wait for them to end, except
        sync jobs in threads, which cannot be stopped; the attempts stopped and ended."""
        running = self._executor.running
        stopped: set[Key] = set()
        for key, rec in list(running.items()):
            if rec.started:
                self._executor.stop_job(key, "shutdown")
                stopped.add(key)
            else:
                self._executor.cancel(rec)
        # a sync thread cannot be stopped: its job is not reported while it runs; when this process
        # exits its lease expires and the reaper handles the job (retried, or stalled if at most once)
        hung = [r.claimed.id for r in running.values() if r.sync is not None and not r.sync.stoppable
                and not r.sync.finished]
        if hung:
            stopped -= {k for k in stopped if k[0] in hung}
            self.stopped.left_running = len(hung)
            log.warning("sync job(s) %s still running in threads at the stop: not reported (the store "
                        "shows them running); their leases will expire and the reaper handles them", hung)
        tasks = [r.task for r in running.values() if r.task is not None and r.claimed.id not in hung]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        return stopped

    async def _give_back(self, store: Store, unstarted: list[tuple[int, int, str]], deadline: float) -> None:
        """Release the claimed jobs that never started (``queued`` again, no attempt spent)."""
        self._completer.drop({(j, a) for j, a, _ in unstarted})

        async def work(tx: Tx) -> int:
            return await coordinator.release(tx, self._name, unstarted, self._clock.now())

        try:
            async with asyncio.timeout(max(0.5, deadline + ABANDON_MARGIN / 2 - time.monotonic())):
                self.stopped.released = await store.transact(work)
        except Exception as exc:
            log.warning("could not give back %d unstarted job(s) (%s: %s); their leases will expire",
                        len(unstarted), type(exc).__name__, exc)

    async def _finish_within_grace(self) -> None:
        """Let running jobs finish within the grace period, reporting them as they end."""
        kick = self._wakes.loop
        while self._executor.running and time.monotonic() < (deadline := self._stopping.deadline or 0.0):
            kick.clear()  # stop_now() moves the deadline
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    await kick.wait()
            if self._completer.outcomes:
                await self._cycle.run_with_retry(claim=False)

    async def run(self) -> None:
        """Let running jobs finish within the grace period; interrupt the rest; report everything."""
        if not self._stopping.requested:
            self.stop()
        await self._finish_within_grace()
        deadline = self._stopping.deadline
        assert deadline is not None
        unstarted = [(r.claimed.id, r.claimed.attempt, r.claimed.binding)
                     for r in self._executor.running.values() if not r.started]
        interrupted = await self._interrupt()
        store = await self._app.store()
        if unstarted:
            await self._give_back(store, unstarted, deadline)
        if self._completer.outcomes:
            await self._cycle.run_with_retry(claim=False)
        self._completer.closed = True  # an attempt that ends from here on is never reported, so never logged as if
        unreported = set(self._completer.pending())
        self.stopped.interrupted = len(interrupted - unreported)
        if unreported:
            self.stopped.unreported = len(unreported)
            log.warning("could not report %d outcome(s) before stopping (jobs %s): the store shows them running "
                        "until their leases expire; the reaper then handles them", len(unreported),
                        sorted({j for j, _ in unreported}))
        # the registry row goes with the worker, within what is left of the stop's budget (a store that
        # does not answer leaves it to be pruned as stale); the heartbeats stop first, since one that
        # committed after the row's removal would write it again
        budget = min(1.0, deadline + ABANDON_MARGIN - time.monotonic())
        if budget > 0 and not self.abandoned:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(budget):
                    await store.notify()
                    await self._leases.halt()
                    await store.transact(lambda tx: registry.forget(tx, self._name))
