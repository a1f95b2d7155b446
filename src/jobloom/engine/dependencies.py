"""Dependencies between jobs, inside the coordinator's transactions: a job enqueued with ``depends_on``
is inserted ``waiting``; each job whose ending it waits for is marked (``jobloom_jobs.dependants``), so
that the transaction that ends it (a report, a reap, a cancel) counts the ending down on the waiting
job's countdown and, at zero, queues it (or skips it when a dependency did not succeed). The
decision is :func:`jobloom.core.dependencies.next_step`; this module reads and writes.

Exactly once: an edge is closed by one statement (``done``), so an ending is counted once even if
the dependency is retried by hand and ends again; the countdown row is locked by its update, so two
transactions ending a job's last two dependencies at the same moment see each other's count; and it
all commits with the outcome that ended the dependency, so a worker killed after that commit left
nothing undone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobloom.core.dependencies import RELEASE, SKIP, bad_ending, next_step, skip_reason
from jobloom.core.errors import InvalidOption
from jobloom.core.queries import Q
from jobloom.core.records import job_from_row
from jobloom.core.rows import LinkRow
from jobloom.core.states import FINISHED_STATES
from jobloom.core.types import Job
from jobloom.engine.batch_counts import merge_counts
from jobloom.engine.jobs import NewJob, emit, event
from jobloom.store.base import Store, Tx


async def lock_dependencies(tx: Tx, job: NewJob) -> dict[int, str]:
    """Lock and mark the jobs ``job`` depends on; their states by id. An unknown (or deleted) job, or a
    flow node's job, raises ``InvalidOption``: nothing is enqueued."""
    ids = list(job.depends_on or ())
    rows = await tx.fetch(Q.lock_dependencies, {"ids": ids})
    found = {r.id: r for r in rows}
    missing = [i for i in ids if i not in found]
    if missing:
        raise InvalidOption("depends_on", missing[0], "the id of an existing job (none has it: unknown or deleted)",
                            job.binding)
    in_run = next((r for r in rows if r.run_id is not None), None)
    if in_run is not None:
        raise InvalidOption("depends_on", in_run.id, "a job outside flow runs (a flow's nodes depend on each other "
                            "through their flow)", job.binding)
    return {r.id: r.state for r in rows}


async def add_waiting(tx: Tx, job_id: int, job: NewJob, states: Mapping[int, str], now: float,
                      batch_id: int | None = None) -> int:
    """Record the new waiting job ``job_id``'s edges and countdown (``batch_id``: it is that batch's
    callback); if its dependencies all ended already (or one failed), queue or skip it at once. The
    number of jobs queued."""
    await tx.executemany(Q.insert_dependency, [
        {"depends_on": d, "job_id": job_id, "done": s in FINISHED_STATES} for d, s in sorted(states.items())])
    pending = sum(1 for s in states.values() if s not in FINISHED_STATES)
    await tx.execute(Q.insert_dependency_wait, {"job_id": job_id, "pending": pending,
                                                "on_failure": job.on_dependency_failure, "batch_id": batch_id})
    failed = next((d for d, s in sorted(states.items()) if s in FINISHED_STATES and bad_ending(s)), None)
    step = next_step(pending, job.on_dependency_failure, failed)
    if step == SKIP and failed is not None:
        return await _move(tx, [], [(job_id, skip_reason(failed, states[failed]))], now, {})
    if step == RELEASE:
        return await _move(tx, [(job_id, batch_id)], [], now, {})
    return 0


async def settle(tx: Tx, ended: Sequence[tuple[int, str]], now: float) -> int:
    """Jobs marked as having dependants ended (job id, state), in this transaction: count each ending
    down on its dependants, queue those left with none open, skip those whose dependency failed (and
    so on down the chain). The number of jobs queued."""
    states = dict(ended)
    queued = 0
    while states:
        edges = await tx.fetch(Q.close_dependencies, {"ids": sorted(states)})
        if not edges:
            break
        by_job: dict[int, list[int]] = {}
        for e in edges:
            by_job.setdefault(e.job_id, []).append(e.depends_on)
        order = sorted(by_job)  # the countdowns' row locks, in id order
        counts = await tx.fetch_batch([(Q.count_down_dependencies, {"job_id": j, "n": len(by_job[j])})
                                       for j in order])
        releases: list[tuple[int, int | None]] = []
        skips: list[tuple[int, str]] = []
        for j, rows in zip(order, counts, strict=True):
            if not rows:
                continue
            failed = next((d for d in sorted(by_job[j]) if bad_ending(states[d])), None)
            step = next_step(rows[0].pending, rows[0].on_failure, failed)
            if step == SKIP and failed is not None:
                skips.append((j, skip_reason(failed, states[failed])))
            elif step == RELEASE:
                releases.append((j, rows[0].batch_id))
        states = {}
        queued += await _move(tx, releases, skips, now, states)
    return queued


async def _move(tx: Tx, releases: list[tuple[int, int | None]], skips: list[tuple[int, str]], now: float,
                cascade: dict[int, str]) -> int:
    """Queue ``releases`` (job id, and the batch it is a callback of) and skip ``skips`` (each only if
    still waiting), with their events; the skipped jobs that have dependants of their own go into
    ``cascade``. The number queued."""
    callbacks = {j: b for j, b in releases if b is not None}
    if callbacks:
        await merge_counts(tx, callbacks)
    queries: list[tuple[Any, dict[str, Any]]] = [(Q.release_dependant, {"id": j, "now": now}) for j, _ in releases]
    queries += [(Q.skip_dependant, {"id": j, "now": now, "reason": why}) for j, why in skips]
    if not queries:
        return 0
    results = await tx.fetch_batch(queries)
    events, queued = [], 0
    for rows in results[:len(releases)]:
        for r in rows:
            queued += 1
            events.append(event(now, r.id, r.binding, "queued", r.attempt))
    for rows in results[len(releases):]:
        for s in rows:
            events.append(event(now, s.id, s.binding, "skipped", s.attempt))
            if s.dependants:
                cascade[s.id] = "skipped"
    await emit(tx, events)
    return queued


async def read_dependencies(store: Store, job_id: int) -> dict[int, Job]:
    """The jobs that job ``job_id`` depends on, by id (one that was deleted since is left out)."""

    async def work(tx: Tx) -> dict[int, Job]:
        ids = [r.id for r in await tx.fetch(Q.dependencies_of, {"id": job_id})]
        if not ids:
            return {}
        found = await tx.fetch_batch([(Q.get_job, {"id": i}) for i in ids])
        return {rows[0].id: job_from_row(rows[0], tx.codec) for rows in found if rows}

    return await store.transact(work, exclusive=False)


async def read_links(store: Store, job_id: int, limit: int = 100) -> tuple[list[LinkRow], list[LinkRow]]:
    """The jobs that job ``job_id`` depends on, and (up to ``limit`` of) its dependants: ids and states."""

    async def work(tx: Tx) -> tuple[list[LinkRow], list[LinkRow]]:
        deps, dependants = await tx.fetch_batch([(Q.dependencies_of, {"id": job_id}),
                                                 (Q.dependants_of, {"id": job_id, "limit": limit})])
        return deps, dependants

    return await store.transact(work, exclusive=False)
