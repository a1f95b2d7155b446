"""Enqueueing for the app's API: one job (coalesced with the other enqueues of its event-loop tick, or
inserted in the caller's own transaction), many jobs in one transaction (streamed in chunks on a
store that can), a job's child, and enqueue from synchronous code.

The :class:`~jobloom.app.facade.App` delegates here, handing over its runtime; the jobs are built and checked by
:func:`~jobloom.engine.enqueue.build_job` and inserted by the event loop's
:class:`~jobloom.engine.enqueue.Enqueuer`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from jobloom.app.runtime import Runtime
from jobloom.core.errors import JobloomError
from jobloom.core.types import Job
from jobloom.engine.enqueue import (
    DEFAULT_OPTIONS,
    EnqueueOptions,
    EnqueueRequest,
    PerformerRef,
    build_job,
    insert_in,
    restored,
)
from jobloom.engine.jobs import NewJob
from jobloom.engine.middleware import EnqueueCall
from jobloom.engine.performer import PerformerSpec
from jobloom.engine.telemetry import EnqueueTold
from jobloom.store.base import Tx

STREAM_CHUNK = 100
"""Jobs per statement of a large :meth:`App.enqueue_many`, validated while the store writes the last chunk."""


def options_of(
    delay: float | None, run_at: datetime | float | None, priority: int | None, unique_key: str | None,
    concurrency_key: str | None, max_attempts: int | None, delivery: str | None, tags: Sequence[str] | None,
    meta: dict[str, Any] | None, **timing: Any,
) -> EnqueueOptions:
    """The options of one enqueue; the shared :data:`DEFAULT_OPTIONS` when none is given (the fast path).
    ``timing``: ``debounce``, ``debounce_key``, ``debounce_max``, ``expires_in``, ``expires_at``."""
    if (delay is None and run_at is None and priority is None and unique_key is None and concurrency_key is None
            and max_attempts is None and delivery is None and tags is None and meta is None
            and all(v is None for v in timing.values())):
        return DEFAULT_OPTIONS
    return EnqueueOptions(delay, run_at, priority, unique_key, concurrency_key, max_attempts, delivery, tags, meta,
                          **timing)


Item = tuple[PerformerSpec, Any, EnqueueOptions]


async def admit(runtime: Runtime, items: Sequence[Item], what: str = "enqueue_many") -> Sequence[Item]:
    """The one place every enqueue of the app's API (``App.enqueue``, ``enqueue_many``, ``enqueue_sync``,
    a child, the HTTP API's, a publish's jobs, a batch's) passes its app's enqueue middleware: each item as the
    chain returns it. An exception of the chain refuses the whole enqueue (nothing is stored)."""
    chain = runtime.middleware
    if not chain.enqueues:
        return items
    out = []
    for i, (spec, payload, options) in enumerate(items):
        try:
            call = await chain.enqueue(EnqueueCall(spec.binding, payload, options))
        except Exception as exc:
            if len(items) > 1:
                exc.add_note(f"in item {i} of {what} (counting from 0); nothing was enqueued")
            raise
        out.append((spec, call.payload, call.options))
    return out


async def enqueue(runtime: Runtime, performer: PerformerRef, payload: Any, options: EnqueueOptions,
                  connection: Any) -> Job:
    """Enqueue one job: coalesced with the loop tick's other enqueues, or in ``connection``'s transaction."""
    spec = runtime.spec(performer)
    if runtime.middleware.enqueues:
        [(spec, payload, options)] = await admit(runtime, [(spec, payload, options)])
    core = await runtime.stores.core()
    job = build_job(spec, payload, options, core.store.now())
    if connection is not None:
        originals = {} if runtime.offload is None else await runtime.offload.put_jobs([job])

        async def work(tx: Tx) -> list[Job]:
            return await insert_in(tx, [job])

        with EnqueueTold(runtime.telemetry, (job,)) as told:
            created = restored(await core.store.transact_on(connection, work), [job], originals)[0]
            told.done([created.id])  # in the caller's transaction, not committed yet
        return created
    return await core.enqueuer.submit(job)


async def enqueue_many(runtime: Runtime, items: Sequence[EnqueueRequest | tuple[Any, ...]]) -> list[Job]:
    """Enqueue many jobs in one transaction; a large batch streamed in chunks where the store can."""
    core = await runtime.stores.core()
    now = core.store.now()
    requests = [item if isinstance(item, EnqueueRequest) else EnqueueRequest(*item) for item in items]
    if runtime.middleware.enqueues:
        admitted = await admit(runtime, [(runtime.spec(r.performer), r.payload, r.options) for r in requests])
        requests = [EnqueueRequest(r.performer, payload, options)
                    for r, (_, payload, options) in zip(requests, admitted, strict=True)]
    specs: dict[int, PerformerSpec] = {}  # by id(): a performer class or name is looked up once

    def build(start: int, stop: int) -> list[NewJob]:
        jobs = []
        for i in range(start, stop):
            req = requests[i]
            spec = specs.get(id(req.performer))
            if spec is None:
                spec = specs[id(req.performer)] = runtime.spec(req.performer)
            try:
                jobs.append(build_job(spec, req.payload, req.options, now))
            except JobloomError as exc:
                exc.add_note(f"in item {i} of enqueue_many (counting from 0); nothing was enqueued")
                raise
        return jobs

    n = len(requests)
    if n <= STREAM_CHUNK or not core.store.streams_inserts or any(
        req.options.unique_key is not None or req.options.debounce_key is not None
        or req.options.depends_on is not None for req in requests
    ):
        return await core.enqueuer.insert(build(0, n))

    def chunks() -> Iterator[list[NewJob]]:
        for start in range(0, n, STREAM_CHUNK):
            yield build(start, min(n, start + STREAM_CHUNK))

    return await core.enqueuer.insert_streamed(chunks)


async def enqueue_flagged(runtime: Runtime, items: Sequence[tuple[PerformerSpec, Any, EnqueueOptions]],
                          ) -> list[tuple[Job, bool]]:
    """Enqueue jobs of resolved specs in one transaction, each with whether it was made now (else the
    unfinished job that holds its unique key): the HTTP API's enqueue with unique keys."""
    items = await admit(runtime, items)
    core = await runtime.stores.core()
    now = core.store.now()
    news = []
    for i, (spec, payload, options) in enumerate(items):
        try:
            news.append(build_job(spec, payload, options, now))
        except JobloomError as exc:
            if len(items) > 1:
                exc.add_note(f"in item {i} of enqueue_many (counting from 0); nothing was enqueued")
            raise
    return await core.enqueuer.insert_flagged(news)


async def spawn_child(runtime: Runtime, parent_id: int, child_id: str, performer: PerformerRef, payload: Any,
                      options: dict[str, Any]) -> Job:
    """Enqueue a child of job ``parent_id``, idempotent by ``child_id`` (a unique key that never expires)."""
    from jobloom.flows.execute import NEVER

    [(spec, payload, opts)] = await admit(runtime, [(runtime.spec(performer), payload, EnqueueOptions(**options))])
    job = build_job(spec, payload, opts, runtime.now())
    job.unique_key, job.unique_until = f"spawn:{parent_id}:{child_id}", NEVER
    core = await runtime.stores.core()
    return await core.enqueuer.submit(job)


def enqueue_sync(runtime: Runtime, performer: PerformerRef, payload: Any, connection: Any,
                 options: dict[str, Any]) -> Job:
    """Enqueue one job from synchronous code inside ``connection``'s transaction, in the calling thread
    (without a connection, ``App.enqueue_sync`` runs ``App.enqueue`` on the app's loop thread)."""
    runtime.run_sync(runtime.store())  # migrations checked, as for every use
    item = (runtime.spec(performer), payload, EnqueueOptions(**options))
    [(spec, payload, opts)] = runtime.run_sync(admit(runtime, [item]))
    job = build_job(spec, payload, opts, runtime.now())
    store = runtime.stores.open()
    offload = runtime.offload
    originals = {} if offload is None else runtime.run_sync(offload.put_jobs([job]))

    async def work(tx: Tx) -> list[Job]:
        return await insert_in(tx, [job])

    with EnqueueTold(runtime.telemetry, (job,)) as told:
        created = restored(store.transact_on_sync(connection, work), [job], originals)[0]
        told.done([created.id])  # in the caller's transaction, not committed yet
    return created


__all__ = ["STREAM_CHUNK", "admit", "enqueue", "enqueue_flagged", "enqueue_many", "enqueue_sync", "options_of",
           "spawn_child"]
