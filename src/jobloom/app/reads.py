"""Reading jobs for the app's API: one job, counts per binding and state, a job's
attempts (each one read transaction on the store), and waiting for a job to finish."""

from __future__ import annotations

import time

from jobloom.core.errors import JobNotFound, WaitTimeout
from jobloom.core.queries import Q
from jobloom.core.records import attempt_from_row, job_from_row
from jobloom.core.retrying import Delays
from jobloom.core.rows import AttemptRow, JobRow, StateCountRow
from jobloom.core.text import checked_id
from jobloom.core.types import Attempt, Job
from jobloom.store import Store, Tx


async def read_job(store: Store, job_id: int) -> Job:
    """The job with that id; ``JobNotFound`` if there is none."""
    job_id = checked_id(job_id)

    async def work(tx: Tx) -> JobRow | None:
        return await tx.fetchone(Q.get_job, {"id": job_id})

    row = await store.transact(work, exclusive=False)
    if row is None:
        raise JobNotFound(job_id)
    return job_from_row(row, store.codec)


async def count_jobs(store: Store, *, finished: bool) -> dict[str, dict[str, int]]:
    """Number of jobs per binding and state; succeeded and skipped ones only with ``finished``."""
    query = Q.count_by_state if finished else Q.count_by_state_indexed

    async def work(tx: Tx) -> list[StateCountRow]:
        return await tx.fetch(query)

    out: dict[str, dict[str, int]] = {}
    for row in await store.transact(work, exclusive=False):
        out.setdefault(row.binding, {})[row.state] = row.n
    return out


async def read_attempts(store: Store, job_id: int) -> list[Attempt]:
    """Every attempt of a job, oldest first; a running attempt is shown with no outcome yet."""
    job_id = checked_id(job_id)

    async def work(tx: Tx) -> tuple[JobRow | None, list[AttemptRow]]:
        return await tx.fetchone(Q.get_job, {"id": job_id}), await tx.fetch(Q.get_attempts, {"id": job_id})

    job_row, rows = await store.transact(work, exclusive=False)
    if job_row is None:
        raise JobNotFound(job_id)
    found = [attempt_from_row(r) for r in rows]
    job = job_from_row(job_row, store.codec)
    if job.state == "running" and all(a.attempt != job.attempt for a in found):
        found.append(Attempt(job_id, job.attempt, None, job.started_at or job.created_at, None, None, None, None))
    return found


async def wait_for(store: Store, job_id: int, timeout: float | None, *, poll: float) -> Job:
    """Wait until the job is finished and return it; ``WaitTimeout`` after ``timeout`` seconds. The job
    is read again at each wake-up of the store, and at least every ``poll`` seconds (backing off to 1 s)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    wake = await store.wakeups()
    try:
        delays = Delays(poll, 1.0)
        while True:
            job = await read_job(store, job_id)
            if job.finished:
                return job
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise WaitTimeout(f"job {job_id} is still {job.state} after {timeout} s")
            delay = delays.next()
            await wake.wait(delay if left is None else min(delay, left))
    finally:
        await wake.close()
