"""Bulk actions on the jobs a :class:`~jobloom.app.search.JobFilter` matches: retry, cancel, delete.

Each works in chunks: the ids of a chunk are read through the search indexes (a read transaction),
then the chunk is changed in a short transaction of its own, so a worker's cycle never waits behind
more than one chunk. Under the chunk's locks each job's state is read again, and a job whose state
does not allow the action (by the state machine: ``retry_now`` and ``cancel_now`` sources, finished
states for delete) is skipped. The count returned is of the jobs changed. Chunks go from the newest
job to the oldest; a job that starts to match after its chunk was read is not acted on.

On SQLite, where one writer at a time holds the whole database, a bulk action also takes turns with
the workers: after each chunk it waits as long as the chunk's transaction took (half of the writer's
time at most), and its chunks are smaller, so a worker's claim waits a few milliseconds at worst.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from jobloom.app.search import JobFilter, page_rows
from jobloom.core.errors import InvalidOption, InvalidTransition, JobNotFound
from jobloom.core.queries import Q
from jobloom.core.rows import JobRow
from jobloom.core.states import CANCELLABLE_AT_ONCE, FINISHED_STATES, RETRYABLE_STATES, RUNNING
from jobloom.core.text import MAX_ID
from jobloom.engine import coordinator
from jobloom.engine.hooks import EngineHooks
from jobloom.engine.jobs import emit, event
from jobloom.engine.offload import Offload
from jobloom.housekeeping.retention import delete_jobs
from jobloom.store import Store, Tx

RETRY_CHUNK = 500
"""Jobs per transaction of :func:`retry_many` and :func:`delete_many` (PostgreSQL)."""
SQLITE_CHUNK = 100
"""Jobs per transaction of every bulk action on SQLite (one writer at a time: short turns)."""
CANCEL_CHUNK = 100
"""Jobs per transaction of :func:`cancel_many` (each job is cancelled as :meth:`App.cancel` does)."""
CANCEL_STATES = CANCELLABLE_AT_ONCE | {RUNNING}


def _check(f: object) -> JobFilter:
    if not isinstance(f, JobFilter):
        raise InvalidOption("filter", f, "a jobloom.JobFilter")
    return f


async def _chunks(store: Store, f: JobFilter, allowed: frozenset[str], chunk: int,
                  apply: Callable[[Tx, list[int]], Awaitable[int]], *, notify: bool) -> int:
    """Read the matching ids in ``allowed`` states chunk by chunk, newest first, and ``apply`` each chunk
    in a transaction of its own; the total it returned."""
    states = f.restricted(allowed)
    if not states:
        return 0
    if store.dialect == "sqlite":
        chunk = min(chunk, SQLITE_CHUNK)
    narrowed = JobFilter(states, f.binding, f.tag_list, f.unique_key, f.text, f.after_ts, f.before_ts,
                         f.payload_text)
    before, changed = MAX_ID, 0
    while True:
        async def read(tx: Tx, before: int = before) -> list[JobRow]:
            return await page_rows(tx, narrowed, limit=chunk, before=before)

        ids = [int(r.id) for r in await store.transact(read, exclusive=False)]
        if not ids:
            return changed

        async def work(tx: Tx, ids: list[int] = ids) -> int:
            return await apply(tx, ids)

        began = time.monotonic()
        n = await store.transact(work)
        if store.dialect == "sqlite":  # the workers' turn at the database's one write lock
            await asyncio.sleep(time.monotonic() - began)
        changed += n
        if notify and n:
            await store.notify()
        if len(ids) < chunk:
            return changed
        before = min(ids)


async def retry_many(store: Store, f: JobFilter, *, chunk: int = RETRY_CHUNK) -> int:
    """Queue again every failed, stalled or cancelled job matching ``f`` (as :meth:`App.retry` does one:
    history kept, a new attempt budget); the number retried."""
    f = _check(f)

    async def apply(tx: Tx, ids: list[int]) -> int:
        now = store.now()
        rows = [r for r in await tx.fetch(Q.lock_jobs, {"ids": ids}) if r.state in RETRYABLE_STATES]
        await tx.executemany(Q.retry_now, [{"id": r.id, "now": now} for r in rows])
        await emit(tx, [event(now, r.id, r.binding, "requeued", r.attempt) for r in rows])
        return len(rows)

    return await _chunks(store, f, RETRYABLE_STATES, chunk, apply, notify=True)


async def cancel_many(store: Store, f: JobFilter, *, hooks: EngineHooks, chunk: int = CANCEL_CHUNK) -> int:
    """Cancel every job matching ``f`` that is not finished (as :meth:`App.cancel` does one: at once, or
    a running job's worker is told); the number cancelled or asked to stop."""
    f = _check(f)

    async def apply(tx: Tx, ids: list[int]) -> int:
        now, n = store.now(), 0
        for job_id in ids:
            try:
                await coordinator.cancel(tx, job_id, now, hooks=hooks)
            except (InvalidTransition, JobNotFound):
                continue  # finished (or deleted) since the chunk was read
            n += 1
        return n

    return await _chunks(store, f, CANCEL_STATES, chunk, apply, notify=True)


async def delete_many(store: Store, f: JobFilter, *, chunk: int = RETRY_CHUNK, offload: Offload | None = None) -> int:
    """Delete every finished job matching ``f`` with its history (a finished flow run goes with its
    last job, as in retention); the number deleted. Unfinished jobs are left alone: cancel them first.
    ``offload``: the app's blob store, whose blobs of the deleted jobs go once their chunk committed
    (those of a chunk that failed are the sweeper's)."""
    f = _check(f)
    blobs: dict[tuple[int, ...], list[str]] = {}  # by chunk: a retried transaction reads its chunk again

    async def apply(tx: Tx, ids: list[int]) -> int:
        rows = await tx.fetch(Q.pick_deletable, {"ids": ids})
        found = blobs[tuple(ids)] = []
        return await delete_jobs(tx, rows, store.dialect, None if offload is None else found)

    deleted = await _chunks(store, f, FINISHED_STATES, chunk, apply, notify=False)
    if offload is not None:
        await offload.forget(blob_id for found in blobs.values() for blob_id in found)
    return deleted


async def delete_one(store: Store, job_id: int, offload: Offload | None = None) -> None:
    """Delete the finished job ``job_id`` with its history (see :meth:`App.delete`), and then its blobs."""
    blobs: list[str] = []

    async def work(tx: Tx) -> None:
        blobs.clear()
        rows = await tx.fetch(Q.pick_deletable, {"ids": [job_id]})
        if rows:
            await delete_jobs(tx, rows, store.dialect, None if offload is None else blobs)
            return
        job = await tx.fetchone(Q.get_job, {"id": job_id})
        if job is None:
            raise JobNotFound(job_id)
        if job.state not in FINISHED_STATES:
            raise InvalidTransition(job_id, job.state, "delete (cancel it first)")
        raise InvalidTransition(job_id, "the newest job", "delete (its id would be handed out again; it can be "
                                "deleted once a newer job exists)")

    await store.transact(work)
    if offload is not None:
        await offload.forget(blobs)


__all__ = ["CANCEL_CHUNK", "RETRY_CHUNK", "SQLITE_CHUNK", "cancel_many", "delete_many", "delete_one", "retry_many"]
