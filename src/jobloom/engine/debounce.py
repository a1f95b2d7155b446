"""Debounced enqueues: the enqueues of one debounce key collapse into one scheduled job, decided in the
enqueue's transaction under the key's lock (so it is exact however many processes enqueue at once)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from jobloom.core.codecs import encode_opt
from jobloom.core.deadlines import collapses, debounced_run_at
from jobloom.core.queries import Q
from jobloom.engine.jobs import NewJob
from jobloom.store.base import Tx

Insert = Callable[[Tx, NewJob], Awaitable[int]]
"""Inserts a job in the transaction; its id."""


async def enqueue_debounced(tx: Tx, job: NewJob, now: float, insert: Insert) -> tuple[int, bool]:
    """Collapse ``job`` into the scheduled, never started job of its debounce key whose window is still
    open (the latest payload, the window moved on): that job's id and ``False``; else insert ``job``
    (due at the end of its window) with ``insert(tx, job)`` and return its id and ``True``."""
    assert job.debounce_key is not None and job.debounce is not None
    key = {"binding": job.binding, "debounce_key": job.debounce_key}
    await tx.execute(Q.lock_debounce, key)
    holder = await tx.fetchone(Q.find_debounced, key)
    if holder is not None and collapses(now, holder.run_at):
        run_at = debounced_run_at(now, job.debounce, holder.created_at, job.debounce_max)
        await tx.execute(Q.debounce_job, {"id": holder.id, "payload": encode_opt(tx.codec, job.payload),
                                          "run_at": run_at, "concurrency_key": job.concurrency_key,
                                          "expires_at": job.expires_at})
        return holder.id, False
    return await insert(tx, job), True
