"""Batches of jobs with callbacks, inside one transaction each. A batch's jobs are inserted with the
batch's row and its callbacks: each callback is a job that depends on every job of the batch
(:mod:`~jobloom.engine.dependencies`): ``on_complete`` runs whatever they did (``on_dependency_failure
="run"``), ``on_success`` only if they all succeeded (else it is skipped). So the callback is released
exactly once, by the transaction that ends the batch's last job, under its countdown's row lock; its
payload gets the batch's counts then (:mod:`~jobloom.engine.batch_counts`).

A job of the batch may add jobs to it while it runs (:func:`add`): under the lock of its own row
(fenced by its attempt), so the batch cannot complete before they are counted in.
"""

from __future__ import annotations

from collections.abc import Sequence

from jobloom.core.dependencies import RUN, SKIP
from jobloom.core.errors import InvalidOption, InvalidTransition
from jobloom.core.queries import Q
from jobloom.core.states import FINISHED_STATES
from jobloom.engine import coordinator, dependencies
from jobloom.engine.jobs import NewJob
from jobloom.store.base import Tx


async def insert(tx: Tx, members: Sequence[NewJob], on_complete: NewJob | None, on_success: NewJob | None,
                 now: float) -> tuple[int, list[int], int | None, int | None]:
    """Insert a batch: its jobs, its callbacks (waiting on every job) and its row. The batch's id, its
    jobs' ids and its callbacks' ids."""
    ids = [job_id for job_id, _ in await coordinator.enqueue(tx, members, now)]
    callbacks = [(cb, policy) for cb, policy in ((on_complete, RUN), (on_success, SKIP)) if cb is not None]
    for cb, policy in callbacks:
        cb.state, cb.on_dependency_failure = "waiting", policy
    rows = [cb.params(tx.codec) | {"event": "waiting"} for cb, _ in callbacks]
    made = await tx.insert_jobs(rows, now) if callbacks else []
    by_policy = dict(zip((p for _, p in callbacks), made, strict=True))
    row = await tx.fetchone(Q.insert_batch, {"on_complete": by_policy.get(RUN), "on_success": by_policy.get(SKIP),
                                             "now": now})
    assert row is not None
    batch_id = row.id
    await tx.executemany(Q.insert_batch_job, [{"batch_id": batch_id, "job_id": i} for i in ids])
    if callbacks:
        states = {r.id: r.state for r in await tx.fetch(Q.lock_dependencies, {"ids": ids})}
        for (cb, _), cb_id in zip(callbacks, made, strict=True):
            await dependencies.add_waiting(tx, cb_id, cb, states, now, batch_id)
    return batch_id, ids, by_policy.get(RUN), by_policy.get(SKIP)


async def add(tx: Tx, job_id: int, attempt: int, members: Sequence[NewJob], now: float, *, worker: str,
              started_at: float | None) -> list[int]:
    """Add jobs to the batch of job ``job_id``, whose attempt ``attempt`` must still be running under the
    claim of ``worker`` made at ``started_at`` (its row is locked: its own ending waits, so the batch
    cannot complete meanwhile). The new jobs' ids."""
    claim = {"id": job_id, "attempt": attempt, "worker": worker, "started_at": started_at}
    if await tx.fetchone(Q.lock_running_claim, claim) is None:
        raise InvalidTransition(job_id, f"not running attempt {attempt} under this claim", "add to its batch")
    found = await tx.fetchone(Q.batch_of_job, {"id": job_id})
    if found is None:
        raise InvalidOption("ctx.batch", job_id, "a job of a batch (this job is in none)")
    batch = await tx.fetchone(Q.lock_batch, {"id": found.id})
    assert batch is not None
    ids = [i for i, _ in await coordinator.enqueue(tx, members, now)]
    await tx.executemany(Q.insert_batch_job, [{"batch_id": batch.id, "job_id": i} for i in ids])
    callbacks = [cb for cb in (batch.on_complete, batch.on_success) if cb is not None]
    if not callbacks or not ids:
        return ids
    states = {r.id: r.state for r in await tx.fetch(Q.lock_dependencies, {"ids": ids})}
    for cb in sorted(callbacks):  # the countdowns' row locks, in id order
        if await tx.fetchone(Q.count_up_dependencies, {"job_id": cb, "n": len(ids)}) is None:
            continue  # released already (cannot happen while this job runs; kept safe)
        await tx.executemany(Q.insert_dependency, [{"depends_on": i, "job_id": cb, "done": False} for i in ids])
    ended = [(i, s) for i, s in states.items() if s in FINISHED_STATES]  # skipped at once (a dependency failed)
    if ended:
        await dependencies.settle(tx, ended, now)
    return ids
