"""A worker's executor: the attempts it runs, one task per attempt (one per batch of a batch performer),
their timeouts and stops, the runners of sync performers (a thread or a child process each) and the
pooled HTTP client of push performers; the outcome each attempt ends with goes to the completer.

An attempt leaves the running map only with its outcome: when its task's body ends, or, for a task
that ended without running it (stopped before its first step), from the task's done callback. The
executor counts the worker's slots: ``concurrency`` jobs at once (a batch takes one), of which at most
``sync_concurrency`` of sync performers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from jobloom.core import lifecycle
from jobloom.core.signals import Permanent
from jobloom.core.types import JobContext
from jobloom.engine import batches, reporting, runners
from jobloom.engine.calls import durable
from jobloom.engine.control import Control
from jobloom.engine.jobs import Claimed, Outcome
from jobloom.engine.links import Links
from jobloom.engine.progress import ProgressBuffer
from jobloom.engine.push import PushClient, give_client
from jobloom.engine.running import CycleResult, Key, Running
from jobloom.engine.telemetry import Telemetry
from jobloom.engine.worker.completer import Completer
from jobloom.engine.worker.shared import Clock

if TYPE_CHECKING:
    from jobloom.engine.host import Host
    from jobloom.engine.performer import Performer, PerformerSpec

log = logging.getLogger("jobloom.worker")


class Executor:
    """Runs the attempts a worker claimed and hands their outcomes to its :class:`Completer`."""

    def __init__(self, app: Host, name: str, *, concurrency: int, sync_concurrency: int, sync_bindings: frozenset[str],
                 completer: Completer, progress: ProgressBuffer, telemetry: Telemetry, clock: Clock,
                 wake: asyncio.Event) -> None:
        self._app = app
        self._name = name
        self.concurrency = concurrency
        self.sync_concurrency = sync_concurrency
        self.sync_bindings = sync_bindings
        """The bindings whose jobs take a thread or a child process: they share the ``sync_concurrency`` slots."""
        self._completer = completer
        self._progress = progress
        self._telemetry = telemetry
        self._clock = clock
        self._kick = wake  # the worker's loop: an attempt ended
        self.running: dict[Key, Running] = {}
        """The attempts it runs, by (job id, attempt)."""
        self.attempts_run = 0
        self._batched = 0  # jobs running in batches beyond the first of each: they take no slot
        self._sync = runners.SyncRunner(app.specs)
        self._push: PushClient | None = None  # push performers' pooled HTTP client, made at first use
        self._links = Links(app.store, app.spec)

    # -- slots --------------------------------------------------------------------------------------

    def free(self) -> int:
        """Free slots (a batch takes one)."""
        return self.concurrency - len(self.running) + self._batched

    def sync_free(self) -> int:
        """Free slots for sync performers' jobs (only computed for a worker that serves some)."""
        busy = sum(1 for r in self.running.values() if r.claimed.binding in self.sync_bindings)
        return self.sync_concurrency - busy

    # -- starting and stopping --------------------------------------------------------------------

    def start_claimed(self, result: CycleResult, lease: float) -> None:
        """Start the jobs (and batches) a cycle claimed; their leases run ``lease`` s from the cycle's start."""
        lease_until = result.began + lease
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

    def cancel_running(self) -> None:
        """Cancel every attempt that runs on a task (a sync job's thread or child is stopped through its run)."""
        for rec in list(self.running.values()):
            if rec.sync is None:
                self.cancel(rec)

    async def close(self) -> None:
        """Close the sync runners and the push client."""
        self._sync.close()
        if self._push is not None:
            push, self._push = self._push, None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(push.aclose(), 1.0)

    # -- attempts -----------------------------------------------------------------------------------

    def _supersede(self, key: Key) -> None:
        """Stop this worker's run of an attempt that it has just claimed again: that run's claim was lost
        with the server (the job went back to queued below it), and its report would be stale."""
        rec = self.running.get(key)
        if rec is not None:
            log.warning("job %d attempt %d: claimed again, its claim lost; stopping the earlier run", *key)
            self.stop_job(key, "lease_lost")
            if rec.timer is not None:  # it stops the attempt by key: left armed, it would stop the new run
                rec.timer.cancel()
                rec.timer = None

    def _start(self, claimed: Claimed, lease_until: float) -> None:
        key = (claimed.id, claimed.attempt)
        self._supersede(key)
        rec = self.running[key] = Running(claimed, lease_until, key)
        loop = asyncio.get_running_loop()
        rec.task = loop.create_task(self._execute(rec))
        if claimed.timeout is not None and ((spec := self._app.specs.get(claimed.binding)) is None or spec.is_async):
            # a sync job's clock starts with its thread or child process
            rec.timer = loop.call_at(loop.time() + claimed.timeout, self.stop_job, key, "timeout")

    def _start_batch(self, claims: list[Claimed], lease_until: float) -> None:
        """Start a batch performer's batch: one task for all its jobs, each job its own attempt."""
        recs = [Running(c, lease_until, (c.id, c.attempt), batch=len(claims)) for c in claims]
        task = asyncio.get_running_loop().create_task(self._execute_batch(recs))
        for rec in recs:
            rec.task = task
            self._supersede(rec.key)
            self.running[rec.key] = rec
        self._batched += len(recs) - 1
        task.add_done_callback(lambda _t: self._ended_unstarted(recs))
        if claims[0].timeout is not None:  # the timeout is the whole call's
            recs[0].timer = task.get_loop().call_later(claims[0].timeout, self.stop_job, recs[0].key, "timeout")

    async def _execute_batch(self, recs: list[Running]) -> None:
        spec = self._app.specs[recs[0].claimed.binding]
        by_id = {r.claimed.id: r for r in recs}
        for rec in recs:
            rec.started = True
        self.attempts_run += len(recs)
        tel = self._telemetry
        tokens, ended = None, tel.attempt_ended
        if tel.per_attempt:
            tokens = [tel.attempt_started(r.claimed, self._name) for r in recs]
        deadline = None if recs[0].claimed.timeout is None else time.time() + recs[0].claimed.timeout

        def context(c: Claimed) -> JobContext:
            return JobContext(c.id, c.binding, c.attempt, deadline, self._name, c.max_attempts, c.run_id, c.node,
                              self._app.spawn_child if c.run_id is None else self._app.hooks.spawner(c),
                              links=self._links, started_at=c.started_at)

        try:
            outcomes = await batches.run_batch(
                spec, [r.claimed for r in recs], worker=self._name, env=self._app.env, context=context,
                node_payload=self._app.hooks.node_payload, stopped=lambda c: by_id[c.id].stop_reason,
                now=self._clock.now, codec=self._app.codec, offload=self._app.offload)
        except BaseException as exc:  # jobloom's own failure around the call: every job fails this attempt
            kind, error, tb, *_ = reporting.ending_of(exc, None, None)
            finished = self._clock.now()
            outcomes = [Outcome(r.claimed.id, r.claimed.attempt, kind, self._name, r.claimed.started_at, finished,
                                error=error, traceback=tb, run_id=r.claimed.run_id) for r in recs]
        if recs[0].timer is not None:
            recs[0].timer.cancel()
        if tokens is not None:
            by_job = {o.job_id: o for o in outcomes}
            for rec, token in zip(reversed(recs), reversed(tokens), strict=True):  # tracing contexts unwind in order
                if (o := by_job.get(rec.claimed.id)) is not None:
                    ended(rec.claimed, o, token)
        self._completer.extend(outcomes)
        for rec in recs:
            if self.running.get(rec.key) is rec:
                del self.running[rec.key]
        self._batched -= len(recs) - 1
        self._kick.set()

    def _unreported(self, rec: Running, outcome: Outcome) -> None:
        """An attempt that ended after the worker stopped reporting: said as it is (not as an outcome)."""
        if self.running.get(rec.key) is rec:
            del self.running[rec.key]
        if rec.sync is not None and not rec.sync.finished:
            return  # a sync job left running in its thread, said so when the worker stopped
        log.warning("job_unreported job_id=%d attempt=%d ended=%s after the worker stopped: the store shows it "
                    "running until its lease expires, then the reaper retries it (stalled if at most once)",
                    outcome.job_id, outcome.attempt, outcome.kind,
                    extra={"event": "job_unreported", "job_id": outcome.job_id, "attempt": outcome.attempt,
                           "ended": outcome.kind, "worker": self._name})

    def cancel(self, rec: Running) -> None:
        """Cancel ``rec``'s task. A task cancelled before its first step never runs its body, so nothing
        in it would end the attempt: one not begun yet gets a done callback that does (a batch's task
        has one from the start). Attempts that begin end in their own body, so the common path pays
        for no callback."""
        task = rec.task
        if task is None:
            return
        if not rec.started and not rec.batch:
            task.add_done_callback(lambda _t: self._ended_unstarted([rec]))
        task.cancel()

    def _ended_unstarted(self, recs: list[Running]) -> None:
        """A task ended without its attempts' ending: stopped before it began (a task cancelled before its
        first step never runs its body: see :meth:`cancel`), or, for a batch, failed in jobloom's own
        code around the call. Report each attempt still held as the stop made it end (cancelled, timed
        out, lost) and let go of it: held, it would be heartbeated, and its job left running, for ever."""
        left = [r for r in recs if self.running.get(r.key) is r]
        if not left:
            return
        finished = self._clock.now()
        for rec in left:
            c = rec.claimed
            kind, error, *_ = reporting.ending_of(asyncio.CancelledError(), rec.stop_reason, c.timeout)
            log.warning("job %d attempt %d ended before it began (%s)", c.id, c.attempt, error)
            if rec.timer is not None:
                rec.timer.cancel()
            self._completer.add(Outcome(c.id, c.attempt, kind, self._name, c.started_at, finished, error=error,
                                         run_id=c.run_id))
            del self.running[rec.key]
        if left[0].batch and not left[0].started:
            self._batched -= len(recs) - 1
        self._kick.set()

    def _arm(self, rec: Running) -> None:
        """(Re)start a sync job's timeout clock: its thread, or its child process, has started."""
        if rec.timer is not None:
            rec.timer.cancel()
        if rec.claimed.timeout is not None:
            rec.timer = asyncio.get_running_loop().call_later(rec.claimed.timeout, self.stop_job, rec.key,
                                                              "timeout")

    def stop_job(self, key: Key, reason: str) -> None:
        """Stop the attempt ``key`` for ``reason`` ("cancel", "timeout", "shutdown" or "lease_lost")."""
        rec = self.running.get(key)
        if rec is not None and rec.task is not None and rec.stop_reason is None:
            rec.stop_reason = reason
            if rec.batch and reason in ("cancel", "lease_lost"):
                return  # one job of a batch: it ends so when the batch call returns; the others go on
            if rec.sync is not None:
                rec.sync.stop()  # kills a child process; a thread runs on, and its slot stays taken until it ends
            else:
                self.cancel(rec)

    async def _attempt(self, rec: Running, deadline: float | None) -> tuple[str | None, str | None]:
        """Run the attempt's performer: (the payload built for a flow node, the result as stored)."""
        c = rec.claimed
        spec = self._app.specs.get(c.binding)
        if spec is None:
            raise Permanent(f"this worker has no performer for binding {c.binding!r}")
        payload_json = None
        if c.node is not None and c.payload == "":
            payload_json = await self._app.hooks.node_payload(c)
        offload = self._app.offload
        raw = payload_json or self._decoded(c)
        if offload is not None:  # an offloaded payload is read from the blob store now (and decoded)
            raw = await offload.load(raw)
        payload = spec.load_payload(raw)
        performer = spec.cls()
        performer.ctx = JobContext(c.id, c.binding, c.attempt, deadline, self._name, c.max_attempts,
                                   c.run_id, c.node, self._app.spawn_child if c.run_id is None
                                   else self._app.hooks.spawner(c),
                                   Control(rec, self._progress, self._clock.now, sync=not spec.is_async),
                                   self._links, started_at=c.started_at)
        performer.env = self._app.env
        store = self._clock.store if self._clock.store is not None else await self._app.store()
        await durable(store, performer, self._app.spec, spec.version, offload)
        if spec.push:
            if self._push is None:
                self._push = PushClient(self._app.signing_secret or b"", self._app.specs)
            give_client(performer, self._push)
        value = await self._perform(rec, spec, performer, payload, raw)
        result = spec.dump_result(value)  # a flow's results stay in their rows: its nodes read them there
        return payload_json, result if offload is None or c.run_id is not None else await offload.put_opt(result)

    async def _perform(self, rec: Running, spec: PerformerSpec, performer: Performer[Any, Any], payload: Any,
                       payload_json: str) -> Any:
        """Call the performer, through the app's perform middleware: in this task for an async performer,
        around the wait for its thread or child process for a sync one."""
        async def call() -> Any:
            if spec.is_async:
                return await performer.perform(payload)
            rec.sync = self._sync.start(spec, performer, payload, payload_json, lambda: self._arm(rec))
            return await rec.sync.result()

        chain = self._app.middleware
        if not chain.performs:
            return await call()
        return await chain.perform(performer.ctx, payload, call)

    def _decoded(self, c: Claimed) -> str:
        """A claimed job's payload as JSON, decoded by the app's codec."""
        return self._app.codec.decode(c.payload, f"payload of job {c.id}")

    async def _execute(self, rec: Running) -> None:
        c = rec.claimed
        kind, result, error, tb, retry_after, wait = lifecycle.SUCCEEDED, None, None, None, None, None
        payload_json: str | None = None
        deadline = None if c.timeout is None else self._clock.now() + c.timeout
        tel = self._telemetry
        token, ended = None, None
        try:  # from its first step on, the body ends the attempt, whatever fails in it
            rec.started = True
            if tel.per_attempt:  # what ends the attempt is what was there when it started
                token, ended = tel.attempt_started(c, self._name), tel.attempt_ended
            self.attempts_run += 1
            if c.binding in self._app.hooks.internal_bindings:
                value = await self._app.hooks.run_node(c)
                result = None if value is None else json.dumps(value)
            else:
                payload_json, result = await self._attempt(rec, deadline)
        except BaseException as exc:  # how it ended; a SystemExit from a job fails the job, not the worker
            kind, error, tb, retry_after, wait = reporting.ending_of(exc, rec.stop_reason, c.timeout)
        if rec.timer is not None:
            rec.timer.cancel()
        finished = self._clock.now()
        outcome = Outcome(c.id, c.attempt, kind, self._name, c.started_at, finished, result, error, tb, retry_after,
                          payload_json, wait, c.run_id)
        if kind == lifecycle.SNOOZED and (spec := self._app.specs.get(c.binding)) is not None:
            outcome.max_snoozes = spec.max_snoozes
        if self._completer.closed:  # the worker has stopped: nothing reports this outcome, and the store
            self._unreported(rec, outcome)  # keeps the job running until its lease expires
            return
        self._completer.add(outcome)
        if self.running.get(rec.key) is rec:
            del self.running[rec.key]
        self._kick.set()
        if ended is not None:
            ended(c, outcome, token)
