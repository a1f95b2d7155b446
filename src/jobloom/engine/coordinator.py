"""The coordinator: every decision about a binding's jobs, each applied inside one store transaction.

One function per transition (enqueue, dispatch (in :mod:`jobloom.engine.dispatch`), report, reap, promote,
heartbeat, cancel, retry, release). Each takes an open :class:`~jobloom.store.Tx`, decides with the pure functions of
:mod:`jobloom.core.decide` and :mod:`jobloom.core.lifecycle`, and applies the result with named SQL, fenced
by the attempt number so that a stale worker can never overwrite a newer truth.

Lock order. Every transaction that takes row locks takes them in one order (a schedule's row, runs
in id order, jobs in id order, bindings, the projector's cursor) so that on PostgreSQL no two can
wait for each other; a lock needed out of that order is taken with ``SKIP LOCKED``. The order, its
one safe exception and what follows from it are set out in docs/explanation/architecture.md ("Lock order");
``tests/conformance/test_lock_order.py`` exercises it.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from jobloom.core import lifecycle
from jobloom.core.codecs import Codec
from jobloom.core.errors import InvalidTransition, JobNotFound
from jobloom.core.options import Backoff
from jobloom.core.queries import Q, Query
from jobloom.core.records import policy_from_row
from jobloom.core.rows import ExpiredRow, LockedJobRow, MovedRow, RunningRow
from jobloom.core.states import CANCELLABLE_AT_ONCE, EXPIRED, FINISHED_STATES, RETRYABLE_STATES
from jobloom.engine import dependencies
from jobloom.engine.callers import call_wait, children_ended, wake_callers
from jobloom.engine.debounce import enqueue_debounced
from jobloom.engine.dispatch import candidate_reads, merge_by_age
from jobloom.engine.dispatch import dispatch as dispatch
from jobloom.engine.hooks import EngineHooks
from jobloom.engine.jobs import CycleReads, NewJob, Outcome, Prefetched, ReportResult, emit, event
from jobloom.engine.report_plan import ReportPlan, attempt_row, fence, needs_backoff, spawn_questions, unique, verdict
from jobloom.store.base import Tx

LEASE_GRACE = 1.0
_rng = random.Random()


async def enqueue(tx: Tx, jobs: Sequence[NewJob], now: float) -> list[tuple[int, bool]]:
    """Insert jobs; a job whose unique key is taken returns the holder's id instead (``created=False``),
    and a debounced job that collapses into its key's scheduled job returns that job's id. A job with
    ``depends_on`` is inserted ``waiting`` with its dependencies (:mod:`~jobloom.engine.dependencies`)."""
    if len(jobs) == 1 and _plain(jobs[0]) and not jobs[0].tags:  # a lone enqueue: one statement
        (new_id,) = await tx.insert_jobs([_with_event(jobs[0], tx.codec)], now)
        return [(new_id, True)]
    out: list[tuple[int, bool] | None] = [None] * len(jobs)
    plain: list[int] = []
    for i, job in enumerate(jobs):
        if _plain(job):
            plain.append(i)
        elif job.debounce_key is not None:
            out[i] = await enqueue_debounced(tx, job, now, lambda tx, job: _insert_one(tx, job, now))
        elif job.unique_key is not None:
            out[i] = await _enqueue_unique(tx, job, now)
        else:
            out[i] = (await _insert_one(tx, job, now), True)
    if plain:
        ids = await tx.insert_jobs([_with_event(jobs[i], tx.codec) for i in plain], now)
        for i, new_id in zip(plain, ids, strict=True):
            out[i] = (new_id, True)
        tagged = [(new_id, jobs[i].tags) for i, new_id in zip(plain, ids, strict=True) if jobs[i].tags]
        if tagged:
            await insert_tags(tx, tagged)
    return [o for o in out if o is not None]


def _plain(job: NewJob) -> bool:
    """Whether ``job`` is inserted without reading first (no unique key, no debounce key, no dependencies)."""
    return job.unique_key is None and job.debounce_key is None and job.depends_on is None


async def _enqueue_unique(tx: Tx, job: NewJob, now: float) -> tuple[int, bool]:
    """Insert a job with a unique key, or return the job that holds the key."""
    key = {"binding": job.binding, "unique_key": job.unique_key}
    await tx.execute(Q.lock_unique, key)
    holder = await tx.fetchone(Q.find_unique, key)
    if holder is not None and (holder.state not in FINISHED_STATES or (
            holder.unique_until is not None and holder.unique_until > now)):
        return holder.id, False
    return await _insert_one(tx, job, now), True


async def _insert_one(tx: Tx, job: NewJob, now: float) -> int:
    """Insert one job and its tags (its dependencies locked first, and recorded); its id."""
    states = await dependencies.lock_dependencies(tx, job) if job.depends_on is not None else None
    (new_id,) = await tx.insert_jobs([_with_event(job, tx.codec)], now)
    if job.tags:
        await insert_tags(tx, [(new_id, job.tags)])
    if states is not None:
        await dependencies.add_waiting(tx, new_id, job, states, now)
    return new_id


async def insert_tags(tx: Tx, tagged: Iterable[tuple[int, tuple[str, ...] | None]]) -> None:
    """Index new jobs' tags (``jobloom_job_tags``): one row per tag and job, for search by tag. Only
    jobs enqueued with tags have any, so an enqueue without tags runs no statement here."""
    rows = [{"tag": tag, "job_id": job_id} for job_id, tags in tagged for tag in tags or ()]
    if rows:
        await tx.executemany(Q.insert_job_tags, rows)


async def enqueue_streamed(tx: Tx, chunks: Iterable[Sequence[NewJob]], now: float) -> list[int]:
    """Insert jobs without unique keys, chunk by chunk (built as the store asks for them); their ids."""

    tags: list[tuple[str, ...] | None] = []

    def rows() -> Iterator[list[dict[str, Any]]]:
        for jobs in chunks:
            if not all(_plain(job) for job in jobs):
                raise ValueError("enqueue_streamed takes jobs without unique or debounce keys or dependencies")
            tags.extend(job.tags for job in jobs)
            yield [_with_event(job, tx.codec) for job in jobs]

    ids = await tx.insert_jobs_streamed(rows(), now)
    if any(tags):
        await insert_tags(tx, zip(ids, tags, strict=True))
    return ids


def _with_event(job: NewJob, codec: Codec) -> dict[str, Any]:
    """The job's row, with the event its insertion records."""
    row = job.params(codec)
    row["event"] = "enqueued" if job.state == "queued" else job.state
    return row


async def report(
    tx: Tx, outcomes: Sequence[Outcome], now: float, *, hooks: EngineHooks,
    locked: list[RunningRow] | None = None,
) -> ReportResult:
    """Apply attempt outcomes. A report for an attempt that is no longer running is never applied.

    ``locked``: the outcomes' jobs as ``lock_running`` read and locked them in this transaction, after
    the runs of the outcomes (:attr:`Outcome.run_id`), as :func:`read_cycle` does.

    What each outcome does is decided by :mod:`~jobloom.engine.report_plan` from the rows read here;
    this function reads them, fences stale reports off, and writes the plan."""
    result = ReportResult()
    if not outcomes:
        return result
    outcomes = unique(outcomes)
    held = sorted({o.run_id for o in outcomes if o.run_id is not None})
    if locked is None:  # the runs first, then the jobs (in one batch: they run in this order)
        *_, rows = await tx.fetch_batch([*((Q.lock_run, {"id": run_id}) for run_id in held),
                                         (Q.lock_running, {"ids": [o.job_id for o in outcomes]})])
    else:
        rows = locked
    current: dict[int, RunningRow] = {r.id: r for r in rows}
    # an outcome without its run id (a caller that did not know it) has its run locked late, out of order
    for run_id in sorted({r.run_id for r in rows if r.run_id is not None} - set(held)):
        await tx.fetchone(Q.lock_run, {"id": run_id})
    asked = spawn_questions(outcomes, current)
    spawned = await hooks.spawned(tx, asked) if asked else {}
    snoozing = [o.job_id for o in outcomes if o.kind == lifecycle.SNOOZED]
    snoozes = {r.id: r.snoozes for r in await tx.fetch(Q.get_snoozes, {"ids": snoozing})} if snoozing else {}
    backoffs: dict[str, Backoff] = {}
    plan = ReportPlan(now, codec=tx.codec)
    for o in outcomes:
        row = current.get(o.job_id)
        if row is None or not plan.live(o, row):
            await _stale(tx, o, row, now, result)
            continue
        if o.kind == lifecycle.SUSPENDED and await _woken(tx, o, row.run_id, row.node, hooks):
            o.retry_after = now
        if needs_backoff(o) and row.binding not in backoffs:
            backoffs[row.binding] = policy_from_row(await tx.fetchone(Q.get_binding, {"binding": row.binding}))[2]
        plan.add(o, row, verdict(o, row, now, spawned=spawned.get(o.job_id), snoozes=snoozes.get(o.job_id, 0),
                                 backoff=backoffs.get(row.binding), rng=_rng))
    await _write_report(tx, plan, hooks)
    if plan.with_dependants:  # after the jobs' own rows: their dependants are counted down now
        result.released += await dependencies.settle(tx, plan.with_dependants, now)
    parents = [p for i in plan.finished if (p := current[i].parent_id) is not None]
    if parents:  # a called child ended: its caller goes on
        result.woken += await wake_callers(tx, parents, now)
    result.applied += plan.applied
    result.finished += plan.finished
    result.ended += plan.ended
    return result


async def _write_report(tx: Tx, plan: ReportPlan, hooks: EngineHooks) -> None:
    """Write what a report plan decided, and tell the flows which of their jobs finished."""
    await tx.executemany(Q.finish_attempt, plan.finishes)
    if plan.snoozed:
        await tx.executemany(Q.snooze_attempt, plan.snoozed)
    if plan.holds:
        await tx.executemany(Q.hold_node, plan.holds)
    await tx.executemany(Q.insert_attempt, plan.attempts)
    await emit(tx, plan.events)
    if plan.in_runs:
        await hooks.finished(tx, plan.in_runs, plan.now)


async def _woken(tx: Tx, o: Outcome, run_id: str | None, node: str | None, hooks: EngineHooks) -> bool:
    """Whether what a suspending job waits for has already happened (so it runs again at once): its
    run's wait (children, sub-run) as the hooks say, or else its event in ``jobloom_signals``."""
    if o.wait is None:
        return False
    children = call_wait(o.wait)
    if children is not None:
        return await children_ended(tx, children)
    if run_id is not None and node is not None:
        over = await hooks.wait_over(tx, o.wait, run_id, node)
        if over is not None:
            return over
    return await tx.fetchone(Q.get_signal, {"job_id": o.job_id, "name": o.wait}) is not None


async def _stale(tx: Tx, o: Outcome, row: RunningRow | None, now: float, result: ReportResult) -> None:
    """An outcome not applied (``row``, the job as locked, no longer runs its claim). The same report again
    is a duplicate. Otherwise it is stale, and is noted beside its attempt's history only where that attempt
    was this claim's: never for a claim lost with the server (the job queued again below the attempt, or
    the attempt number taken again by a re-run's claim), whose history row is then the re-run's own."""
    prior = await tx.fetchone(Q.get_attempt, {"job_id": o.job_id, "attempt": o.attempt})
    ours = prior is not None and prior.worker == o.worker and prior.started_at == o.started_at
    if ours and prior is not None and prior.outcome == o.kind:
        result.duplicate += 1  # the same report, applied before: idempotent
        return
    result.stale.append(o.job_id)
    if prior is None and row is not None and (
            row.attempt > o.attempt or (row.attempt == o.attempt and row.started_at == o.started_at)):
        await tx.execute(Q.insert_attempt, attempt_row(o) | {"outcome": "lost", "error": "lease lost"})
    elif not ours:
        return
    await tx.execute(
        Q.record_stale_report, {"job_id": o.job_id, "attempt": o.attempt, "outcome": o.kind, "at": now}
    )


REAP_LIMIT = 100
PROMOTE_LIMIT = 1000


async def reap(
    tx: Tx, now: float, *, hooks: EngineHooks, limit: int = REAP_LIMIT,
    expired: list[RunningRow] | None = None,
) -> list[int]:
    """Expired leases: the worker is gone. Retry (at-least-once) or ``stalled`` (at-most-once).

    ``expired``: the ``expired_leases`` rows if already read in this transaction.

    The candidates are read without locks; then their runs are locked (in id order) and the jobs
    locked and checked again, both skipping rows that another transaction holds: this may run after
    other locks in a worker's cycle, so it never waits (the jobs it skips are reaped later)."""
    cutoff = now - LEASE_GRACE
    rows = expired if expired is not None else await tx.fetch(Q.expired_leases, {"cutoff": cutoff, "limit": limit})
    if not rows:
        return []
    run_ids = sorted({r.run_id for r in rows if r.run_id is not None})
    if run_ids:
        held = {r[0].id for r in await tx.fetch_batch([(Q.lock_run_skip, {"id": i}) for i in run_ids]) if r}
        rows = [r for r in rows if r.run_id is None or r.run_id in held]
    if rows:
        rows = await tx.fetch(Q.lock_expired, {"ids": sorted(r.id for r in rows), "cutoff": cutoff})
    if not rows:
        return []
    outcomes = [
        Outcome(job_id=r.id, attempt=r.attempt, kind=lifecycle.TIMEOUT if late else lifecycle.LOST,
                worker=r.lease_owner or "?", started_at=r.started_at or now, finished_at=now,
                error=f"timed out after {r.timeout:g} s" if late and r.timeout is not None
                else "lease expired: the worker stopped heartbeating", run_id=r.run_id)
        for r in rows
        for late in [_past_deadline(r, now)]
    ]
    await report(tx, outcomes, now, hooks=hooks, locked=rows)
    return [r.id for r in rows]


def _past_deadline(row: RunningRow, now: float) -> bool:
    """Whether a remote attempt (one with a claim) whose lease expired had reached its timeout: its
    heartbeats could not renew the lease past it, so it timed out rather than was lost."""
    return (row.claim_hash is not None and row.timeout is not None and row.started_at is not None
            and now >= row.started_at + row.timeout)


async def promote(tx: Tx, now: float, *, limit: int = PROMOTE_LIMIT,
                  promoted: list[MovedRow] | None = None) -> int:
    """``scheduled`` jobs whose time has come become ``queued``.

    ``promoted``: the ``promote_due`` rows if that statement already ran in this transaction."""
    rows = promoted if promoted is not None else await tx.fetch(Q.promote_due, {"now": now, "limit": limit})
    await emit(tx, [event(now, r.id, r.binding, "queued", r.attempt) for r in rows])
    return len(rows)


async def expire(tx: Tx, now: float, lapsed: list[ExpiredRow]) -> int:
    """Record the jobs ``expire_due`` ended (read in :func:`read_cycle`): one ``expired`` event each, and
    their endings counted down on the jobs that depend on them."""
    await emit(tx, [event(now, r.id, r.binding, "expired", r.attempt) for r in lapsed])
    awaited = [(r.id, EXPIRED) for r in lapsed if r.dependants]
    if awaited:
        await dependencies.settle(tx, awaited, now)
    parents = [r.parent_id for r in lapsed if r.parent_id is not None]
    if parents:
        await wake_callers(tx, parents, now)
    return len(lapsed)


async def read_cycle(
    tx: Tx, now: float, *, reporting: Sequence[int], worker: str, watching: bool, bindings: Sequence[str],
    runs: Iterable[str | None] = (), prefetch: Mapping[str, tuple[int, bool]] | None = None,
) -> CycleReads:
    """The independent reads that open a worker's cycle, sent together: lock the runs of the jobs
    being reported (``runs``: their :attr:`Outcome.run_id`), then those jobs, find expired leases and
    promote due jobs (skipping rows other transactions hold), the worker's cancel requests, and the
    policies of the bindings to dispatch. Pass the parts on to :func:`report`, :func:`reap`,
    :func:`promote` and :func:`dispatch`.

    A job being reported is left out of the expired leases: its report, applied first, finishes it.
    The bindings are read after ``hold_dispatch``, which serializes the cycle with a pause of any
    of them (``App.pause_binding``).

    ``prefetch``: bindings whose candidates to read too, as :func:`dispatch` would (binding: (limit,
    with priority aging)), before the bindings' policies, so that a policy read here is never older
    than the candidates (:attr:`CycleReads.candidates`; :func:`dispatch` says when it uses them).
    """
    queries: list[tuple[Query[Any] | str, dict[str, Any] | None]] = []
    if bindings:  # first, before any row lock: a pause waits for this cycle, which holds nothing it waits for
        queries.append((Q.hold_dispatch, {"bindings": list(bindings)}))
    run_ids = sorted({r for r in runs if r is not None}) if reporting else []
    queries += [(Q.lock_run, {"id": run_id}) for run_id in run_ids]
    if reporting:
        queries.append((Q.lock_running, {"ids": list(reporting)}))
    queries.append((Q.expired_leases, {"cutoff": now - LEASE_GRACE, "limit": REAP_LIMIT}))
    queries.append((Q.promote_due, {"now": now, "limit": PROMOTE_LIMIT}))
    queries.append((Q.expire_due, {"now": now, "limit": PROMOTE_LIMIT}))  # before any candidate is read
    if watching:
        queries.append((Q.cancel_requests, {"worker": worker}))
    prefetch = prefetch or {}
    for b, (limit, aging) in prefetch.items():
        queries += candidate_reads(b, [], limit, aging=aging)
    queries += [(Q.get_binding, {"binding": b}) for b in bindings]
    results = iter(await tx.fetch_batch(queries))
    if bindings:
        next(results)
    for _ in run_ids:
        next(results)
    locked = next(results) if reporting else None
    ids = set(reporting)
    expired = [r for r in next(results) if r.id not in ids]
    promoted = next(results)
    lapsed = next(results)
    cancels = {(r.id, r.attempt) for r in next(results)} if watching else set()
    candidates = {}
    for b, (limit, aging) in prefetch.items():
        rows = next(results)
        if aging:
            rows = merge_by_age(rows, next(results))
        candidates[b] = Prefetched(rows, limit, aging)
    return CycleReads(locked, expired, promoted, lapsed, cancels, {b: next(results) for b in bindings}, candidates)


async def heartbeat(
    tx: Tx, worker: str, keys: Iterable[tuple[int, int]], now: float, lease: float
) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """Extend the leases of ``worker``'s running attempts, given as (job id, attempt): an attempt that is
    no longer the job's current one is not renewed. Returns (still held, cancel requested)."""
    pairs = sorted(set(keys))
    rows = await tx.fetch(Q.heartbeat, {
        "ids": [k[0] for k in pairs], "attempts": [k[1] for k in pairs], "pairs": [list(k) for k in pairs],
        "worker": worker, "lease_expires": now + lease,
    })
    return {(r.id, r.attempt) for r in rows}, {(r.id, r.attempt) for r in rows if r.cancel_requested}


async def cancel(tx: Tx, job_id: int, now: float, reason: str = "cancelled", *, hooks: EngineHooks) -> str:
    """Cancel at once if not running; ask the worker if running. Returns the resulting state.

    A flow node's run is locked before the node's job (the lock order): its run id is read first."""
    found = await tx.fetchone(Q.job_run, {"id": job_id})
    if found is None:
        raise JobNotFound(job_id)
    row: LockedJobRow | None
    if found.run_id is not None:
        _, rows = await tx.fetch_batch([(Q.lock_run, {"id": found.run_id}), (Q.lock_job, {"id": job_id})])
        row = rows[0] if rows else None
    else:
        row = await tx.fetchone(Q.lock_job, {"id": job_id})
    if row is None:
        raise JobNotFound(job_id)
    state = row.state
    if state in CANCELLABLE_AT_ONCE:
        await tx.execute(Q.cancel_now, {"id": job_id, "now": now, "reason": reason})
        await emit(tx, [event(now, job_id, row.binding, "cancelled", row.attempt)])
        if row.run_id is not None:
            await hooks.finished(tx, [(job_id, row.run_id, row.node, "cancelled")], now)
        if row.dependants:
            await dependencies.settle(tx, [(job_id, "cancelled")], now)
        if row.parent_id is not None:
            await wake_callers(tx, [row.parent_id], now)
        return "cancelled"
    if state == "running":
        await tx.execute(Q.request_cancel, {"id": job_id})
        return "running"
    raise InvalidTransition(job_id, state, "cancel")


async def retry(tx: Tx, job_id: int, now: float) -> None:
    """A person's retry of a ``failed``, ``stalled`` or ``cancelled`` job: queued again, history kept."""
    row = await tx.fetchone(Q.lock_job, {"id": job_id})
    if row is None:
        raise JobNotFound(job_id)
    if row.state not in RETRYABLE_STATES:
        raise InvalidTransition(job_id, row.state, "retry")
    await tx.execute(Q.retry_now, {"id": job_id, "now": now})
    await emit(tx, [event(now, job_id, row.binding, "requeued", row.attempt)])


async def quarantine(tx: Tx, o: Outcome, now: float) -> bool:
    """Fail an attempt whose outcome cannot be applied, by the narrowest statement there is (no result,
    no traceback, no flow bookkeeping): the last resort that keeps one bad job from wedging a worker."""
    row = await tx.fetchone(Q.fail_attempt, fence(o) | {"error": o.error, "now": now})
    if row is None:
        return False
    await tx.execute(Q.insert_attempt, attempt_row(o) | {"outcome": lifecycle.PERMANENT})
    await emit(tx, [event(now, o.job_id, row.binding, "failed", o.attempt, o.finished_at - o.started_at)])
    await dependencies.settle(tx, [(o.job_id, "failed")], now)  # the last resort: no row to tell if it has any
    if (caller := await tx.fetchone(Q.parent_of, {"id": o.job_id})) is not None:
        await wake_callers(tx, [caller.parent_id], now)
    return True


async def release(tx: Tx, worker: str, claims: Iterable[tuple[int, int, str]], now: float) -> int:
    """Give back claimed jobs that never started (graceful shutdown): ``queued`` again, no attempt spent."""
    n = 0
    for job_id, attempt, binding in claims:
        if await tx.execute(Q.release, {"id": job_id, "attempt": attempt, "worker": worker}):
            n += 1
            await emit(tx, [event(now, job_id, binding, "released", attempt - 1)])
    return n


async def next_due(tx: Tx) -> float | None:
    """The earliest moment something becomes due: a scheduled job, a job's expiry, or a lease to reap."""
    moments = []
    for query in (Q.next_scheduled, Q.next_expiry):
        row = await tx.fetchone(query)
        if row and row.at is not None:
            moments.append(float(row.at))
    row = await tx.fetchone(Q.next_lease_expiry)
    if row and row.at is not None:
        moments.append(float(row.at) + LEASE_GRACE)
    return min(moments) if moments else None
