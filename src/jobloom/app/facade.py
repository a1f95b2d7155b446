"""The application object: performers, the store, and the public async API (with a thin sync bridge)."""

from __future__ import annotations

import asyncio
import importlib
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from jobloom.app import actions, bulk, enqueueing, job_batches, offloading, reads, runtime
from jobloom.app import bindings as binding_ops
from jobloom.app import topics as topic_ops
from jobloom.app.bindings import BindingInfo
from jobloom.app.enqueueing import STREAM_CHUNK
from jobloom.app.offloading import DEFAULT_GRACE, DEFAULT_OFFLOAD_OVER
from jobloom.app.remote import RemoteOps
from jobloom.app.search import JobFilter, JobPage, search, start_id
from jobloom.core.codecs import Codec
from jobloom.core.extras import needs_extra
from jobloom.core.signing import secret_bytes
from jobloom.core.text import checked_id
from jobloom.core.types import Attempt, Batch, Clock, Job, Run, to_datetime
from jobloom.engine.dependencies import read_links
from jobloom.engine.enqueue import EnqueueOptions, EnqueueRequest, PerformerRef
from jobloom.engine.housekeeper import Housekeeper
from jobloom.engine.performer import Performer, PerformerSpec
from jobloom.engine.remote import RemoteBinding, RemoteJob
from jobloom.flows.api import FlowOps, register_flows
from jobloom.flows.flow import Flow
from jobloom.flows.hooks import FlowHooks
from jobloom.flows.stop import RunDeadlines
from jobloom.housekeeping.retention import RetentionKeeper
from jobloom.housekeeping.stats import Projector, read_stats
from jobloom.schedules.api import DEFAULT, ScheduleInfo, ScheduleOps, check_schedules
from jobloom.schedules.schedule import Schedule
from jobloom.store import Store
from jobloom.store.blobs import BlobStore

T = TypeVar("T")
Hook = Callable[[], Awaitable[None] | None]


class App:
    """A jobloom application: ``App("sqlite:///jobloom.db", performers=[...], env=...)``.

    Every option is described in docs/reference/configuration.md: ``lease`` (seconds a worker's lease on a
    job lasts between heartbeats), ``performers`` (``RemoteBinding``s too), ``flows``, ``schedules``,
    ``auto_migrate`` (on by default on SQLite only), ``signing_secret`` (``HttpPerformer`` requests),
    ``clock`` (``jobloom.testing.TestClock`` in tests), ``middleware`` (the first outermost), ``codec``
    (``jobloom.codecs.Encrypted``), ``blobs`` with ``offload_over`` and ``blob_grace``, and the store's
    own options; a keyword that neither the app nor its store takes is refused, naming it.
    """

    def __init__(
        self,
        url: str = "sqlite:///jobloom.db",
        performers: Iterable[type[Performer[Any, Any]] | RemoteBinding] = (),
        env: Any = None,
        lease: float = 30.0,
        *,
        flows: Iterable[Flow] = (),
        schedules: Iterable[Schedule] = (),
        auto_migrate: bool | None = None,
        signing_secret: str | bytes | None = None,
        clock: Clock | None = None,
        middleware: Iterable[object] = (),
        codec: Codec | None = None,
        blobs: BlobStore | None = None,
        offload_over: int = DEFAULT_OFFLOAD_OVER,
        blob_grace: float = DEFAULT_GRACE,
        **store_options: Any,
    ) -> None:
        self.url = url
        self.env = env
        self.store_options = store_options
        self.signing_secret = None if signing_secret is None else secret_bytes(signing_secret)
        specs = runtime.performer_specs(performers)
        self.flows = register_flows(flows, {b for b, s in specs.items() if s.remote is None})
        self.hooks = FlowHooks(self)
        self.internal_bindings = list(self.hooks.internal_bindings)
        self.auto_migrate = url.startswith("sqlite:") if auto_migrate is None else auto_migrate
        self.runtime = rt = runtime.build(
            url, specs, self.hooks, self.internal_bindings, lease=lease, clock=clock, codec=codec,
            middleware=middleware, blobs=blobs, offload_over=offload_over, blob_grace=blob_grace,
            auto_migrate=self.auto_migrate, store_options=store_options)
        """What the app's parts work with (:class:`jobloom.app.runtime.Runtime`), built here once."""
        self.specs, self.codec, self.clock, self.lease = rt.specs, rt.codec, rt.clock, rt.lease
        self.middleware = rt.middleware
        """What runs around each enqueue and attempt (:mod:`jobloom.engine.middleware`)."""
        self.telemetry = rt.telemetry
        """What the engine tells about enqueues, cycles and attempts: logs, and metrics and traces once
        enabled (``jobloom.observe``)."""
        self.stores = rt.stores
        """The app's stores, one per event loop (:class:`jobloom.app.stores.Stores`)."""
        self.offload = rt.offload
        """Where payloads and results over ``offload_over`` bytes go (docs/how-to/large-payloads.md)."""
        self.startup_hooks: list[Hook] = []
        self.schedules = check_schedules(self, schedules)
        self._flow_ops = FlowOps(self)
        self._schedule_ops = ScheduleOps(self)
        self._remote = RemoteOps(rt)
        self.housekeepers: list[Housekeeper] = [RunDeadlines()] if self.flows else []
        self.housekeepers += [self._schedule_ops.keeper, RetentionKeeper(self.specs), Projector()]
        offloading.attach(self.offload, self.specs, self.housekeepers)
        if clock is not None:
            clock.attach(self)

    # -- set-up -------------------------------------------------------------------------------------

    def on_startup(self, fn: Hook) -> Hook:
        """Register a hook that each worker process runs once, before it takes jobs (a decorator)."""
        self.startup_hooks.append(fn)
        return fn

    def spec(self, performer: PerformerRef) -> PerformerSpec:
        """The spec of a performer class or binding name; unknown ones raise ``UnknownBinding``."""
        return self.runtime.spec(performer)

    async def store(self) -> Store:
        """The store for the running event loop, connected and checked."""
        return await self.runtime.store()

    def store_if_open(self) -> Store | None:
        """The store of the running event loop if one was opened (no I/O; None outside a loop)."""
        return self.stores.if_open()

    def now(self) -> float:
        """The store's clock (see :meth:`Store.now`), or this host's before any store was opened."""
        return self.stores.now()

    async def migrate(self) -> list[str]:
        """Apply missing migrations; return the names applied now."""
        return await self.stores.migrate()

    async def register_bindings(self, bindings: Iterable[str] | None = None) -> None:
        """Store the performers' limits with their coordinators, and their retention, which every app's
        pruning then applies to their jobs (done by workers at start)."""
        await binding_ops.register_bindings(self.runtime, None if bindings is None else list(bindings))

    async def set_limits(self, binding: str, **limits: Any) -> None:
        """Change a binding's limits at run time (``concurrency``, ``key_concurrency``, ``rate_limit``,
        ``priority_aging``); effective at the next dispatch. ``None`` lifts a limit; ``concurrency=0`` holds
        the binding's jobs queued (running ones finish) until it is raised, which wakes the workers."""
        await binding_ops.set_limits(self.runtime, binding, limits)

    async def reset_limits(self, binding: str, *limits: str) -> None:
        """Drop run-time overrides of ``binding`` set with :meth:`set_limits` (the ``limits`` named, every one
        when none is named): the code's values are in force again from the next dispatch."""
        await binding_ops.reset_limits(self.runtime, binding, tuple(limits))

    async def pause_binding(self, binding: str) -> BindingInfo:
        """Pause a binding in every worker: no job of it starts once this returns (running ones finish).
        Enqueue goes on, schedules keep making its jobs; they wait until :meth:`resume_binding`."""
        return await binding_ops.set_paused(self.runtime, binding, True)

    async def resume_binding(self, binding: str) -> BindingInfo:
        """Resume a paused binding: its waiting jobs start at the workers' next dispatch (they are woken)."""
        return await binding_ops.set_paused(self.runtime, binding, False)

    async def list_bindings(self) -> list[BindingInfo]:
        """Every binding: paused or not, the limits in force, its jobs by state (succeeded and skipped
        ones left out, as :meth:`counts` does), and the live workers that serve it."""
        return await binding_ops.list_bindings(self.runtime)

    # -- enqueue ------------------------------------------------------------------------------------

    async def enqueue(
        self,
        performer: PerformerRef,
        payload: Any,
        *,
        delay: float | None = None,
        run_at: datetime | float | None = None,
        priority: int | None = None,
        unique_key: str | None = None,
        concurrency_key: str | None = None,
        max_attempts: int | None = None,
        delivery: str | None = None,
        tags: Sequence[str] | None = None,
        meta: dict[str, Any] | None = None,
        debounce: float | None = None,
        debounce_key: str | None = None,
        debounce_max: float | None = None,
        expires_in: float | None = None,
        expires_at: datetime | float | None = None,
        depends_on: Sequence[int] | None = None,
        on_dependency_failure: str | None = None,
        connection: Any = None,
    ) -> Job:
        """Enqueue one job. Calls made in the same event-loop tick share one transaction.

        ``tags``: up to 16 short strings to search by (:meth:`list_jobs`); ``meta``: a small JSON object
        kept with the job (``Job.tags``, ``Job.meta``).

        ``depends_on``: ids of jobs that must succeed first: the job waits (``waiting``) until they all
        did, then runs; if one ends failed, cancelled or stalled, it is skipped with an error naming that
        job, unless ``on_dependency_failure="run"`` (it then runs once they all ended). An unknown or
        deleted job is refused; a finished one counts as it ended. Inside ``perform``,
        ``await self.ctx.dependencies()`` returns them.

        ``connection``: the caller's own open connection (a psycopg ``AsyncConnection`` on PostgreSQL,
        a ``sqlite3.Connection`` on SQLite): the job is inserted in the caller's transaction and exists
        if and only if the caller commits.

        ``debounce`` (seconds) with ``debounce_key``: the enqueues of one key within the window collapse
        into one job, which runs once ``debounce`` seconds pass without another, with the latest payload
        (``debounce_max``: at the latest that long after the first); each returns that job.
        ``expires_in`` (seconds from now) or ``expires_at``: a job not started by then never starts and
        ends ``expired`` (the performer's ``expires_in`` is the default).
        """
        options = enqueueing.options_of(delay, run_at, priority, unique_key, concurrency_key, max_attempts, delivery,
                                        tags, meta, debounce=debounce, debounce_key=debounce_key,
                                        debounce_max=debounce_max, expires_in=expires_in, expires_at=expires_at,
                                        depends_on=depends_on, on_dependency_failure=on_dependency_failure)
        return await enqueueing.enqueue(self.runtime, performer, payload, options, connection)

    async def enqueue_many(self, items: Sequence[EnqueueRequest | tuple[Any, ...]]) -> list[Job]:
        """Enqueue many jobs in one transaction: ``(performer, payload)`` tuples or ``EnqueueRequest``s.

        On a store that :attr:`~jobloom.store.Store.streams_inserts` (PostgreSQL), a large batch is
        validated and sent in chunks of :data:`STREAM_CHUNK`, the next chunk being validated while the
        server inserts the last; a bad item still leaves nothing enqueued."""
        return await enqueueing.enqueue_many(self.runtime, items)

    async def publish(self, topic: str, data: Any, *, connection: Any = None) -> list[Job]:
        """Publish ``data`` to ``topic``: one job of each binding whose ``triggers`` lists it, atomically.

        ``data`` is validated against every subscriber's payload type first; one that refuses it refuses
        the publish (nothing is enqueued, the error names the binding). A topic nobody subscribes to is
        accepted and enqueues nothing (``[]``). ``connection``: as for :meth:`enqueue`."""
        return await topic_ops.publish_many(self.runtime, [(topic, data)], connection)

    async def publish_many(self, items: Sequence[tuple[str, Any]], *, connection: Any = None) -> list[Job]:
        """:meth:`publish` each ``(topic, data)``, all the jobs in one transaction."""
        return await topic_ops.publish_many(self.runtime, items, connection)

    def topics(self) -> dict[str, list[str]]:
        """Each topic a binding of this app subscribes to, with its bindings (sorted)."""
        return topic_ops.topics(self.runtime)

    async def batch(self, items: Sequence[EnqueueRequest | tuple[Any, ...]], *,
                    on_complete: tuple[Any, Any] | None = None, on_success: tuple[Any, Any] | None = None) -> Batch:
        """Enqueue ``items`` (as in :meth:`enqueue_many`) as one batch, with its callbacks, atomically.

        ``on_complete=(performer, payload)`` is enqueued once, when the batch's last job ended, however
        they ended; ``on_success`` once if they all succeeded (else it is skipped). Each gets
        ``{"batch": id, "total", "succeeded", "failed", "cancelled"}`` merged into its payload (a JSON
        object). A job of the batch may add jobs to it while it runs: ``self.ctx.batch.add([...])``."""
        return await job_batches.batch(self.runtime, items, on_complete, on_success)

    async def get_batch(self, batch_id: int) -> Batch:
        """The batch with that id and its counts now; ``BatchNotFound`` if there is none."""
        return await job_batches.get_batch(self.runtime, batch_id)

    async def spawn_child(self, parent_id: int, child_id: str, performer: PerformerRef, payload: Any,
                          **options: Any) -> Job:
        """Enqueue a child of job ``parent_id``, idempotent by ``child_id`` (``self.ctx.spawn`` calls this)."""
        return await enqueueing.spawn_child(self.runtime, parent_id, child_id, performer, payload, options)

    def enqueue_sync(self, performer: PerformerRef, payload: Any, *, connection: Any = None, **options: Any) -> Job:
        """:meth:`enqueue` for synchronous code (same arguments).

        ``connection``: the caller's own sync connection (psycopg ``Connection`` or ``sqlite3.Connection``):
        the job is inserted in the caller's transaction, in the calling thread, and exists if and only if
        the caller commits.
        """
        if connection is None:
            return self.run_sync(self.enqueue(performer, payload, **options))
        return enqueueing.enqueue_sync(self.runtime, performer, payload, connection, options)

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one of the app's coroutines from synchronous code, on the app's own loop thread."""
        return self.runtime.run_sync(coro)

    # -- reading and acting on jobs -----------------------------------------------------------------

    async def get_job(self, job_id: int) -> Job:
        """The job with that id; ``JobNotFound`` if there is none."""
        job = await reads.read_job(await self.store(), job_id)
        return job if self.offload is None else await self.offload.resolved(job)

    async def job_links(self, job_id: int) -> tuple[dict[int, str | None], dict[int, str | None]]:
        """The jobs that job ``job_id`` depends on, and (up to 100 of) its dependants: their states by id
        (None for one deleted since)."""
        await self.get_job(job_id)  # JobNotFound if there is none
        deps, dependants = await read_links(await self.store(), job_id)
        return {r.id: r.state for r in deps}, {r.id: r.state for r in dependants}

    async def list_jobs(
        self, state: str | Sequence[str] | None = None, binding: str | None = None, limit: int = 100,
        before: int | None = None, *, tags: Sequence[str] | None = None, unique_key: str | None = None,
        text: str | None = None, created_after: datetime | float | None = None,
        created_before: datetime | float | None = None, cursor: str | None = None, payload_text: str | None = None,
    ) -> JobPage:
        """A page of jobs, newest first, matching every filter given (see :class:`JobFilter`; ``tags``: all
        of them). Pass the page's ``next_cursor`` as ``cursor`` for the next page (``before``: ids below
        a job id). The page is a sequence of its jobs."""
        f = JobFilter(state, binding, tags, unique_key, text, created_after, created_before, payload_text)
        return await search(await self.store(), f, limit=limit, before=start_id(cursor, before))

    async def retry_many(self, filter: JobFilter) -> int:
        """Retry every failed, stalled or cancelled job matching ``filter`` (others are skipped), in short
        transactions of a chunk each; the number retried."""
        return await bulk.retry_many(await self.store(), filter)

    async def cancel_many(self, filter: JobFilter) -> int:
        """Cancel every unfinished job matching ``filter`` as :meth:`cancel` does (finished ones are
        skipped), a chunk per transaction; the number cancelled or, if running, asked to stop."""
        return await bulk.cancel_many(await self.store(), filter, hooks=self.hooks)

    async def delete_many(self, filter: JobFilter) -> int:
        """Delete every finished job matching ``filter`` with its history (unfinished ones are skipped),
        a chunk per transaction; the number deleted."""
        return await bulk.delete_many(await self.store(), filter, offload=self.offload)

    async def delete(self, job_id: int) -> None:
        """Delete one finished job with its history (``InvalidTransition`` if it is not finished: cancel it
        first; ``JobNotFound`` if there is none)."""
        await bulk.delete_one(await self.store(), checked_id(job_id), self.offload)

    async def counts(self, *, finished: bool = False) -> dict[str, dict[str, int]]:
        """Number of jobs per binding and state (states with no jobs are left out).

        By default succeeded and skipped jobs, most of the history, are not counted: the other states
        are each read from an index, so the cost follows the active and failed jobs, however long the
        history. ``finished=True`` counts succeeded and skipped jobs too, reading every job."""
        return await reads.count_jobs(await self.store(), finished=finished)

    async def attempts(self, job_id: int) -> list[Attempt]:
        """Every attempt of a job, oldest first; a running attempt is shown with no outcome yet."""
        return await reads.read_attempts(await self.store(), job_id)

    async def cancel(self, job_id: int) -> Job:
        """Cancel a job: at once unless running; a running job's worker is told and cancels its task."""
        return await actions.cancel(await self.store(), job_id, hooks=self.hooks)

    async def retry(self, job_id: int) -> Job:
        """Queue a ``failed``, ``stalled`` or ``cancelled`` job again; its history is kept."""
        return await actions.retry(await self.store(), job_id)

    async def wait(self, job_id: int, timeout: float | None = None, *, poll: float = 0.05) -> Job:
        """Wait until the job is finished and return it; ``WaitTimeout`` after ``timeout`` seconds."""
        job = await reads.wait_for(await self.store(), job_id, timeout, poll=poll)
        return job if self.offload is None else await self.offload.resolved(job)

    async def drain(self, *, bindings: Iterable[str] | None = None, concurrency: int = 32) -> int:
        """Run every due job in-process until none is runnable; return how many attempts ran.

        For users' own tests: ``await app.drain()`` after enqueueing, then assert on results.
        """
        from jobloom.engine.worker import Worker

        worker = Worker(self, concurrency=concurrency, bindings=bindings)
        return await worker.drain()

    async def close(self) -> None:
        """Close the store of the running loop (and the sync bridge)."""
        await self.stores.close()

    def close_sync(self) -> None:
        """Stop the sync bridge's loop thread, if it was started."""
        bridge = self.runtime.bridge
        if bridge.started:
            bridge.run(self.close())
            bridge.stop()

    # -- remote workers (the pull protocol: jobloom.app.remote) -------------------------------------

    async def remote_claim(self, worker: str, bindings: list[str], max: int, wait: float | None = None,
                           gone: asyncio.Event | None = None, *,
                           only: frozenset[str] | None = None) -> list[RemoteJob]:
        """Claim up to ``max`` jobs of remote ``bindings`` for ``worker``, waiting up to ``wait`` s for one;
        ``gone``, once set, ends the wait with nothing claimed (the worker's connection closed). Each job
        carries its ``claim`` secret, which its heartbeats and report present. ``only``: the bindings the
        caller may take (a binding-limited token's); another is refused (``ClaimRefused``)."""
        return await self._remote.claim(worker, bindings, max, wait, gone, only=only)

    @property
    def remote_claims_waiting(self) -> int:
        """How many long-poll claims (``remote_claim`` with ``wait``) of this app are waiting now for a job."""
        return self._remote.waiting

    async def remote_heartbeat(self, worker: str, jobs: list[tuple[int, int, str]], *,
                               only: frozenset[str] | None = None) -> list[tuple[int, int]]:
        """Renew the leases of ``worker``'s (job id, attempt, claim)s, never past an attempt's deadline; return
        the (job id, attempt)s it still holds and should run. ``ClaimRefused``: a wrong claim, nothing renewed."""
        return await self._remote.heartbeat(worker, jobs, only=only)

    async def remote_complete(self, worker: str, job_id: int, attempt: int, outcome: str, result: Any = None,
                              error: str | None = None, retry_after: float | None = None, *, claim: str,
                              only: frozenset[str] | None = None) -> bool:
        """Report how ``worker``'s attempt ended, with the attempt's ``claim`` secret; False (nothing changed)
        if the attempt no longer holds the job, ``ClaimRefused`` (nothing changed) for a wrong claim."""
        return await self._remote.complete(worker, job_id, attempt, outcome, result, error, retry_after,
                                           claim=claim, only=only)

    # -- flows --------------------------------------------------------------------------------------

    async def start(self, flow: Flow, input: Any, *, id: str | None = None, deadline: float | None = None) -> Run:
        """Start a run of ``flow`` with ``input``; the same ``id`` again returns the same run.

        ``deadline`` (seconds, a positive finite number; default: the flow's ``deadline``): past it, the
        run is stopped and fails (see docs/how-to/flows.md). An ``input`` function of a root node
        that raises refuses the run (``FlowError``); one of a later node fails that node when it would run.
        """
        return await self._flow_ops.start(flow, input, id=id, deadline=deadline)

    async def get_run(self, run_id: str) -> Run:
        """A run, with each node's state, attempts and result."""
        return await self._flow_ops.get_run(run_id)

    async def list_runs(self, flow: str | None = None, state: str | None = None, limit: int = 100, *,
                        before: str | None = None) -> list[Run]:
        """Runs, newest first, optionally filtered by flow and state; ``before``: the last run id of the page before."""
        return await self._flow_ops.list_runs(flow, state, limit, before)

    async def cancel_run(self, run_id: str) -> Run:
        """Cancel a run and its sub-flow runs: nodes that have not started are cancelled, running ones
        are asked to stop. The run is ``cancelling`` until none of its jobs runs, then ``cancelled``."""
        return await self._flow_ops.cancel_run(run_id)

    async def resume_run(self, run_id: str) -> Run:
        """Run a failed or cancelled run again, keeping the nodes that succeeded; its deadline (if it
        had one) is armed again: now plus the run's deadline length."""
        return await self._flow_ops.resume_run(run_id)

    async def send_event(self, job_id: int, name: str, data: Any = None) -> bool:
        """Deliver ``data`` to the job's ``wait_for_event(name)``; returns whether a waiting job was woken."""
        return await actions.send_event(await self.store(), job_id, name, data)

    # -- schedules and stats --------------------------------------------------------------------------

    async def add_schedule(self, schedule: Schedule, *, replace: bool = False) -> ScheduleInfo:
        """Add a schedule at run time: stored, so every worker of the store fires it (within seconds).

        Its payload must be data (a function cannot be stored), and its performer one of the app's.
        A schedule of that name already stored is refused unless ``replace=True`` (its state is kept).
        """
        return await self._schedule_ops.add_schedule(schedule, replace=replace)

    async def remove_schedule(self, name: str) -> None:
        """Remove a schedule added at run time (one declared with the app is paused instead)."""
        await self._schedule_ops.remove_schedule(name)

    async def pause_schedule(self, name: str) -> ScheduleInfo:
        """Stop firing a schedule (a job already made runs on) until :meth:`resume_schedule`."""
        return await self._schedule_ops.pause_schedule(name)

    async def resume_schedule(self, name: str) -> ScheduleInfo:
        """Fire a paused schedule again from its next tick (ticks while paused are not made up)."""
        return await self._schedule_ops.resume_schedule(name)

    async def trigger_schedule(self, name: str, payload: Any = DEFAULT) -> Any:
        """Run a schedule now, paused or not, whatever its overlap policy: returns the job (or flow run).
        ``payload``: the job's payload (or the run's input) for this once, instead of the schedule's."""
        return await self._schedule_ops.trigger_schedule(name, payload)

    async def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule: the app's and the stored ones, with next run, last run and last error."""
        return await self._schedule_ops.list_schedules()

    async def stats(self, binding: str | None = None, since: Any = None) -> Any:
        """Counts and run-time percentiles from the read model (see :func:`jobloom.housekeeping.stats.read_stats`)."""
        return await read_stats(await self.store(), binding=binding, since=since)

    # -- HTTP -----------------------------------------------------------------------------------------

    def asgi(self, **options: Any) -> Any:
        """Deprecated: use ``jobloom.web.asgi(app, ...)``, which takes the same options and returns the same
        ASGI application (the HTTP API at ``/v1``, the dashboard at ``/``).

        Kept for existing code; it loads :mod:`jobloom.web` by name when called, since the app is below the
        web stack and imports nothing of it."""
        warnings.warn("App.asgi() is deprecated: use jobloom.web.asgi(app, ...)", DeprecationWarning, stacklevel=2)
        with needs_extra("web", "App.asgi()"):
            web = importlib.import_module("jobloom.web")
        return web.asgi(self, **options)

    def __repr__(self) -> str:
        return f"App({self.url!r}, performers={sorted(self.specs)})"


__all__ = ["STREAM_CHUNK", "App", "EnqueueOptions", "EnqueueRequest", "JobFilter", "JobPage", "to_datetime"]


