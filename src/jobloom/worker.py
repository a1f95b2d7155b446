"""The worker runtime: claim jobs from the coordinators, run performers, report outcomes in batches.

One loop per process, driven by one timer: it sleeps until the earliest of the next due moment
(a scheduled job, a lease to reap, a rate token), a wake-up from another process, or a finished job,
then runs one *cycle*: a single transaction that reports finished attempts, reaps expired leases,
promotes due jobs and claims up to the free capacity.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
import traceback
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import coordinator, flowexec, lifecycle
from .coordinator import Claimed, Outcome
from .errors import Permanent, Retry
from .flow import MAP_BINDING
from .steps import StepContext, Suspended
from .store.base import Tx, Wakeups
from .types import JobContext

if TYPE_CHECKING:
    from .app import App

log = logging.getLogger("jobloom.worker")
IDLE_CAP = 5.0  # an idle worker re-checks at least this often, whatever it was told


@dataclass(slots=True)
class _Running:
    claimed: Claimed
    task: asyncio.Task[None] | None = None
    started: bool = False
    stop_reason: str | None = None  # "cancel", "timeout", "shutdown" or "lease_lost"
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class _CycleResult:
    claimed: list[Claimed] = field(default_factory=list)
    cancels: set[int] = field(default_factory=set)
    next_due: float | None = None
    notify: bool = False


def worker_name() -> str:
    """A unique, readable worker id: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker:
    """Runs an app's performers in this process, at most ``concurrency`` jobs at once."""

    def __init__(
        self,
        app: App,
        *,
        concurrency: int = 16,
        bindings: Iterable[str] | None = None,
        name: str | None = None,
        grace: float = 25.0,
    ) -> None:
        self.app = app
        self.concurrency = concurrency
        self.bindings = list(bindings) if bindings else [*app.specs, *app.internal_bindings]
        for b in self.bindings:
            if b not in app.internal_bindings:
                app.spec(b)
        self.name = name or worker_name()
        self.grace = grace
        self.lease = app.lease
        self.running: dict[int, _Running] = {}
        self.outcomes: list[Outcome] = []
        self.attempts_run = 0
        self._kick = asyncio.Event()
        self._stopping = False
        self._rotation = 0
        self._executor: ThreadPoolExecutor | None = None
        self._contexts = flowexec.NodeContexts(app)
        self._unsure = False

    # -- running ----------------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopping

    def stop(self) -> None:
        """Ask the worker to stop claiming and shut down gracefully."""
        self._stopping = True
        self._kick.set()

    async def run(self) -> None:
        """Work until :meth:`stop`; then finish or release running jobs within the grace period."""
        store = await self.app.store()
        await self.app.register_bindings(self.bindings)
        wake = await store.wakeups()
        listener = asyncio.create_task(self._listen(wake))
        beats = asyncio.create_task(self._heartbeats())
        try:
            while not self._stopping:
                result = await self._cycle_with_retry(claim=True)
                if result is None:
                    continue
                if result.claimed or self.outcomes:
                    await asyncio.sleep(0)  # let just-started jobs run before the next cycle
                    if self.outcomes or (result.claimed and self._free() > 0):
                        continue
                due = await self._housekeeping(result.next_due)
                if due is not None and due <= time.time():
                    continue
                await self._sleep_until(due)
        finally:
            await self._shutdown()
            listener.cancel()
            beats.cancel()
            await wake.close()
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)

    async def drain(self) -> int:
        """Run every due job in-process until nothing is runnable or running; return attempts run."""
        await self.app.store()
        await self.app.register_bindings(self.bindings)
        while True:
            result = await self._cycle(claim=True)
            if self.running:
                await self._kick.wait()
                self._kick.clear()
                await asyncio.sleep(0)
                continue
            if not result.claimed and not self.outcomes:
                break
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        return self.attempts_run

    async def _housekeeping(self, due: float | None) -> float | None:
        """Run the housekeepers that are due; return the earliest next due moment of all.

        ``next_due`` is asked on every pass, so it must be cheap (kept in memory, refreshed on runs).
        """
        store = await self.app.store()
        for keeper in self.app.housekeepers:
            try:
                when = await keeper.next_due(self.app, time.time())
                if when is not None and when <= time.time():
                    if await keeper.run(self.app, time.time()):
                        await store.notify()
                    when = await keeper.next_due(self.app, time.time())
            except Exception as exc:
                log.warning("housekeeper %s failed (%s: %s)", keeper.name, type(exc).__name__, exc)
                when = time.time() + 1.0
            if when is not None:
                due = when if due is None else min(due, when)
        return due

    async def _release_orphans(self) -> None:
        """After a failed cycle, give back jobs claimed for this worker that it never received."""
        store = await self.app.store()
        known = set(self.running) | {o.job_id for o in self.outcomes}  # finished here, report pending

        async def work(tx: Tx) -> int:
            rows = await tx.fetch("running_of_worker", {"worker": self.name})
            orphans = [(r[0], r[1], r[2]) for r in rows if r[0] not in known]
            return await coordinator.release(tx, self.name, orphans, time.time()) if orphans else 0

        released = await store.transact(work)
        self._unsure = False
        if released:
            log.warning("released %d job(s) claimed during a failed cycle", released)
            await store.notify()

    def _free(self) -> int:
        return self.concurrency - len(self.running)

    async def _listen(self, wake: Wakeups) -> None:
        while True:
            if await wake.wait(None):
                self._kick.set()

    async def _sleep_until(self, due: float | None) -> None:
        timeout = IDLE_CAP if due is None else max(0.0, min(IDLE_CAP, due - time.time()))
        if timeout > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._kick.wait()
        self._kick.clear()

    # -- the cycle --------------------------------------------------------------------------------

    async def _cycle_with_retry(self, *, claim: bool) -> _CycleResult | None:
        delay = 0.05
        while True:
            try:
                if self._unsure:
                    await self._release_orphans()
                return await self._cycle(claim=claim)
            except Exception as exc:  # the store is unreachable or failing: keep outcomes, back off
                self._unsure = True  # a claim may have committed without our knowing
                log.warning("jobloom cycle failed (%s: %s); retrying in %.2f s", type(exc).__name__, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                if self._stopping and not self.outcomes:
                    return None

    async def _cycle(self, *, claim: bool) -> _CycleResult:
        store = await self.app.store()
        outcomes = list(self.outcomes)
        free = self._free() if claim and not self._stopping else 0
        order = self.bindings[self._rotation:] + self.bindings[: self._rotation]
        self._rotation = (self._rotation + 1) % max(1, len(self.bindings))
        watching = bool(self.running)

        async def work(tx: Tx) -> _CycleResult:
            now = time.time()
            res = _CycleResult()
            reads = await coordinator.read_cycle(
                tx, now, reporting=[o.job_id for o in outcomes], worker=self.name, watching=watching,
                bindings=order if free > 0 else [], runs=[o.run_id for o in outcomes],
            )
            if outcomes:
                await coordinator.report(tx, outcomes, now, locked=reads.locked)
            reaped = await coordinator.reap(tx, now, expired=reads.expired)
            promoted = await coordinator.promote(tx, now, promoted=reads.promoted)
            res.notify = bool(reaped or promoted or (outcomes and free <= 0))
            res.cancels = reads.cancels
            room = free
            token_at: float | None = None
            for binding in order:
                if room <= 0:
                    break
                got = await coordinator.dispatch(
                    tx, binding, capacity=room, worker=self.name, now=now, lease=self.lease,
                    binding_rows=reads.bindings[binding],
                )
                res.claimed.extend(got.claimed)
                room -= len(got.claimed)
                if got.next_token_at is not None:
                    token_at = got.next_token_at if token_at is None else min(token_at, got.next_token_at)
            if not res.claimed:
                due = await coordinator.next_due(tx)
                moments = [m for m in (due, token_at) if m is not None]
                res.next_due = min(moments) if moments else None
            return res

        result = await store.transact(work)
        del self.outcomes[: len(outcomes)]
        if result.notify:
            await store.notify()
        for job_id in result.cancels:
            self._stop_job(job_id, "cancel")
        for claimed in result.claimed:
            self._start(claimed)
        return result

    # -- jobs -------------------------------------------------------------------------------------

    def _start(self, claimed: Claimed) -> None:
        rec = _Running(claimed)
        self.running[claimed.id] = rec
        loop = asyncio.get_running_loop()
        rec.task = loop.create_task(self._execute(rec))
        if claimed.timeout is not None:  # one timer handle per job: cheaper than a timeout context
            rec.timer = loop.call_at(loop.time() + claimed.timeout, self._stop_job, claimed.id, "timeout")

    def _stop_job(self, job_id: int, reason: str) -> None:
        rec = self.running.get(job_id)
        if rec is not None and rec.task is not None and rec.stop_reason is None:
            rec.stop_reason = reason
            rec.task.cancel()

    async def _execute(self, rec: _Running) -> None:
        c = rec.claimed
        kind, result, error, tb, retry_after, wait = lifecycle.SUCCEEDED, None, None, None, None, None
        payload_json: str | None = None
        deadline = None if c.timeout is None else time.time() + c.timeout
        try:
            rec.started = True
            self.attempts_run += 1
            if c.binding in self.app.internal_bindings:
                value = await self._flow_node(c)
                result = None if value is None else json.dumps(value)
            else:
                spec = self.app.specs.get(c.binding)
                if spec is None:
                    raise Permanent(f"this worker has no performer for binding {c.binding!r}")
                if c.node is not None and c.payload == "":
                    payload_json = await flowexec.node_payload(self._contexts, c)
                payload = spec.load_payload(payload_json or c.payload)
                performer = spec.cls()
                performer.ctx = JobContext(c.id, c.binding, c.attempt, deadline, self.name, c.max_attempts,
                                           c.run_id, c.node, self.app.spawn_child)
                performer.env = self.app.env
                performer._steps = StepContext(await self.app.store(), c.id, c.attempt)
                if spec.is_async:
                    value = await performer.perform(payload)
                else:
                    value = await asyncio.get_running_loop().run_in_executor(
                        self._pool(), performer.perform, payload
                    )
                result = spec.dump_result(value)
        except Suspended as s:
            kind, retry_after, wait = lifecycle.SUSPENDED, s.wake_at, s.wait
        except asyncio.CancelledError:
            if rec.stop_reason == "cancel":
                kind, error = lifecycle.CANCELLED, "cancelled while running"
            elif rec.stop_reason == "timeout":
                kind, error = lifecycle.TIMEOUT, f"timed out after {c.timeout:g} s"
            else:
                kind, error = lifecycle.LOST, f"interrupted ({rec.stop_reason or 'task cancelled'})"
        except Retry as exc:
            kind, error, retry_after = lifecycle.RETRY, exc.reason, exc.after
        except Permanent as exc:
            kind, error, tb = lifecycle.PERMANENT, f"Permanent: {exc}", traceback.format_exc()
        except Exception as exc:
            kind, error, tb = lifecycle.FAILED, f"{type(exc).__name__}: {exc}", traceback.format_exc()
        if rec.timer is not None:
            rec.timer.cancel()
        finished = time.time()
        self.outcomes.append(Outcome(c.id, c.attempt, kind, self.name, c.started_at, finished, result, error, tb,
                                     retry_after, payload_json, wait, c.run_id))
        self.running.pop(c.id, None)
        self._kick.set()
        if log.isEnabledFor(logging.INFO):
            log.info(
                "job_outcome job_id=%d binding=%s attempt=%d outcome=%s duration_ms=%.1f%s",
                c.id, c.binding, c.attempt, kind, (finished - c.started_at) * 1000,
                f" error={error!r}" if error else "",
            )

    async def _flow_node(self, c: Claimed) -> Any:
        if c.binding == MAP_BINDING:
            return await flowexec.run_map(self._contexts, c)
        return await flowexec.run_subflow(self._contexts, c)

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="jobloom-job")
        return self._executor

    # -- leases -----------------------------------------------------------------------------------

    async def _heartbeats(self) -> None:
        interval = self.lease / 3
        while True:
            await asyncio.sleep(interval)
            # jobs that finished here but whose outcome is not reported yet keep their lease too
            ids = list(self.running) + [o.job_id for o in self.outcomes if o.job_id not in self.running]
            if not ids:
                continue
            try:
                store = await self.app.store()

                async def work(tx: Tx, ids: list[int] = ids) -> tuple[set[int], set[int]]:
                    return await coordinator.heartbeat(tx, self.name, ids, time.time(), self.lease)

                held, cancels = await store.transact(work)
            except Exception as exc:
                log.warning("heartbeat failed (%s: %s)", type(exc).__name__, exc)
                continue
            for job_id in ids:
                if job_id not in held:
                    self._stop_job(job_id, "lease_lost")
            for job_id in cancels:
                self._stop_job(job_id, "cancel")

    async def _shutdown(self) -> None:
        """Let running jobs finish within the grace period; interrupt the rest; report everything."""
        self._stopping = True
        deadline = time.monotonic() + self.grace
        while self.running and time.monotonic() < deadline:
            self._kick.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    await self._kick.wait()
            if self.outcomes:
                await self._cycle_with_retry(claim=False)
        unstarted = [(r.claimed.id, r.claimed.attempt, r.claimed.binding)
                     for r in self.running.values() if not r.started]
        for job_id, rec in list(self.running.items()):
            if rec.started:
                self._stop_job(job_id, "shutdown")
            elif rec.task is not None:
                rec.task.cancel()
        tasks = [r.task for r in self.running.values() if r.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if unstarted:
            released = {j for j, _, _ in unstarted}
            self.outcomes = [o for o in self.outcomes if o.job_id not in released]
            store = await self.app.store()

            async def work(tx: Tx) -> int:
                return await coordinator.release(tx, self.name, unstarted, time.time())

            await store.transact(work)
        if self.outcomes:
            await self._cycle_with_retry(claim=False)
        store = await self.app.store()
        await store.notify()
