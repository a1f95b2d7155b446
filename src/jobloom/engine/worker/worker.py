"""The worker: its parts, wired together, and the loop that drives them.

One loop per process, driven by one timer: it sleeps until the earliest of the next due moment
(a scheduled job, a lease to reap, a rate token), a wake-up from another process, or a finished job,
then runs one cycle (:class:`~jobloom.engine.worker.cycle.Cycle`). :meth:`Worker.drain` runs the same
parts in-process until nothing is runnable or running.

Housekeeping (schedules, run deadlines, retention, the projector) runs on a task of its own, so a
worker that never runs out of jobs still fires its schedules on time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from jobloom.core.errors import InvalidOption
from jobloom.core.tasks import cancel_and_wait
from jobloom.engine import logs
from jobloom.engine.housekeeper import run_due
from jobloom.engine.performer import check_local
from jobloom.engine.progress import ProgressBuffer
from jobloom.engine.running import Key, Running, worker_name
from jobloom.engine.worker.completer import Completer
from jobloom.engine.worker.cycle import Cycle
from jobloom.engine.worker.executor import Executor
from jobloom.engine.worker.leases import Leases
from jobloom.engine.worker.shared import Clock, Stopping, Wakes
from jobloom.engine.worker.shutdown import Shutdown, Stopped
from jobloom.store.base import Wakeups

if TYPE_CHECKING:
    from jobloom.engine.host import Host

log = logging.getLogger("jobloom.worker")

IDLE_CAP = 5.0  # an idle worker re-checks at least this often, whatever it was told
DEFAULT_CONCURRENCY = 100
"""Jobs at once per worker process by default. An async job waiting for I/O costs a task (a few KB)
and no thread, and each cycle claims up to the free slots: 100 lets one cycle claim a full batch."""
HOOKS_GRACE = 5.0
"""Seconds a stopping worker gives its lifecycle hooks still running (their rows bring back those cut off)."""
HELPERS_GRACE = 5.0
"""Seconds a stopping worker waits for its heartbeat, lease watch and other background tasks to end."""
DEFAULT_SYNC_CONCURRENCY = 16
"""Of those, jobs of sync performers at once by default: each holds a thread (or a child process)."""


def _slots(concurrency: int | None, sync_concurrency: int | None) -> tuple[int, int]:
    """The jobs at once, and of them the sync performers' jobs at once, for the options given."""
    for option, value in (("concurrency", concurrency), ("sync_concurrency", sync_concurrency)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InvalidOption(option, value, "a whole number of at least 1 (jobs at once per worker process)")
    total = DEFAULT_CONCURRENCY if concurrency is None else concurrency
    if sync_concurrency is None:
        sync_concurrency = DEFAULT_SYNC_CONCURRENCY if concurrency is None else concurrency
    return total, min(sync_concurrency, total)


class Worker:
    """Runs an app's performers in this process, at most ``concurrency`` jobs at once, of which at
    most ``sync_concurrency`` of sync performers (a plain ``def perform``: a thread or a child process each).

    Defaults: 100 jobs at once, at most 16 of them sync (:data:`DEFAULT_CONCURRENCY`,
    :data:`DEFAULT_SYNC_CONCURRENCY`); a ``concurrency`` given without ``sync_concurrency`` applies to
    sync performers too.

    Its parts: the :attr:`executor` runs the attempts, the :attr:`completer` keeps their outcomes until
    the :attr:`cycle` reports them (and claims more), :attr:`leases` renews their leases, and
    :attr:`shutdown` stops it.
    """

    def __init__(
        self,
        app: Host,
        *,
        concurrency: int | None = None,
        bindings: Iterable[str] | None = None,
        name: str | None = None,
        grace: float = 25.0,
        sync_concurrency: int | None = None,
    ) -> None:
        self.app = app
        total, sync = _slots(concurrency, sync_concurrency)
        self.bindings = list(bindings) if bindings else [
            *(b for b, s in app.specs.items() if s.remote is None), *app.hooks.internal_bindings]
        for b in self.bindings:
            if b not in app.hooks.internal_bindings:
                check_local(app.spec(b), app.signing_secret)
        self.name = name or worker_name()
        self.lease = app.lease
        self.telemetry = app.telemetry
        self.progress = ProgressBuffer()
        self.next_due: float | None = None
        """After :meth:`drain`: when a job is next due (or None)."""
        self._wakes = Wakes()
        self._idle = False  # asleep with nothing to do (a wake-up that names a job is then claimed directly)
        self._named_job: tuple[int, str] | None = None
        self._named_many = False
        self._stopping = Stopping()
        self.clock = Clock(app)
        self.completer = Completer(app, self.name, self.clock, self.progress)
        # bindings whose jobs take a thread or a child process: they share the sync_concurrency slots
        sync_bindings = frozenset(
            b for b in self.bindings if (spec := app.specs.get(b)) is not None and not spec.is_async)
        self.executor = Executor(app, self.name, concurrency=total, sync_concurrency=sync,
                                 sync_bindings=sync_bindings, completer=self.completer, progress=self.progress,
                                 telemetry=self.telemetry, clock=self.clock, wake=self._wakes.loop)
        self.leases = Leases(app, self.name, lease=self.lease, bindings=self.bindings, executor=self.executor,
                             completer=self.completer, progress=self.progress, clock=self.clock)
        self.cycle = Cycle(app, self.name, lease=self.lease, bindings=self.bindings, executor=self.executor,
                           completer=self.completer, telemetry=self.telemetry, clock=self.clock,
                           stopping=self._stopping)
        self.shutdown = Shutdown(app, self.name, grace=grace, executor=self.executor, completer=self.completer,
                                 cycle=self.cycle, leases=self.leases, clock=self.clock, stopping=self._stopping,
                                 wakes=self._wakes)

    # -- what the process sees ----------------------------------------------------------------------

    @property
    def concurrency(self) -> int:
        """Jobs at once (the executor's slots)."""
        return self.executor.concurrency

    @property
    def sync_concurrency(self) -> int:
        """Of those, jobs of sync performers at once."""
        return self.executor.sync_concurrency

    @property
    def grace(self) -> float:
        """Seconds running jobs may take to finish once the worker is stopped."""
        return self.shutdown.grace

    @property
    def running(self) -> dict[Key, Running]:
        """The attempts it runs, by (job id, attempt) (the executor's)."""
        return self.executor.running

    @property
    def attempts_run(self) -> int:
        """How many attempts it has run."""
        return self.executor.attempts_run

    @property
    def stopped(self) -> Stopped:
        """What its shutdown did with the jobs it held."""
        return self.shutdown.stopped

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopping.requested

    @property
    def stop_now_requested(self) -> bool:
        """Whether :meth:`stop_now` was called."""
        return self._stopping.now_requested

    def stop(self) -> None:
        """Stop claiming and shut down gracefully, within the grace period (see
        :meth:`~jobloom.engine.worker.shutdown.Shutdown.stop`)."""
        self.shutdown.stop()

    def stop_now(self) -> None:
        """Stop at once (see :meth:`~jobloom.engine.worker.shutdown.Shutdown.stop_now`)."""
        self.shutdown.stop_now()

    # -- running ----------------------------------------------------------------------------------

    def _start_parts(self) -> list[asyncio.Task[None]]:
        """Start the tasks beside the loop that a worker and a drain share: the leases and the progress writer."""
        self.leases.start()
        return [asyncio.create_task(self.progress.run(self.app.store, self.name))]

    async def run(self) -> None:
        """Work until :meth:`stop`; then finish or release running jobs within the grace period."""
        self.shutdown.started(asyncio.current_task())
        store = self.clock.use(await self.app.store())
        await self.app.register_bindings(self.bindings)
        await store.transact(self.leases.beat)
        wake = await store.wakeups()
        wake.on_job(self._named)  # before on_signal's: a wake-up that names a job tells it first
        direct = wake.on_signal(self._woken)  # the listener wakes the loop itself: no task in between
        helpers = [*self._start_parts(), asyncio.create_task(self._housekeeping_loop())]
        if not direct:
            helpers.append(asyncio.create_task(self._listen(wake)))
        try:
            try:
                await self._loop()
            finally:
                await self.shutdown.run()
        except asyncio.CancelledError:
            if not self.shutdown.abandoned:
                raise
        finally:
            self.completer.closed = True
            await self._stop_helpers([*helpers, *self.leases.stop()])
            self.executor.cancel_running()
            await self.completer.hooks.close(HOOKS_GRACE)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(wake.close(), 1.0)
            await self.executor.close()
            logs.flush()

    async def _loop(self) -> None:
        """Cycle until the worker is stopped, sleeping when there is nothing to do."""
        cycle, completer, executor = self.cycle, self.completer, self.executor
        while not self._stopping.requested:
            named, self._named_job = self._named_job, None
            if named is not None and await cycle.run_direct(*named) is not None:
                await asyncio.sleep(0)  # the job runs first; then a whole cycle (reports it, looks for more)
                continue
            result = await cycle.run_with_retry(claim=True)
            if result is None:
                continue
            if result.claimed or completer.outcomes:
                await asyncio.sleep(0)  # let just-started jobs run before the next cycle
                if completer.outcomes or (result.claimed and executor.free() > 0):
                    continue
            if result.contended:  # a binding whose lock another worker held: at once, it first
                continue
            when = cycle.wake_at(result)
            if when is not None and when <= self.clock.now():
                continue
            if await self._sleep_until(when):
                cycle.slept(when, result)

    async def drain(self) -> int:
        """Run every due job in-process until nothing is runnable or running, and the housekeepers due on
        the way; return the attempts run. :attr:`next_due` is then when a job is next due (or None)."""
        store = self.clock.use(await self.app.store())
        await self.app.register_bindings(self.bindings)
        self.leases.listed = False  # a drain is not a worker of the registry: its heartbeats renew leases only
        # as in a worker: leases renewed, an attempt whose lease could not be renewed stopped, progress written
        helpers = self._start_parts()
        kick = self._wakes.loop
        made: list[bool] = []
        try:
            while True:
                made.clear()
                await run_due(self.app.housekeepers, store, now=self.clock.now, stopping=lambda: False,
                              made_runnable=lambda: made.append(True))
                await self.completer.hooks.sweep()
                result = await self.cycle.run(claim=True)
                self.next_due = result.next_due
                if self.executor.running:
                    await kick.wait()
                    kick.clear()
                    await asyncio.sleep(0)
                    continue
                # an outcome reported may have made a job due at once (a retry or a snooze of 0 s, a caller
                # whose child ended before it suspended): the cycle after a report looks for it
                if not (result.claimed or result.reported or self.completer.outcomes or made or result.contended):
                    if not self.completer.hooks.running:
                        break
                    await self.completer.hooks.wait()  # a hook may enqueue jobs: look again after it

        finally:
            await self._stop_helpers([*helpers, *self.leases.stop()])
            await self.executor.close()
        return self.attempts_run

    async def _stop_helpers(self, helpers: list[asyncio.Task[None]]) -> None:
        """Stop the tasks beside the loop, and wait for them: a heartbeat left running would go on
        renewing leases, and this worker's row, after the worker has stopped."""
        if not await cancel_and_wait(helpers, timeout=HELPERS_GRACE):
            log.warning("worker %s: a background task did not stop within %.0f s of its cancel", self.name,
                        HELPERS_GRACE)

    # -- housekeeping and wake-ups ----------------------------------------------------------------

    async def _housekeeping_loop(self) -> None:
        """Run the app's housekeepers when they are due, beside the cycles (never behind them)."""
        kick = self._wakes.housekeeping
        while not self._stopping.requested:
            due = await run_due(self.app.housekeepers, await self.app.store(), now=self.clock.now,
                                stopping=lambda: self._stopping.requested, made_runnable=self._wakes.loop.set)
            await self.completer.hooks.sweep()  # lifecycle hooks whose worker died before they ended
            timeout = IDLE_CAP if due is None else max(0.0, min(IDLE_CAP, due - self.clock.now()))
            if timeout > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await kick.wait()
            kick.clear()

    def _named(self, job_id: int, binding: str) -> None:
        """A wake-up named the one job its commit enqueued: a worker that sleeps with nothing to do claims
        it directly (:meth:`Cycle.run_direct`) before it runs a whole cycle. A second job named in the
        same sleep, or one named while the worker is busy, is left to a whole cycle (it sees them all)."""
        if not self._idle:
            return
        if self._named_job is None and not self._named_many:
            self._named_job = (job_id, binding)
        else:
            self._named_job, self._named_many = None, True

    def _woken(self) -> None:
        """Another process signalled (a job enqueued, a limit raised, a pause lifted): look now."""
        self._wakes.all()

    async def _listen(self, wake: Wakeups) -> None:
        while True:
            if await wake.wait(None):
                self._woken()

    async def _sleep_until(self, due: float | None) -> bool:
        """Sleep until ``due`` or a wake-up; True when the sleep lasted until ``due``."""
        timeout = IDLE_CAP if due is None else max(0.0, min(IDLE_CAP, due - self.clock.now()))
        timed_out = False
        kick = self._wakes.loop
        if timeout > 0:
            logs.flush()  # nothing to do for now: the buffered log lines go out
            store = self.app.store_if_open()
            if store is not None:
                store.idle()  # and the store's upkeep runs, off the path of the next job
            self._named_job, self._named_many, self._idle = None, False, True
            try:
                async with asyncio.timeout(timeout):
                    await kick.wait()
            except TimeoutError:
                timed_out = due is not None and timeout < IDLE_CAP
            finally:
                self._idle = False
        kick.clear()
        return timed_out
