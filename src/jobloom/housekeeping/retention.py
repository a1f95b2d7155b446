"""Retention: finished jobs are deleted, with their history, once their binding's retention has passed.

A finished flow run is deleted with the last of its jobs (its id may then start a new run).

Each performer's ``retention`` (default: succeeded 1 day; failed, stalled, cancelled, skipped and expired
7 days) applies to its binding. The app that performs a binding stores its retention with the
binding when its workers start (:meth:`App.register_bindings`), and every app prunes each binding by
that stored retention, so an app that only enqueues (or the CLI) keeps another app's jobs as long
as the app that performs them does. An app's own performers use its own specs (which is what it
stores); a binding with no stored retention gets the defaults. Deletion goes in bounded batches,
one short transaction each, so no lock is held for long and dispatch never waits on a large delete.
The read model's hourly rows are kept ``stats_retention`` seconds (30 days), its per-minute rows a day
(``MINUTE_RETENTION``: charts of longer windows read the hourly rows).

The history of a job is every row kept per job: each named query ``prune_history_*`` of the store's
dialect (attempts, and whatever other concepts add) is run for each batch with the batch's ids.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobloom.core.queries import Q
from jobloom.core.rows import PruneRow, RetentionRow
from jobloom.engine.offload import Offload, blob_ids
from jobloom.engine.performer import retention_of
from jobloom.housekeeping.stats import MINUTE_RETENTION
from jobloom.store.sql import load_queries

if TYPE_CHECKING:
    from collections.abc import Mapping

    from jobloom.engine.performer import PerformerSpec
    from jobloom.store.base import Store, Tx

DEFAULTS: dict[str, float] = retention_of(None, "")
STATS_RETENTION = 30 * 86400.0


def retention_json(retention: dict[str, float]) -> str:
    """A retention (state -> seconds) as stored with its binding."""
    return json.dumps(retention, sort_keys=True)


def parse_retention(text: str) -> dict[str, float]:
    """A stored retention over the defaults: states it lacks (or gives no number for) keep the default."""
    out = dict(DEFAULTS)
    try:
        stored = json.loads(text)
    except ValueError:
        return out
    if isinstance(stored, dict):
        for state, seconds in stored.items():
            if state in out and isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds >= 0:
                out[state] = float(seconds)
    return out


async def stored_retentions(store: Store) -> dict[str, dict[str, float]]:
    """The retention stored with each binding by the app that performs it."""

    async def work(tx: Tx) -> list[RetentionRow]:
        return await tx.fetch(Q.binding_retentions)

    return {str(r.binding): parse_retention(r.retention or "") for r in await store.transact(work, exclusive=False)}


def retention_groups(
    specs: Mapping[str, PerformerSpec], stored: dict[str, dict[str, float]] | None = None
) -> list[tuple[str, float, list[str]]]:
    """(state, seconds, bindings) grouped by equal retention: the app's own bindings by its specs, the
    others that have a ``stored`` retention by it."""
    retention = {binding: dict(r) for binding, r in (stored or {}).items()}
    retention.update((binding, spec.retention) for binding, spec in specs.items())
    groups: dict[tuple[str, float], list[str]] = defaultdict(list)
    for binding, by_state in sorted(retention.items()):
        for state, seconds in by_state.items():
            groups[(state, seconds)].append(binding)
    return [(state, seconds, bindings) for (state, seconds), bindings in sorted(groups.items())]


def _history_queries(dialect: str) -> list[str]:
    return sorted(name for name in load_queries(dialect) if name.startswith("prune_history_"))


async def prune_batch(
    store: Store, *, state: str, cutoff: float, bindings: list[str], others: bool, limit: int,
    offload: Offload | None = None,
) -> int:
    """Delete up to ``limit`` jobs in ``state`` finished before ``cutoff``, with their history (and the
    finished flow runs whose last jobs they were), and then their blobs from ``offload``'s store.

    ``others=False``: jobs of ``bindings``; ``others=True``: jobs of every other binding that has no
    stored retention.
    """
    blobs: list[str] = []

    async def work(tx: Tx) -> int:
        blobs.clear()  # a transaction retried reads them again
        rows = await tx.fetch(Q.prune_pick_others if others else Q.prune_pick,
                              {"state": state, "cutoff": cutoff, "bindings": bindings, "limit": limit})
        return await delete_jobs(tx, rows, store.dialect, None if offload is None else blobs)

    deleted = await store.transact(work)
    if offload is not None:
        await offload.forget(blobs)
    return deleted


async def delete_jobs(tx: Tx, rows: Sequence[PruneRow], dialect: str, blobs: list[str] | None = None) -> int:
    """Delete the picked (and locked) jobs, ``(id, run_id)`` rows, with their history (every
    ``prune_history_*`` query) and the finished flow runs whose last jobs they were; the number deleted.
    ``blobs``: a list to add the ids of the blobs they refer to (to delete once this commits)."""
    ids = [int(r.id) for r in rows]
    if not ids:
        return 0
    if blobs is not None:
        blobs.extend(blob_ids(r.ref for r in await tx.fetch(Q.blob_refs_of_jobs, {"ids": ids})))
    await tx.execute(Q.prune_batches, {"ids": ids})  # before prune_history_batch_jobs
    for name in _history_queries(dialect):
        await tx.execute(name, {"ids": ids})
    deleted = await tx.execute(Q.prune_jobs, {"ids": ids})
    runs = sorted({r.run_id for r in rows if r.run_id is not None})
    if runs:  # a finished flow run goes with the last of its jobs
        await tx.fetch(Q.lock_pruned_runs, {"ids": runs})
        await tx.execute(Q.prune_runs, {"ids": runs})
    return deleted


async def prune(store: Store, specs: Mapping[str, PerformerSpec], now: float, *, batch: int = 500,
                max_batches: int = 20, stats_retention: float = STATS_RETENTION,
                offload: Offload | None = None) -> tuple[int, bool]:
    """Prune what is past retention, at most ``max_batches`` full batches; return (jobs deleted, more left).

    ``specs``: the app's own performers, whose retention is their spec's; ``offload``: the app's blob
    store, whose blobs of the deleted jobs are deleted too."""
    groups = retention_groups(specs, await stored_retentions(store))
    own = sorted(specs)
    plan: list[tuple[str, float, list[str], bool]] = [(s, secs, b, False) for s, secs, b in groups]
    plan += [(state, secs, own, True) for state, secs in DEFAULTS.items()]
    deleted = 0
    full = 0
    for state, seconds, bindings, others in plan:
        while True:
            n = await prune_batch(store, state=state, cutoff=now - seconds, bindings=bindings, others=others,
                                  limit=batch, offload=offload)
            deleted += n
            if n < batch:
                break
            full += 1
            if full >= max_batches:
                return deleted, True

    async def stats(tx: Tx) -> int:
        minutes = await tx.execute(Q.prune_stats, {"minute": int((now - min(stats_retention, MINUTE_RETENTION)) // 60),
                                                   "limit": batch})
        hours = await tx.execute(Q.prune_stats_hourly, {"minute": int((now - stats_retention) // 60), "limit": batch})
        return max(minutes, hours)

    more = await store.transact(stats) >= batch
    return deleted, more


class RetentionKeeper:
    """The housekeeper that prunes finished jobs: every ``interval`` seconds, or at once while a run
    left more to delete (each run deletes at most ``max_batches`` batches of ``batch`` jobs)."""

    name = "retention"

    def __init__(self, specs: Mapping[str, PerformerSpec], *, interval: float = 60.0, batch: int = 500,
                 max_batches: int = 20) -> None:
        self.specs = specs
        self.interval = interval
        self.batch = batch
        self.max_batches = max_batches
        self._next = 0.0
        self.deleted = 0
        self.offload: Offload | None = None  # the app's blob store (set by App(blobs=...))

    async def next_due(self, store: Store, now: float) -> float | None:
        """When to prune next (kept in memory)."""
        return self._next

    async def planned(self, store: Store, now: float) -> float | None:
        """Nothing: pruning catches up at whatever moment it runs."""
        return None

    async def run(self, store: Store, now: float) -> bool:
        """Prune one round; deleting jobs never makes any runnable, so this returns False."""
        self._next = now + self.interval
        deleted, more = await prune(store, self.specs, now, batch=self.batch, max_batches=self.max_batches,
                                    offload=self.offload)
        self.deleted += deleted
        if more:
            self._next = store.now()
        return False


__all__ = [
    "DEFAULTS", "STATS_RETENTION", "RetentionKeeper", "delete_jobs", "parse_retention", "prune", "prune_batch",
    "retention_groups", "retention_json", "stored_retentions",
]
