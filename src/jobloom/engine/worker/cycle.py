"""A worker's claiming cycle: one transaction that reports the completer's outcomes, reaps expired
leases, promotes due jobs and claims up to the executor's free slots; and its retry, when the store
fails.

The cycle owns what it learns from one cycle to the next: its pacing (how early to wake for a rate
token, how long to wait for one under a binding's lock), the rotation of its bindings, and which
bindings' candidates it may read ahead. A cycle that fails for a reason that is not transient (bad
data in one outcome) is taken apart: each outcome is reported on its own, and one that cannot be
stored ends its job with an error that says why.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from jobloom.core.errors import StoreError
from jobloom.core.retrying import Delays
from jobloom.engine import coordinator, reporting
from jobloom.engine.dispatch import Expected, paced
from jobloom.engine.jobs import CycleReads, DeferredClaim
from jobloom.engine.pacing import Pacing, Rotation
from jobloom.engine.running import CycleAsk, CycleResult
from jobloom.engine.telemetry import Telemetry
from jobloom.engine.worker.completer import Completer
from jobloom.engine.worker.executor import Executor
from jobloom.engine.worker.shared import Clock, Stopping
from jobloom.store.base import Tx

if TYPE_CHECKING:
    from jobloom.engine.host import Host

log = logging.getLogger("jobloom.worker")


class Cycle:
    """The claiming cycle of a worker: what it reports, claims and starts, one transaction at a time."""

    def __init__(self, app: Host, name: str, *, lease: float, bindings: list[str], executor: Executor,
                 completer: Completer, telemetry: Telemetry, clock: Clock, stopping: Stopping) -> None:
        self._app = app
        self._name = name
        self._lease = lease
        self._executor = executor
        self._completer = completer
        self._telemetry = telemetry
        self._clock = clock
        self._stopping = stopping
        self._rotation = Rotation(bindings)
        self._served = frozenset(bindings)
        self._pacing = Pacing()
        self._expected = Expected()
        self._unsure = False  # a claim may have committed without our knowing
        self._failures = 0  # cycles failed in a row (the store lost), told to telemetry when it is back

    def wake_at(self, result: CycleResult) -> float | None:
        """When to run the next cycle after ``result``: a little before its next due moment, earlier for a
        rate token."""
        return self._pacing.wake_at(result.next_due, result.token_at)

    def slept(self, when: float | None, result: CycleResult) -> None:
        """The loop slept until ``when`` (see :meth:`wake_at`): the coming cycle may have woken for a token."""
        self._pacing.slept(when, result.token_at)

    def transient(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the store failing (unreachable, busy for too long, a COMMIT of unknown outcome)."""
        if isinstance(exc, StoreError):
            return True
        store = self._app.store_if_open()
        return store is not None and store.is_transient(exc)

    async def run_with_retry(self, *, claim: bool) -> CycleResult | None:
        """Run a cycle until one succeeds (backing off while the store fails); None when the worker stops
        meanwhile with nothing left to report, or past its grace period."""
        delays = Delays(0.05, 5.0)
        completer = self._completer
        while True:
            try:
                if self._unsure:
                    await self._release_orphans()
                result = await self.run(claim=claim)
                if self._failures:
                    self._telemetry.store_back(self._name, self._failures)
                    self._failures = 0
                return result
            except Exception as exc:
                self._unsure = True  # a claim may have committed without our knowing
                self._failures += 1
                self._telemetry.store_failed(self._name, exc, self._failures == 1)
                if self.transient(exc):  # the store is unreachable or failing: keep outcomes, back off
                    log.warning("jobloom cycle failed (%s: %s); retrying in %.2f s", type(exc).__name__, exc,
                                delays.current)
                elif completer.outcomes and await completer.isolate(exc, self.transient):
                    delays.reset()
                    continue
                else:
                    log.error("jobloom cycle failed (%s: %s); retrying in %.2f s", type(exc).__name__, exc,
                              delays.current, exc_info=exc)
                if self._stopping.requested and (not completer.outcomes or self._stopping.past_deadline()):
                    return None
                await self._stopping.pause(delays.next())

    async def _release_orphans(self) -> None:
        """After a failed cycle, give back jobs claimed for this worker that it never received."""
        known = set(self._executor.running) | set(self._completer.pending())  # finished, report pending
        await reporting.release_orphans(await self._app.store(), self._name, known, now=self._clock.now)
        self._unsure = False

    async def run(self, *, claim: bool) -> CycleResult:
        """One cycle: report the outcomes pending, claim up to the free slots (if ``claim``), start them."""
        store = await self._app.store()
        executor = self._executor
        outcomes, progress = self._completer.take()
        free = executor.free() if claim and not self._stopping.requested else 0
        order = self._rotation.next()
        began = time.monotonic()  # the leases of jobs claimed now expire no earlier than began + lease
        cycle = CycleAsk(
            outcomes, free, executor.sync_free() if free > 0 and executor.sync_bindings else 0, order,
            watching=bool(executor.running), progress=progress,
            # the candidates read ahead stand only if nothing this cycle writes before its dispatch can make
            # a job runnable: a flow job's outcome can (its run's next nodes), as can a reaped one
            prefetch=self._expected.prefetch(order, free + 16) if free > 0 and store.pipelines else None,
            flows=any(o.run_id is not None for o in outcomes),
        )
        cycle.token_wait = self._pacing.token_wait()
        cycle.aimed = self._pacing.take_aim()
        result = await store.transact(lambda tx: self._work(tx, cycle))
        for deferred in result.deferred:
            result.claimed.extend(deferred.jobs())
        self._pacing.cycle_done(cycle.aimed, result.decided_at, time.monotonic() - began - result.waited)
        self._rotation.contended(result.contended)
        if result.expired:
            self._telemetry.cycle(result.claimed, outcomes, result.reaped, result.expired)
        else:
            self._telemetry.cycle(result.claimed, outcomes, result.reaped)
        result.reported = len(outcomes)
        self._completer.applied(outcomes)
        if result.notify:
            await store.notify()
        for key in result.cancels:
            executor.stop_job(key, "cancel")
        executor.start_claimed(result, self._lease)
        return result

    async def run_direct(self, job_id: int, binding: str) -> CycleResult | None:
        """Claim the one job a wake-up named and start it, in a transaction that does nothing else (on
        PostgreSQL one round trip: ``BEGIN``, ``hold_dispatch``, the claim, ``COMMIT``). The claim holds
        only where a cycle's dispatch would claim that job first (see ``claim_direct``), and is tried only
        for a binding whose policy the last cycle read as needing no lock; None when nothing was claimed,
        and then a whole cycle looks. A failure is a cycle's: the next cycle first
        gives back what a claim of unknown outcome may have taken."""
        executor = self._executor
        if (self._unsure or self._stopping.requested or self._completer.outcomes or binding not in self._served
                or not self._expected.unlocked(binding)  # a limited binding: the statement would claim nothing
                or executor.free() <= 0 or (binding in executor.sync_bindings and executor.sync_free() <= 0)):
            return None
        store = await self._app.store()
        try:
            result = await store.transact(lambda tx: self._claim_direct(tx, job_id, binding))
            for deferred in result.deferred:
                result.claimed.extend(deferred.jobs())
        except Exception as exc:
            self._unsure = True
            log.warning("jobloom direct claim failed (%s: %s); a whole cycle follows", type(exc).__name__, exc)
            return None
        if not result.claimed:
            return None
        self._telemetry.cycle(result.claimed, ())
        executor.start_claimed(result, self._lease)
        return result

    async def _claim_direct(self, tx: Tx, job_id: int, binding: str) -> CycleResult:
        res = CycleResult(began=time.monotonic())  # read in every try, as a cycle's
        now = self._clock.now()
        later = await tx.claim_direct(
            {"id": job_id, "binding": binding, "worker": self._name, "lease_expires": now + self._lease, "now": now})
        res.deferred.append(DeferredClaim(later, now, 1))
        return res

    async def _work(self, tx: Tx, cycle: CycleAsk) -> CycleResult:
        """One cycle's transaction: its reads, the outcomes reported, leases reaped, jobs promoted, then
        dispatch. Read in every try of the transaction: a store that retries it after a lost connection
        runs this again, and the leases of the jobs claimed then count from then."""
        res = CycleResult(began=time.monotonic())
        now = self._clock.now()
        outcomes, free = cycle.outcomes, cycle.free
        hooks = self._app.hooks
        released = 0
        reads = await coordinator.read_cycle(
            tx, now, reporting=[o.job_id for o in outcomes], worker=self._name, watching=cycle.watching,
            bindings=cycle.order if free > 0 else [], runs=[o.run_id for o in outcomes], prefetch=cycle.prefetch,
        )
        self._expected.learn(reads.bindings)  # for the reads ahead, and for run_direct
        if outcomes:
            released = await self._completer.report(tx, outcomes, cycle.progress, now, reads.locked)
        reaped = await coordinator.reap(tx, now, hooks=hooks, expired=reads.expired)
        if reaped:
            gone = set(reaped)
            res.reaped = [r.binding for r in reads.expired if r.id in gone]
        promoted = await coordinator.promote(tx, now, promoted=reads.promoted)
        if await coordinator.expire(tx, now, reads.lapsed):
            res.expired = [r.binding for r in reads.lapsed]
        res.notify = bool(reaped or promoted or released or res.expired or (outcomes and free <= 0))
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
            sync = binding in self._executor.sync_bindings
            capacity = min(room, sync_room) if sync else room
            if capacity <= 0:
                continue
            got = await coordinator.dispatch(
                tx, binding, capacity=capacity, worker=self._name, now=now, lease=self._lease,
                binding_rows=reads.bindings[binding], clock=self._clock.now, token_wait=cycle.token_wait,
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
