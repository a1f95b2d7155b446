"""What ``self.ctx`` reads and writes of the jobs a running job is linked to: its dependencies, and
the batch it belongs to."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from jobloom.core.errors import InvalidOption, JobloomError
from jobloom.core.types import Job
from jobloom.engine import job_batches
from jobloom.engine.dependencies import read_dependencies
from jobloom.engine.enqueue import EnqueueRequest, build_job, job_from_new
from jobloom.engine.jobs import NewJob
from jobloom.engine.performer import PerformerSpec
from jobloom.store.base import Store, Tx


def build_items(spec: Callable[[Any], PerformerSpec], items: Sequence[Any], now: float, what: str) -> list[NewJob]:
    """The jobs of ``items`` (as in ``App.enqueue_many``: ``(performer, payload[, options])`` tuples or
    ``EnqueueRequest``s), checked; a bad item raises naming its index. Unique and debounce keys are
    refused: every item of a batch is a job of its own."""
    jobs = []
    for i, item in enumerate(items):
        req = item if isinstance(item, EnqueueRequest) else EnqueueRequest(*item)
        try:
            job = build_job(spec(req.performer), req.payload, req.options, now)
            if job.unique_key is not None or job.debounce_key is not None:
                raise InvalidOption("unique_key" if job.unique_key is not None else "debounce_key",
                                    job.unique_key or job.debounce_key, "none in a batch", job.binding)
        except JobloomError as exc:
            exc.add_note(f"in item {i} of {what} (counting from 0); nothing was enqueued")
            raise
        jobs.append(job)
    return jobs


class Links:
    """``ctx.dependencies()`` and ``ctx.batch`` of a worker's jobs, through the worker's store."""

    def __init__(self, store: Callable[[], Awaitable[Store]], spec: Callable[[Any], PerformerSpec]) -> None:
        self._store = store
        self._spec = spec

    async def dependencies(self, job_id: int) -> dict[int, Job]:
        """The jobs that job ``job_id`` depends on, by id."""
        return await read_dependencies(await self._store(), job_id)

    async def batch_add(self, job_id: int, attempt: int, items: Any, *, worker: str,
                        started_at: float | None) -> list[Job]:
        """Add jobs to the batch of job ``job_id`` (its attempt ``attempt`` running, claimed by ``worker``
        at ``started_at``); the new jobs."""
        store = await self._store()
        jobs = build_items(self._spec, list(items), store.now(), "ctx.batch.add")
        notified = False

        async def work(tx: Tx) -> list[int]:
            nonlocal notified
            ids = await job_batches.add(tx, job_id, attempt, jobs, store.now(), worker=worker,
                                        started_at=started_at)
            notified = tx.notified
            return ids

        ids = await store.transact(work)
        if not notified:
            await store.notify()
        return [job_from_new(i, new) for i, new in zip(ids, jobs, strict=True)]
