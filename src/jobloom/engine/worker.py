"""The worker runtime: claim jobs from the coordinators, run performers, report outcomes in batches.

One loop per process, driven by one timer: it sleeps until the earliest of the next due moment
(a scheduled job, a lease to reap, a rate token), a wake-up from another process, or a finished job,
then runs one *cycle*: a single transaction that reports finished attempts, reaps expired leases,
promotes due jobs and claims up to the free capacity.

Housekeeping (schedules, run deadlines, retention, the projector) runs on a task of its own, so a
worker that never runs out of jobs still fires its schedules on time.

Running work is keyed by (job id, attempt): a worker may hold a new attempt of a job whose old
attempt it has not finished reporting. Each attempt holds a lease that the worker renews; an
attempt whose lease the worker could not renew before it expired is stopped by the worker itself
(another worker may reap the job once the lease is gone). A cycle that fails for a reason that is
not transient (bad data in one outcome) is taken apart: each outcome is reported on its own, and
one that cannot be stored ends its job with an error that says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from jobloom.core.errors import InvalidOption, StoreError
from jobloom.core.retrying import Delays
from jobloom.engine import coordinator, logs, reporting, runners
from jobloom.engine.dispatch import Expected, paced
from jobloom.engine.execution import Execution
from jobloom.engine.housekeeper import run_due
from jobloom.engine.jobs import CycleReads, Outcome
from jobloom.engine.leases import LeaseKeeping
from jobloom.engine.links import Links
from jobloom.engine.pacing import Pacing, Rotation
from jobloom.engine.performer import check_local
from jobloom.engine.progress import ProgressBuffer
from jobloom.engine.push import PushClient
from jobloom.engine.running import CycleAsk, CycleResult, Key, Running, worker_name
from jobloom.engine.shutdown import ABANDON_MARGIN, Shutdown, Stopped
from jobloom.store.base import Store, Tx, Wakeups

if TYPE_CHECKING:
    from jobloom.engine.host import Host

log = logging.getLogger("jobloom.worker")
IDLE_CAP = 5.0  # an idle worker re-checks at least this often, whatever it was told
DEFAULT_CONCURRENCY = 100
"""Jobs at once per worker process by default. An async job waiting for I/O costs a task (a few KB)
and no thread, and each cycle claims up to the free slots: 100 lets one cycle claim a full batch."""
DEFAULT_SYNC_CONCURRENCY = 16
"""Of those, jobs of sync performers at once by default: each holds a thread (or a child process)."""


class Worker(Execution, LeaseKeeping, Shutdown):
    """Runs an app's performers in this process, at most ``concurrency`` jobs at once, of which at
    most ``sync_concurrency`` of sync performers (a plain ``def perform``: a thread or a child process each).

    Defaults: 100 jobs at once, at most 16 of them sync (:data:`DEFAULT_CONCURRENCY`,
    :data:`DEFAULT_SYNC_CONCURRENCY`); a ``concurrency`` given without ``sync_concurrency`` applies to
    sync performers too.
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
        for option, value in (("concurrency", concurrency), ("sync_concurrency", sync_concurrency)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InvalidOption(option, value, "a whole number of at least 1 (jobs at once per worker process)")
        self.concurrency = DEFAULT_CONCURRENCY if concurrency is None else concurrency
        if sync_concurrency is None:
            sync_concurrency = DEFAULT_SYNC_CONCURRENCY if concurrency is None else concurrency
        self.sync_concurrency = min(sync_concurrency, self.concurrency)
        self.bindings = list(bindings) if bindings else [
            *(b for b, s in app.specs.items() if s.remote is None), *app.hooks.internal_bindings]
        for b in self.bindings:
            if b not in app.hooks.internal_bindings:
                check_local(app.spec(b), app.signing_secret)
        # bindings whose jobs take a thread or a child process: they share the sync_concurrency slots
        self._sync_bindings = frozenset(
            b for b in self.bindings if (spec := app.specs.get(b)) is not None and not spec.is_async)
        self.name = name or worker_name()
        self.grace = grace
        self.lease = app.lease
        self.running: dict[Key, Running] = {}
        self.outcomes: list[Outcome] = []
        self.attempts_run = 0
        self._kick = asyncio.Event()
        self._house_kick = asyncio.Event()
        self._stopping = False
        self._stop_deadline: float | None = None
        self._abandoned = False
        self.reports_closed = False
        self.stop_now_requested = False
        self.stopped = Stopped()
        self._main: asyncio.Task[None] | None = None
        self._rotation = Rotation(self.bindings)
        self._sync = runners.SyncRunner(app.specs)
        self._unsure = False
        self._batched = 0  # jobs running in batches beyond the first of each: they take no slot
        self._store: Store | None = None  # the store of the loop it runs on, once it runs
        self._links = Links(self.app.store)
        self._now = self._clock
        self._push: PushClient | None = None  # push performers' pooled HTTP client, made at first use
        self.next_due: float | None = None
        self._pacing = Pacing()
        self._expected = Expected()
        self.progress = ProgressBuffer()
        self.telemetry = app.telemetry
        self._failures = 0  # cycles failed in a row (the store lost), told to telemetry when it is back
        self.listed = True  # whether its heartbeats keep a row in the registry of workers (not a drain's)

    # -- running ----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Work until :meth:`stop`; then finish or release running jobs within the grace period."""
        self._main = asyncio.current_task()
        store = self._use_store(await self.app.store())
        if self._stopping:  # stopped before it started
            asyncio.get_running_loop().call_later(self.grace + ABANDON_MARGIN, self._abandon)
        await self.app.register_bindings(self.bindings)
        await store.transact(self._beat)
        wake = await store.wakeups()
        direct = wake.on_signal(self._woken)  # the listener wakes the loop itself: no task in between
        helpers = [asyncio.create_task(self._heartbeats()),
                   asyncio.create_task(self._lease_watch()), asyncio.create_task(self._housekeeping_loop()),
                   asyncio.create_task(self.progress.run(self.app.store, self.name))]
        if not direct:
            helpers.append(asyncio.create_task(self._listen(wake)))
        try:
            try:
                while not self._stopping:
                    result = await self._cycle_with_retry(claim=True)
                    if result is None:
                        continue
                    if result.claimed or self.outcomes:
                        await asyncio.sleep(0)  # let just-started jobs run before the next cycle
                        if self.outcomes or (result.claimed and self._free() > 0):
                            continue
                    if result.contended:  # a binding whose lock another worker held: at once, it first
                        continue
                    when = self._pacing.wake_at(result.next_due, result.token_at)
                    if when is not None and when <= self._now():
                        continue
                    if await self._sleep_until(when):
                        self._pacing.slept(when, result.token_at)
            finally:
                await self._shutdown()
        except asyncio.CancelledError:
            if not self._abandoned:
                raise
        finally:
            self.reports_closed = True
            for task in helpers:
                task.cancel()
            for rec in list(self.running.values()):
                if rec.sync is None:
                    self._cancel(rec)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(wake.close(), 1.0)
            self._sync.close()
            await self._close_push()
            logs.flush()

    async def drain(self) -> int:
        """Run every due job in-process until nothing is runnable or running, and the housekeepers due on
        the way; return the attempts run. :attr:`next_due` is then when a job is next due (or None)."""
        store = self._use_store(await self.app.store())
        await self.app.register_bindings(self.bindings)
        self.listed = False  # a drain is not a worker of the registry: its heartbeats renew leases only
        # as in a worker: leases renewed, an attempt whose lease could not be renewed stopped, progress written
        helpers = [asyncio.create_task(self._heartbeats()), asyncio.create_task(self._lease_watch()),
                   asyncio.create_task(self.progress.run(self.app.store, self.name))]
        made: list[bool] = []
        try:
            while True:
                made.clear()
                await run_due(self.app.housekeepers, store, now=self._now, stopping=lambda: False,
                              made_runnable=lambda: made.append(True))
                result = await self._cycle(claim=True)
                self.next_due = result.next_due
                if self.running:
                    await self._kick.wait()
                    self._kick.clear()
                    await asyncio.sleep(0)
                    continue
                if not result.claimed and not self.outcomes and not made and not result.contended:
                    break
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            self._sync.close()
            await self._close_push()
        return self.attempts_run

    async def _close_push(self) -> None:
        if self._push is not None:
            push, self._push = self._push, None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(push.aclose(), 1.0)

    # -- housekeeping -----------------------------------------------------------------------------

    async def _housekeeping_loop(self) -> None:
        """Run the app's housekeepers when they are due, beside the cycles (never behind them)."""
        while not self._stopping:
            due = await self._housekeeping()
            timeout = IDLE_CAP if due is None else max(0.0, min(IDLE_CAP, due - self._now()))
            if timeout > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._house_kick.wait()
            self._house_kick.clear()

    async def _housekeeping(self) -> float | None:
        """Run the housekeepers that are due; return the earliest next due moment of all."""
        return await run_due(self.app.housekeepers, await self.app.store(), now=self._now,
                             stopping=lambda: self._stopping, made_runnable=self._kick.set)

    # -- the cycle --------------------------------------------------------------------------------

    def _clock(self) -> float:
        """The store's clock before the worker runs (the store may not be open yet)."""
        store = self._store or self.app.store_if_open()
        return time.time() if store is None else store.now()

    def _use_store(self, store: Store) -> Store:
        """The store the worker runs on: its clock is now read directly (once per attempt and per cycle)."""
        self._store = store
        self._now = store.now
        return store

    def _free(self) -> int:
        return self.concurrency - len(self.running) + self._batched  # a batch takes one slot

    def _sync_free(self) -> int:
        """Free slots for sync performers' jobs (only computed for a worker that serves some)."""
        busy = sum(1 for r in self.running.values() if r.claimed.binding in self._sync_bindings)
        return self.sync_concurrency - busy

    def _woken(self) -> None:
        """Another process signalled (a job enqueued, a limit raised, a pause lifted): look now."""
        self._kick.set()
        self._house_kick.set()

    async def _listen(self, wake: Wakeups) -> None:
        while True:
            if await wake.wait(None):
                self._woken()

    async def _sleep_until(self, due: float | None) -> bool:
        """Sleep until ``due`` or a wake-up; True when the sleep lasted until ``due``."""
        timeout = IDLE_CAP if due is None else max(0.0, min(IDLE_CAP, due - self._now()))
        timed_out = False
        if timeout > 0:
            logs.flush()  # nothing to do for now: the buffered log lines go out
            try:
                async with asyncio.timeout(timeout):
                    await self._kick.wait()
            except TimeoutError:
                timed_out = due is not None and timeout < IDLE_CAP
        self._kick.clear()
        return timed_out

    def _transient(self, exc: BaseException) -> bool:
        if isinstance(exc, StoreError):  # unreachable, busy for too long, or a COMMIT of unknown outcome
            return True
        store = self.app.store_if_open()
        return store is not None and store.is_transient(exc)

    async def _cycle_with_retry(self, *, claim: bool) -> CycleResult | None:
        delays = Delays(0.05, 5.0)
        while True:
            try:
                if self._unsure:
                    await self._release_orphans()
                result = await self._cycle(claim=claim)
                if self._failures:
                    self.telemetry.store_back(self.name, self._failures)
                    self._failures = 0
                return result
            except Exception as exc:
                self._unsure = True  # a claim may have committed without our knowing
                self._failures += 1
                self.telemetry.store_failed(self.name, exc, self._failures == 1)
                if self._transient(exc):  # the store is unreachable or failing: keep outcomes, back off
                    log.warning("jobloom cycle failed (%s: %s); retrying in %.2f s", type(exc).__name__, exc,
                                delays.current)
                elif self.outcomes and await self._isolate_outcomes(exc):
                    delays.reset()
                    continue
                else:
                    log.error("jobloom cycle failed (%s: %s); retrying in %.2f s", type(exc).__name__, exc,
                              delays.current, exc_info=exc)
                if self._stopping and (not self.outcomes or self._past_deadline()):
                    return None
                await self._pause(delays.next())

    async def _isolate_outcomes(self, cause: BaseException) -> bool:
        """Report each pending outcome on its own (see :func:`~jobloom.engine.reporting.report_one_by_one`)."""
        return await reporting.report_one_by_one(await self.app.store(), self.outcomes, cause, now=self._now,
                                                 hooks=self.app.hooks, transient=self._transient)

    async def _release_orphans(self) -> None:
        """After a failed cycle, give back jobs claimed for this worker that it never received."""
        known = set(self.running) | {(o.job_id, o.attempt) for o in self.outcomes}  # finished, report pending
        await reporting.release_orphans(await self.app.store(), self.name, known, now=self._now)
        self._unsure = False

    async def _cycle(self, *, claim: bool) -> CycleResult:
        store = await self.app.store()
        outcomes = list(self.outcomes)
        free = self._free() if claim and not self._stopping else 0
        order = self._rotation.next()
        began = time.monotonic()  # the leases of jobs claimed now expire no earlier than began + lease
        cycle = CycleAsk(
            outcomes, free, self._sync_free() if free > 0 and self._sync_bindings else 0, order,
            watching=bool(self.running),
            progress=self.progress.take((o.job_id, o.attempt) for o in outcomes) if outcomes else [],
            # the candidates read ahead stand only if nothing this cycle writes before its dispatch can make
            # a job runnable: a flow job's outcome can (its run's next nodes), as can a reaped one
            prefetch=self._expected.prefetch(order, free + 16) if free > 0 and store.pipelines else None,
            flows=any(o.run_id is not None for o in outcomes),
        )
        cycle.token_wait = self._pacing.token_wait()
        cycle.aimed = self._pacing.take_aim()
        result = await store.transact(lambda tx: self._cycle_work(tx, cycle))
        for deferred in result.deferred:
            result.claimed.extend(deferred.jobs())
        self._pacing.cycle_done(cycle.aimed, result.decided_at, time.monotonic() - began - result.waited)
        self._rotation.contended(result.contended)
        self.telemetry.cycle(result.claimed, outcomes, result.reaped)
        applied = {id(o) for o in outcomes}
        self.outcomes[:] = [o for o in self.outcomes if id(o) not in applied]
        if result.notify:
            await store.notify()
        for key in result.cancels:
            self._stop_job(key, "cancel")
        self._start_claimed(result)
        return result

    async def _cycle_work(self, tx: Tx, cycle: CycleAsk) -> CycleResult:
        """One cycle's transaction: its reads, the outcomes reported, leases reaped, jobs promoted, then
        dispatch. Read in every try of the transaction: a store that retries it after a lost connection
        runs this again, and the leases of the jobs claimed then count from then."""
        res = CycleResult(began=time.monotonic())
        now = self._now()
        outcomes, free = cycle.outcomes, cycle.free
        released = 0
        reads = await coordinator.read_cycle(
            tx, now, reporting=[o.job_id for o in outcomes], worker=self.name, watching=cycle.watching,
            bindings=cycle.order if free > 0 else [], runs=[o.run_id for o in outcomes], prefetch=cycle.prefetch,
        )
        if cycle.prefetch is not None:
            self._expected.learn(reads.bindings)
        if outcomes:
            await self.progress.write(tx, self.name, cycle.progress)  # their last progress, while still running
            reported = await coordinator.report(tx, outcomes, now, hooks=self.app.hooks, locked=reads.locked)
            released = reported.released
        reaped = await coordinator.reap(tx, now, hooks=self.app.hooks, expired=reads.expired)
        if reaped:
            gone = set(reaped)
            res.reaped = [r.binding for r in reads.expired if r.id in gone]
        promoted = await coordinator.promote(tx, now, promoted=reads.promoted)
        res.notify = bool(reaped or promoted or released or (outcomes and free <= 0))
        res.cancels = reads.cancels
        token_at = await self._dispatch_all(tx, cycle, reads, now, res,
                                            prefetched=not (cycle.flows or reaped or released))
        res.token_at = res.next_due = token_at  # a worker that claimed other jobs still wakes for it
        if not res.claimed and not res.deferred:
            due = await coordinator.next_due(tx)
            moments = [m for m in (due, token_at) if m is not None]
            res.next_due = min(moments) if moments else None
        return res

    async def _dispatch_all(
        self, tx: Tx, cycle: CycleAsk, reads: CycleReads, now: float, res: CycleResult, *, prefetched: bool
    ) -> float | None:
        """Dispatch the cycle's bindings in turn while there is room; when a rate token is due next."""
        order = cycle.order
        room, sync_room = cycle.free, cycle.sync_free
        token_at: float | None = None
        # a cycle waits for no binding's lock once it holds one (any other is then only taken if free),
        # nor when it woke for a rate token: queueing for another binding's lock would make it late
        wait = cycle.aimed is None
        if cycle.free > 0 and len(order) > 1:
            order.sort(key=lambda b: paced(reads.bindings[b]))
        for binding in order:
            if room <= 0:
                break
            sync = binding in self._sync_bindings
            capacity = min(room, sync_room) if sync else room
            if capacity <= 0:
                continue
            got = await coordinator.dispatch(
                tx, binding, capacity=capacity, worker=self.name, now=now, lease=self.lease,
                binding_rows=reads.bindings[binding], clock=self._now, token_wait=cycle.token_wait,
                wait_for_lock=wait, prefetched=reads.candidates.get(binding) if prefetched else None, defer=True,
            )
            wait = wait and not got.locked
            n = res.add(binding, got)
            if sync:
                sync_room -= n
            room -= 1 if got.batch and got.claimed else n  # a batch: one slot of this worker
            if got.next_token_at is not None:
                token_at = got.next_token_at if token_at is None else min(token_at, got.next_token_at)
        return token_at

    def _start_claimed(self, result: CycleResult) -> None:
        """Start the jobs (and batches) a cycle claimed."""
        lease_until = result.began + self.lease
        if result.batches:
            in_batches = {c.id for batch in result.batches for c in batch}
            for batch in result.batches:
                self._start_batch(batch, lease_until)
            for claimed in result.claimed:
                if claimed.id not in in_batches:
                    self._start(claimed, lease_until)
            return
        for claimed in result.claimed:
            self._start(claimed, lease_until)
