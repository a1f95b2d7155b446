"""The application object: performers, the store, and the public async API (with a thin sync bridge)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from . import coordinator
from .client import DEFAULT_OPTIONS, EnqueueOptions, Enqueuer, build_job, insert_in
from .coordinator import NewJob
from .errors import JobloomError, JobNotFound, MigrationsMissing, StoreError, UnknownBinding, WaitTimeout
from .flow import Flow
from .flowapi import FlowsAPI, flow_bindings, register_flows
from .housekeeping import Housekeeper
from .performer import Performer, PerformerSpec, inspect_performer
from .records import attempt_from_row, backoff_json, job_from_row
from .retention import retention_json
from .schedule import Schedule
from .scheduling import SchedulingMixin
from .store import Store, open_store
from .store.base import Tx
from .store.sql import load_migrations
from .types import Attempt, Job, to_datetime

T = TypeVar("T")
PerformerRef = type[Performer[Any, Any]] | str
STREAM_CHUNK = 100
"""Jobs per statement of a large :meth:`App.enqueue_many`, validated while the store writes the last chunk."""
Hook = Callable[[], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class EnqueueRequest:
    """One item of :meth:`App.enqueue_many`."""

    performer: PerformerRef
    payload: Any
    options: EnqueueOptions = DEFAULT_OPTIONS


class _Core:
    """What an app holds per event loop: a connected store and its enqueue coalescer."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.enqueuer = Enqueuer(store)
        self.ready = asyncio.Lock()
        self.checked = False


class App(FlowsAPI, SchedulingMixin):
    """A jobloom application: ``App("sqlite:///jobloom.db", performers=[...], env=...)``.

    ``lease`` is the lease length in seconds: a worker heartbeats to keep its jobs' leases alive,
    and a lease that expires is reaped. On SQLite, missing migrations are applied at first use
    (``auto_migrate=True``); on PostgreSQL, ``jobloom migrate`` applies them and the app refuses a
    store that lacks any.
    """

    def __init__(
        self,
        url: str = "sqlite:///jobloom.db",
        performers: Iterable[type[Performer[Any, Any]]] = (),
        env: Any = None,
        lease: float = 30.0,
        *,
        flows: Iterable[Flow] = (),
        schedules: Iterable[Schedule] = (),
        auto_migrate: bool | None = None,
        **store_options: Any,
    ) -> None:
        self.url = url
        self.env = env
        from .options import finite

        self.lease = finite("lease", lease, minimum=0.0, above=True)
        self.store_options = store_options
        self.specs: dict[str, PerformerSpec] = {}
        for cls in performers:
            spec = inspect_performer(cls)
            self.specs[spec.binding] = spec
        self.flows = register_flows(flows, set(self.specs))
        self.internal_bindings = flow_bindings(self.flows)
        self.auto_migrate = url.startswith("sqlite:") if auto_migrate is None else auto_migrate
        self.startup_hooks: list[Hook] = []
        self.housekeepers: list[Housekeeper] = []
        if self.flows:
            from .flowrun import RunDeadlines

            self.housekeepers.append(RunDeadlines())
        self._init_scheduling(schedules)  # schedules, retention and the projector's housekeepers
        self._cores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Core] = weakref.WeakKeyDictionary()
        self._bridge: _SyncBridge | None = None
        self._last: tuple[weakref.ref[asyncio.AbstractEventLoop], _Core] | None = None

    # -- set-up -------------------------------------------------------------------------------------

    def on_startup(self, fn: Hook) -> Hook:
        """Register a hook that each worker process runs once, before it takes jobs (a decorator)."""
        self.startup_hooks.append(fn)
        return fn

    def spec(self, performer: PerformerRef) -> PerformerSpec:
        """The spec of a performer class or binding name; unknown ones raise ``UnknownBinding``."""
        name: str = performer if isinstance(performer, str) else str(
            getattr(performer, "binding", None) or getattr(performer, "__name__", repr(performer))
        )
        spec = self.specs.get(name)
        if spec is None or (not isinstance(performer, str) and spec.cls is not performer):
            raise UnknownBinding(name, list(self.specs))
        return spec

    async def store(self) -> Store:
        """The store for the running event loop, connected and checked."""
        return (await self._core()).store

    def store_if_open(self) -> Store | None:
        """The store of the running event loop if one was opened (no I/O; None outside a loop)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        core = self._cores.get(loop)
        return None if core is None else core.store

    def now(self) -> float:
        """The store's clock (see :meth:`Store.now`), or this host's before any store was opened."""
        store = self.store_if_open()
        if store is None:
            store = next((core.store for core in list(self._cores.values()) if core.checked), None)
        return time.time() if store is None else store.now()

    async def _core(self) -> _Core:
        loop = asyncio.get_running_loop()
        last = self._last
        if last is not None and last[0]() is loop:  # the common case: the same loop as last time
            return last[1]
        core = self._cores.get(loop)
        if core is None:
            core = self._cores[loop] = _Core(open_store(self.url, **self.store_options))
        if not core.checked:
            async with core.ready:
                if not core.checked:
                    await core.store.open()
                    await self._check_migrations(core.store)
                    core.checked = True
        self._last = (weakref.ref(loop), core)
        return core

    async def _check_migrations(self, store: Store) -> None:
        applied = set(await store.applied_migrations())
        missing = [m.name for m in load_migrations(store.dialect) if m.name not in applied]
        if missing and self.auto_migrate:
            await store.migrate()
        elif missing:
            raise MigrationsMissing(missing)

    async def migrate(self) -> list[str]:
        """Apply missing migrations; return the names applied now."""
        loop = asyncio.get_running_loop()
        core = self._cores.get(loop)
        if core is None:
            core = self._cores[loop] = _Core(open_store(self.url, **self.store_options))
        await core.store.open()
        applied = await core.store.migrate()
        core.checked = True
        return applied

    async def register_bindings(self, bindings: Iterable[str] | None = None) -> None:
        """Store the performers' limits with their coordinators, and their retention, which every app's
        pruning then applies to their jobs (done by workers at start)."""
        store = await self.store()
        now = store.now()
        rows = []
        for name in bindings or self.specs:
            spec = self.specs.get(name)
            if spec is None:
                continue
            p = spec.policy
            rows.append({
                "binding": name, "concurrency": p.concurrency, "key_concurrency": p.key_concurrency,
                "rate": p.rate.rate if p.rate else None, "burst": p.rate.burst if p.rate else None,
                "priority_aging": p.priority_aging, "backoff": backoff_json(spec.backoff),
                "retention": retention_json(spec.retention), "now": now,
            })

        async def work(tx: Tx) -> None:
            await tx.executemany("upsert_binding", rows)

        await store.transact(work)

    async def set_limits(self, binding: str, **limits: Any) -> None:
        """Change a binding's limits at run time (``concurrency``, ``key_concurrency``, ``rate_limit``,
        ``priority_aging``); effective at the next dispatch. ``None`` lifts a limit; ``concurrency=0`` holds
        the binding's jobs queued (running ones finish) until it is raised, which wakes the workers."""
        from . import options as opt
        from .errors import InvalidOption
        from .options import RateLimit
        from .records import LIMIT_FIELDS

        for name, value in limits.items():
            if name not in LIMIT_FIELDS:
                raise InvalidOption(name, value, f"one of {', '.join(LIMIT_FIELDS)}", binding)
            if name == "concurrency":
                opt.concurrency(value, binding)
            elif name == "key_concurrency":
                opt.positive_int(name, value, binding, allow_none=False)
            elif name == "rate_limit" and value is not None:
                RateLimit.parse(value, binding)
            elif name == "priority_aging":
                opt.seconds(name, value, binding)
        store = await self.store()

        async def work(tx: Tx) -> None:
            row = await tx.fetchone("get_binding", {"binding": binding})
            current = json.loads(row[6]) if row and row[6] else {}
            current.update(limits)
            await tx.execute("set_overrides", {"binding": binding, "overrides": json.dumps(current),
                                               "now": store.now()})

        await store.transact(work)
        await store.notify()

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
        connection: Any = None,
    ) -> Job:
        """Enqueue one job. Calls made in the same event-loop tick share one transaction.

        ``connection``: the caller's own open connection (a psycopg ``AsyncConnection`` on PostgreSQL,
        a ``sqlite3.Connection`` on SQLite): the job is inserted in the caller's transaction and exists
        if and only if the caller commits.
        """
        if (delay is None and run_at is None and priority is None and unique_key is None and concurrency_key is None
                and max_attempts is None and delivery is None):
            options = DEFAULT_OPTIONS
        else:
            options = EnqueueOptions(delay, run_at, priority, unique_key, concurrency_key, max_attempts, delivery)
        spec = self.spec(performer)
        core = await self._core()
        job = build_job(spec, payload, options, core.store.now())
        if connection is not None:
            store: Any = core.store
            if not hasattr(store, "transact_on"):
                raise StoreError(f"the {store.dialect} store cannot enqueue in the caller's transaction")

            async def work(tx: Tx) -> list[Job]:
                return await insert_in(tx, [job])

            return (await store.transact_on(connection, work))[0]  # type: ignore[no-any-return]
        return await core.enqueuer.submit(job)

    async def enqueue_many(self, items: Sequence[EnqueueRequest | tuple[Any, ...]]) -> list[Job]:
        """Enqueue many jobs in one transaction: ``(performer, payload)`` tuples or ``EnqueueRequest``s.

        On a store that :attr:`~jobloom.store.Store.streams_inserts` (PostgreSQL), a large batch is
        validated and sent in chunks of :data:`STREAM_CHUNK`, the next chunk being validated while the
        server inserts the last; a bad item still leaves nothing enqueued."""
        core = await self._core()
        now = core.store.now()
        requests = [item if isinstance(item, EnqueueRequest) else EnqueueRequest(*item) for item in items]
        specs: dict[int, PerformerSpec] = {}  # by id(): a performer class or name is looked up once

        def build(start: int, stop: int) -> list[NewJob]:
            jobs = []
            for i in range(start, stop):
                req = requests[i]
                spec = specs.get(id(req.performer))
                if spec is None:
                    spec = specs[id(req.performer)] = self.spec(req.performer)
                try:
                    jobs.append(build_job(spec, req.payload, req.options, now))
                except JobloomError as exc:
                    exc.add_note(f"in item {i} of enqueue_many (counting from 0); nothing was enqueued")
                    raise
            return jobs

        n = len(requests)
        if n <= STREAM_CHUNK or not core.store.streams_inserts or any(
            req.options.unique_key is not None for req in requests
        ):
            return await core.enqueuer.insert(build(0, n))

        def chunks() -> Iterator[list[NewJob]]:
            for start in range(0, n, STREAM_CHUNK):
                yield build(start, min(n, start + STREAM_CHUNK))

        return await core.enqueuer.insert_streamed(chunks)

    async def spawn_child(self, parent_id: int, child_id: str, performer: PerformerRef, payload: Any,
                          **options: Any) -> Job:
        """Enqueue a child of job ``parent_id``, idempotent by ``child_id`` (``self.ctx.spawn`` calls this)."""
        from .flowexec import NEVER

        job = build_job(self.spec(performer), payload, EnqueueOptions(**options), self.now())
        job.unique_key, job.unique_until = f"spawn:{parent_id}:{child_id}", NEVER
        core = await self._core()
        return await core.enqueuer.submit(job)

    def enqueue_sync(self, performer: PerformerRef, payload: Any, *, connection: Any = None, **options: Any) -> Job:
        """:meth:`enqueue` for synchronous code (same arguments).

        ``connection``: the caller's own sync connection (psycopg ``Connection`` or ``sqlite3.Connection``):
        the job is inserted in the caller's transaction, in the calling thread, and exists if and only if
        the caller commits.
        """
        if connection is None:
            return self.run_sync(self.enqueue(performer, payload, **options))
        self.run_sync(self.store())  # migrations checked, as for every use
        job = build_job(self.spec(performer), payload, EnqueueOptions(**options), self.now())
        store: Any = open_store(self.url, **self.store_options)
        if not hasattr(store, "transact_on_sync"):
            raise StoreError(f"the {store.dialect} store cannot enqueue in the caller's transaction")

        async def work(tx: Tx) -> list[Job]:
            return await insert_in(tx, [job])

        return store.transact_on_sync(connection, work)[0]  # type: ignore[no-any-return]

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one of the app's coroutines from synchronous code, on the app's own loop thread."""
        if self._bridge is None:
            self._bridge = _SyncBridge()
        return self._bridge.run(coro)

    # -- reading and acting on jobs -----------------------------------------------------------------

    async def get_job(self, job_id: int) -> Job:
        """The job with that id; ``JobNotFound`` if there is none."""
        job_id = checked_id(job_id)
        store = await self.store()

        async def work(tx: Tx) -> Any:
            return await tx.fetchone("get_job", {"id": job_id})

        row = await store.transact(work, exclusive=False)
        if row is None:
            raise JobNotFound(job_id)
        return job_from_row(row)

    async def list_jobs(
        self, state: str | None = None, binding: str | None = None, limit: int = 100, before: int | None = None
    ) -> list[Job]:
        """Jobs, newest first, optionally filtered by state and binding (``before``: ids below it)."""
        from .errors import InvalidOption
        from .states import ALL_STATES

        if state is not None and state not in ALL_STATES:
            raise InvalidOption("state", state, f"one of {', '.join(ALL_STATES)}")
        if binding is not None and not isinstance(binding, str):
            raise InvalidOption("binding", binding, "a binding name")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_ID:
            raise InvalidOption("limit", limit, f"an integer from 1 to {MAX_ID}")
        if before is not None:
            before = checked_id(before, "before", clamp=True)
        store = await self.store()

        async def work(tx: Tx) -> list[tuple[Any, ...]]:
            return await tx.fetch(
                "list_jobs", {"state": state, "binding": binding, "limit": limit, "before": before}
            )

        return [job_from_row(r) for r in await store.transact(work, exclusive=False)]

    async def counts(self, *, finished: bool = False) -> dict[str, dict[str, int]]:
        """Number of jobs per binding and state (states with no jobs are left out).

        By default succeeded and skipped jobs, most of the history, are not counted: the other states
        are each read from an index, so the cost follows the active and failed jobs, however long the
        history. ``finished=True`` counts succeeded and skipped jobs too, reading every job."""
        store = await self.store()
        query = "count_by_state" if finished else "count_by_state_indexed"

        async def work(tx: Tx) -> list[tuple[Any, ...]]:
            return await tx.fetch(query)

        out: dict[str, dict[str, int]] = {}
        for binding, state, n in await store.transact(work, exclusive=False):
            out.setdefault(binding, {})[state] = n
        return out

    async def attempts(self, job_id: int) -> list[Attempt]:
        """Every attempt of a job, oldest first; a running attempt is shown with no outcome yet."""
        job_id = checked_id(job_id)
        store = await self.store()

        async def work(tx: Tx) -> tuple[Any, list[tuple[Any, ...]]]:
            return await tx.fetchone("get_job", {"id": job_id}), await tx.fetch("get_attempts", {"id": job_id})

        job_row, rows = await store.transact(work, exclusive=False)
        if job_row is None:
            raise JobNotFound(job_id)
        found = [attempt_from_row(r) for r in rows]
        job = job_from_row(job_row)
        if job.state == "running" and all(a.attempt != job.attempt for a in found):
            found.append(Attempt(job_id, job.attempt, None, job.started_at or job.created_at,
                                 None, None, None, None))
        return found

    async def cancel(self, job_id: int) -> Job:
        """Cancel a job: at once unless running; a running job's worker is told and cancels its task."""
        job_id = checked_id(job_id)
        store = await self.store()

        async def work(tx: Tx) -> str:
            return await coordinator.cancel(tx, job_id, store.now())

        await store.transact(work)
        await store.notify()
        return await self.get_job(job_id)

    async def retry(self, job_id: int) -> Job:
        """Queue a ``failed``, ``stalled`` or ``cancelled`` job again; its history is kept."""
        job_id = checked_id(job_id)
        store = await self.store()

        async def work(tx: Tx) -> None:
            await coordinator.retry(tx, job_id, store.now())

        await store.transact(work)
        await store.notify()
        return await self.get_job(job_id)

    async def wait(self, job_id: int, timeout: float | None = None, *, poll: float = 0.05) -> Job:
        """Wait until the job is finished and return it; ``WaitTimeout`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        store = await self.store()
        wake = await store.wakeups()
        try:
            delay = poll
            while True:
                job = await self.get_job(job_id)
                if job.finished:
                    return job
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise WaitTimeout(f"job {job_id} is still {job.state} after {timeout} s")
                await wake.wait(delay if left is None else min(delay, left))
                delay = min(delay * 2, 1.0)
        finally:
            await wake.close()

    async def drain(self, *, bindings: Iterable[str] | None = None, concurrency: int = 32) -> int:
        """Run every due job in-process until none is runnable; return how many attempts ran.

        For users' own tests: ``await app.drain()`` after enqueueing, then assert on results.
        """
        from .worker import Worker

        worker = Worker(self, concurrency=concurrency, bindings=bindings)
        return await worker.drain()

    async def close(self) -> None:
        """Close the store of the running loop (and the sync bridge)."""
        self._last = None
        core = self._cores.pop(asyncio.get_running_loop(), None)
        if core is not None:
            await core.store.close()

    def close_sync(self) -> None:
        """Stop the sync bridge's loop thread, if it was started."""
        if self._bridge is not None:
            self._bridge.run(self.close())
            self._bridge.stop()
            self._bridge = None

    def __repr__(self) -> str:
        return f"App({self.url!r}, performers={sorted(self.specs)})"


MAX_ID = 2**63 - 1
"""Job ids are 64-bit integers."""


def checked_id(job_id: object, field: str = "job_id", *, clamp: bool = False) -> int:
    """A job id as given by a caller: an integer; one outside the 64-bit range names no job (``JobNotFound``),
    or with ``clamp`` (a bound such as ``before``) is brought into it."""
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        from .errors import InvalidOption

        raise InvalidOption(field, job_id, "an integer job id")
    if not -MAX_ID <= job_id <= MAX_ID:
        if clamp:
            return max(-MAX_ID, min(MAX_ID, job_id))
        raise JobNotFound(job_id)
    return job_id


def epoch(value: datetime | None) -> float | None:
    """A datetime as epoch seconds (for callers building filters)."""
    return None if value is None else value.timestamp()


__all__ = ["App", "EnqueueOptions", "EnqueueRequest", "epoch", "to_datetime"]


class _SyncBridge:
    """A private event loop in a daemon thread that runs the app's coroutines for sync callers."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="jobloom-sync", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
