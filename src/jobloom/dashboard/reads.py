"""The dashboard's own reads, each through an active-state index or a small table: bindings' token
buckets, queue latency, running jobs per concurrency key and per worker, a run with its children
counted and paged, a job's steps, its events still in the outbox and its notes, and counting the jobs a
bulk action would touch."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from jobloom.app.search import JobFilter, page_rows
from jobloom.core.codecs import decoded
from jobloom.core.decide import refill
from jobloom.core.queries import Q
from jobloom.core.rows import BindingMomentRow, BindingRow, EventRow, HeldRow, KeyCountRow, MomentRow, NoteRow, StepRow
from jobloom.core.types import Bucket, NodeState, Policy, Run
from jobloom.engine import registry
from jobloom.engine.registry import WorkerInfo
from jobloom.flows.api import run_from
from jobloom.store import Store, Tx

COUNT_CAP = 100_000
"""A bulk action's confirmation counts at most this many jobs (then says "more than")."""
_COUNT_PAGE = 1000


@dataclass(frozen=True, slots=True)
class WorkerView:
    """A registered worker, whether it is alive, and the jobs it runs now."""

    info: WorkerInfo
    alive: bool
    running: tuple[HeldRow, ...]


async def binding_rows(store: Store) -> dict[str, BindingRow]:
    """Every binding's stored row (limits, overrides, token bucket), by name."""

    async def work(tx: Tx) -> list[BindingRow]:
        return await tx.fetch(Q.list_bindings)

    return {r.binding: r for r in await store.transact(work, exclusive=False)}


def tokens_now(row: BindingRow | None, policy: Policy, now: float) -> float | None:
    """The rate tokens a binding has now (its stored bucket refilled to ``now``); None without a rate."""
    if policy.rate is None:
        return None
    bucket = None if row is None or row.tokens is None or row.tokens_at is None else Bucket(row.tokens, row.tokens_at)
    filled = refill(bucket, policy, now)
    return None if filled is None else filled.tokens


async def running_keys(store: Store, bindings: list[str]) -> dict[str, list[KeyCountRow]]:
    """Running jobs per concurrency key of each binding (the running jobs' index)."""
    if not bindings:
        return {}

    async def work(tx: Tx) -> list[list[KeyCountRow]]:
        return await tx.fetch_batch([(Q.running_by_key, {"binding": b}) for b in bindings])

    return dict(zip(bindings, await store.transact(work, exclusive=False), strict=True))


async def queue_latency(store: Store, queued: list[str], now: float) -> dict[str, float]:
    """Per binding, how long its oldest runnable job has waited (seconds since it became due): the first
    entry of the queued jobs' index by age of each binding in ``queued`` (those with queued jobs), and the
    scheduled jobs already due but not promoted yet (the scheduled jobs' index up to now)."""

    async def work(tx: Tx) -> tuple[list[list[MomentRow]], list[BindingMomentRow]]:
        found = await tx.fetch_batch([(Q.oldest_queued, {"binding": b}) for b in queued]) if queued else []
        return found, await tx.fetch(Q.overdue_scheduled, {"now": now})

    found, overdue = await store.transact(work, exclusive=False)
    oldest: dict[str, float] = {}
    for binding, rows in zip(queued, found, strict=True):
        if rows and rows[0].at is not None:
            oldest[binding] = float(rows[0].at)
    for row in overdue:
        oldest[row.binding] = min(oldest.get(row.binding, row.at), float(row.at))
    return {b: max(0.0, now - at) for b, at in oldest.items()}


async def workers(store: Store) -> list[WorkerView]:
    """Every registered worker with the jobs it runs (alive ones first, then by name)."""

    async def work(tx: Tx) -> tuple[list[WorkerInfo], list[list[HeldRow]]]:
        found = await registry.workers(tx)
        held = await tx.fetch_batch([(Q.running_of_worker, {"worker": w.name}) for w in found]) if found else []
        return found, held

    found, held = await store.transact(work, exclusive=False)
    now = store.now()
    views = [WorkerView(w, w.alive(now), tuple(h)) for w, h in zip(found, held, strict=True)]
    return sorted(views, key=lambda v: (not v.alive, v.info.name))


@dataclass(frozen=True, slots=True)
class RunView:
    """A run as its page shows it: the flow's own nodes (``run.nodes``), each node's children counted by
    state, and one page of one node's children."""

    run: Run
    children: dict[str, Counter[str]]
    page: list[NodeState]


async def run_view(store: Store, run_id: str, shown: str | None, offset: int, limit: int) -> RunView | None:
    """A run without reading each of its children (a fan-out may have made 10,000): its row, the jobs of its
    own nodes, its children counted per node and state, and ``limit`` children of node ``shown`` from
    ``offset`` (None if there is no such run)."""

    async def work(tx: Tx) -> RunView | None:
        row = await tx.fetchone(Q.get_run, {"id": run_id})
        if row is None:
            return None
        queries: list[tuple[Any, dict[str, Any]]] = [(Q.run_top_jobs, {"run_id": run_id}),
                                                     (Q.run_child_counts, {"run_id": run_id})]
        if shown is not None:
            queries.append((Q.run_children_page, {"run_id": run_id, "top": shown, "limit": limit, "offset": offset}))
        found = await tx.fetch_batch(queries)
        children: dict[str, Counter[str]] = {}
        for c in found[1]:
            children.setdefault(c.top, Counter())[c.state] += int(c.n)
        page = list(run_from(row, found[2], tx.codec).nodes.values()) if shown is not None else []
        return RunView(run_from(row, found[0], tx.codec), children, sorted(page, key=lambda n: n.job_id))

    return await store.transact(work, exclusive=False)


async def steps_and_events(store: Store, job_id: int) -> tuple[list[StepRow], list[EventRow], list[NoteRow]]:
    """A job's durable steps, its events not yet folded into the read model, and the notes people left on it."""

    async def work(tx: Tx) -> tuple[list[StepRow], list[EventRow], list[NoteRow]]:
        steps, events, notes = await tx.fetch_batch([(Q.get_steps, {"job_id": job_id}),
                                                     (Q.job_events, {"job_id": job_id}),
                                                     (Q.job_notes, {"job_id": job_id})])
        shown = [decoded(tx.codec, s, "result", f"{s.name} of job {job_id}", soft=True) for s in steps]
        return shown, events, notes

    return await store.transact(work, exclusive=False)


async def count_matching(store: Store, f: JobFilter, allowed: frozenset[str], cap: int = COUNT_CAP) -> int:
    """How many jobs in ``allowed`` states match ``f`` (up to ``cap``), read through the search indexes
    as the bulk actions read them."""
    states = f.restricted(allowed)
    if not states:
        return 0
    narrowed = JobFilter(states, f.binding, f.tag_list, f.unique_key, f.text, f.after_ts, f.before_ts,
                         f.payload_text)
    before, n = 2**63 - 1, 0
    while n < cap:
        async def work(tx: Tx, before: int = before) -> list[int]:
            return [int(r.id) for r in await page_rows(tx, narrowed, limit=_COUNT_PAGE, before=before)]

        ids = await store.transact(work, exclusive=False)
        n += len(ids)
        if len(ids) < _COUNT_PAGE:
            break
        before = min(ids)
    return min(n, cap)


__all__ = [
    "COUNT_CAP",
    "RunView",
    "WorkerView",
    "binding_rows",
    "count_matching",
    "queue_latency",
    "run_view",
    "running_keys",
    "steps_and_events",
    "tokens_now",
    "workers",
]
