"""The projector: folds the outbox (``jobloom_events``) into the read model behind ``App.stats``.

The read model holds, per binding and minute (kept a day) and per binding and hour (kept as long as
the read model), how many jobs were enqueued, started, succeeded,
failed, retried, cancelled, stalled and expired, and a histogram of attempt run times (logarithmic buckets,
about 5 % wide, so percentiles are estimates within that). It never decides anything: the
projector failing or lagging changes no job, and ``App.stats`` reports how many events wait.

Exactly once: one transaction locks the projector's cursor row, has the store count the oldest
events in the outbox (by seq) per binding, minute, kind and run-time bucket, adds those counts to
the read model, deletes the events from the outbox and records the last seq folded in the cursor.
Every event left in the outbox is therefore one not counted yet, and a crash anywhere rolls all of
that back, so the next pass (in any worker) finds the same events. On
PostgreSQL transactions may commit out of seq order: an event committed late is simply found on a
later pass, and nothing is skipped or counted twice. Two workers never project at once: SQLite's
write lock serializes them; on PostgreSQL the cursor row is taken with ``SKIP LOCKED`` and the other
worker simply does nothing this time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from jobloom.core.errors import InvalidOption
from jobloom.core.histogram import HIST_BASE, HIST_RATIO, bucket_of, bucket_value, timed_bucket
from jobloom.core.queries import Q, Query
from jobloom.core.rows import FoldedEventsRow, ProjectedEventRow, StatsRow

if TYPE_CHECKING:
    from jobloom.store.base import Store, Tx

CURSOR = "stats"
BATCH = 1000
EMPTY_FIRST = 0.25  # the shortest wait after a pass that found nothing
MINUTE_RETENTION = 86400.0
"""Per-minute rows of the read model are kept this long (a day); hourly rows as long as the read model."""
COUNTERS = ("enqueued", "started", "succeeded", "failed", "retried", "cancelled", "stalled", "expired")
# event kind -> counter; "scheduled" and "waiting" are enqueues of delayed jobs and flow nodes
_COUNTER_OF = {"enqueued": "enqueued", "scheduled": "enqueued", "waiting": "enqueued", "started": "started",
               "succeeded": "succeeded", "failed": "failed", "retried": "retried", "cancelled": "cancelled",
               "stalled": "stalled", "expired": "expired"}


def percentile(histogram: dict[int, int], q: float, top: float | None = None) -> float | None:
    """The ``q`` quantile (0..1) of the run times in ``histogram``; never above ``top`` (the max seen)."""
    total = sum(histogram.values())
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for index in sorted(histogram):
        seen += histogram[index]
        if seen >= rank:
            value = bucket_value(index)
            return min(value, top) if top is not None else value
    return top  # pragma: no cover - the loop always reaches rank


@dataclass(slots=True)
class Tally:
    """What happened in one (binding, minute), or in a merge of several."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    runs: int = 0
    run_time: float = 0.0
    run_max: float | None = None
    histogram: dict[int, int] = field(default_factory=dict)

    def add_event(self, kind: str, duration: float | None) -> None:
        """Count one outbox event."""
        bucket = timed_bucket(kind, duration)
        if bucket is not None and duration is not None:
            self.add(kind, 1, bucket, duration, duration)
        else:
            self.add(kind, 1)

    def add(self, kind: str, n: int, bucket: int | None = None, total: float = 0.0, top: float = 0.0) -> None:
        """Count ``n`` events of ``kind``; with a ``bucket``, ``n`` attempt run times in it, adding up to
        ``total`` seconds, the longest ``top``."""
        counter = _COUNTER_OF.get(kind)
        if counter is not None:
            self.counts[counter] += n
        if bucket is not None:
            self.runs += n
            self.run_time += total
            self.run_max = top if self.run_max is None else max(self.run_max, top)
            self.histogram[bucket] = self.histogram.get(bucket, 0) + n

    def merge(self, other: Tally) -> None:
        """Add another tally to this one."""
        for k, v in other.counts.items():
            self.counts[k] += v
        self.runs += other.runs
        self.run_time += other.run_time
        if other.run_max is not None:
            self.run_max = other.run_max if self.run_max is None else max(self.run_max, other.run_max)
        for b, n in other.histogram.items():
            self.histogram[b] = self.histogram.get(b, 0) + n

    @classmethod
    def from_row(cls, row: StatsRow) -> Tally:
        """From a ``jobloom_stats`` record (its counters, run times and histogram)."""
        counts = {name: int(getattr(row, name)) for name in COUNTERS}
        hist = {int(k): int(v) for k, v in json.loads(row.histogram or "{}").items()}
        return cls(counts, int(row.runs), float(row.run_time), None if row.run_max is None else float(row.run_max),
                   hist)

    def params(self, binding: str, minute: int) -> dict[str, Any]:
        """The parameters of ``upsert_stats``."""
        return {"binding": binding, "minute": minute, **self.counts, "runs": self.runs, "run_time": self.run_time,
                "run_max": self.run_max, "histogram": json.dumps(self.histogram, separators=(",", ":"))}

    def figures(self) -> Figures:
        """The public, read-only view."""
        h, top = self.histogram, self.run_max
        return Figures(
            **self.counts, runs=self.runs, mean=self.run_time / self.runs if self.runs else None, max=top,
            p50=percentile(h, 0.50, top), p90=percentile(h, 0.90, top), p99=percentile(h, 0.99, top),
        )


@dataclass(frozen=True, slots=True)
class Figures:
    """Counts and attempt run times (seconds; percentiles within about 5 %) over a window."""

    enqueued: int = 0
    started: int = 0
    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    cancelled: int = 0
    stalled: int = 0
    expired: int = 0
    runs: int = 0
    mean: float | None = None
    max: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


@dataclass(frozen=True, slots=True)
class Stats:
    """``await app.stats(...)``: totals, per binding, and per minute (for charts), since ``since``.

    ``pending_events`` counts outbox events not folded in yet: the read model's lag.
    """

    since: datetime
    total: Figures
    bindings: dict[str, Figures]
    minutes: list[tuple[datetime, Figures]]
    pending_events: int


# -- folding ------------------------------------------------------------------------------------------


def fold(events: Iterable[ProjectedEventRow]) -> dict[tuple[str, int], Tally]:
    """Tally outbox events (``project_events`` records, each one event or several counted together) per
    (binding, minute), one row at a time: the reference the store's own counting (``fold_events``) is
    tested against."""
    out: dict[tuple[str, int], Tally] = {}
    for e in events:
        key = (e.binding, int(e.at // 60))
        tally = out.get(key)
        if tally is None:
            tally = out[key] = Tally()
        if e.n == 1:
            tally.add_event(e.kind, e.duration)
        elif e.bucket is not None and e.duration is not None:
            tally.add(e.kind, e.n, e.bucket, e.duration, e.duration if e.top is None else e.top)
        else:
            tally.add(e.kind, e.n)
    return out


def tally_groups(groups: Iterable[FoldedEventsRow]) -> dict[tuple[str, int], Tally]:
    """Tally ``fold_events`` records (events the store counted per binding, minute, kind and run-time
    bucket) per (binding, minute)."""
    out: dict[tuple[str, int], Tally] = {}
    for g in groups:
        key = (g.binding, int(g.minute))
        tally = out.get(key)
        if tally is None:
            tally = out[key] = Tally()
        if g.bucket is not None and g.total is not None and g.top is not None:
            tally.add(g.kind, int(g.n), int(g.bucket), float(g.total), float(g.top))
        else:
            tally.add(g.kind, int(g.n))
    return out


@dataclass(frozen=True, slots=True)
class Folded:
    """What one projector pass folded: ``rows`` outbox rows counting ``events`` events."""

    rows: int = 0
    events: int = 0


async def project_once(store: Store, *, limit: int = BATCH, name: str = CURSOR) -> int:
    """Fold the oldest ``limit`` outbox rows, and delete them, in one transaction; return how many events
    they counted (a row may count several)."""
    return (await fold_batch(store, limit=limit, name=name)).events


async def fold_batch(store: Store, *, limit: int = BATCH, name: str = CURSOR) -> Folded:
    """Fold the oldest ``limit`` outbox rows, and delete them, in one transaction.

    The store counts the events per binding, minute, kind and run-time bucket (``fold_events``), so a
    batch of 1,000 outbox rows comes back as a few dozen records.
    """

    async def work(tx: Tx) -> Folded:
        await tx.execute(Q.init_projector, {"name": name, "now": store.now()})
        cursor = await tx.fetchone(Q.lock_projector, {"name": name})
        if cursor is None:  # another worker is projecting (PostgreSQL): it will fold these events
            return Folded()
        groups = await tx.fetch(Q.fold_events, {"limit": limit})
        if not groups:
            return Folded()
        last_seq = max(int(g.last_seq) for g in groups)
        await tx.execute(Q.prune_folded_events, {"last_seq": last_seq})
        tallies = tally_groups(groups)
        hours: dict[tuple[str, int], Tally] = {}
        for (b, m), t in tallies.items():
            hours.setdefault((b, m - m % 60), Tally()).merge(t)
        await _add_rows(tx, tallies, Q.stats_rows_for, "upsert_stats")
        await _add_rows(tx, hours, Q.stats_hourly_rows_for, "upsert_stats_hourly")
        await tx.execute(Q.save_projector, {"name": name, "last_seq": last_seq, "now": store.now()})
        return Folded(rows=sum(int(g.rows) for g in groups), events=sum(int(g.n) for g in groups))

    return await store.transact(work)


async def _add_rows(tx: Tx, tallies: dict[tuple[str, int], Tally], read: Query[StatsRow], upsert: str) -> None:
    """Add ``tallies`` (per binding and minute, or hour) to the read model's rows of ``read`` / ``upsert``."""
    minutes = [m for _, m in tallies]
    bindings = sorted({b for b, _ in tallies})
    for row in await tx.fetch(read, {"bindings": bindings, "lo": min(minutes), "hi": max(minutes)}):
        key = (row.binding, int(row.minute))
        if key in tallies:
            tallies[key].merge(Tally.from_row(row))
    await tx.executemany(upsert, [t.params(b, m) for (b, m), t in tallies.items()])


class Projector:
    """The housekeeper that keeps the read model up to date.

    It runs again at once while it finds full batches (``batch`` outbox rows), after ``busy`` seconds
    when it found some events, and when it found none, after ``busy`` seconds again (at least
    ``EMPTY_FIRST``), then twice as long after each further empty pass, up to ``idle``. A worker
    draining a backlog can leave the outbox empty for an instant between its commits; backing off at
    once to ``idle`` there would leave that many seconds of its events unfolded. So while events keep
    coming, the read model is at most about ``busy`` seconds behind (plus one pass), however fast the
    drain: each pass folds what came since the last one, and full batches are folded without pause.
    """

    name = "projector"

    def __init__(self, *, batch: int = BATCH, busy: float = 1.0, idle: float = 5.0) -> None:
        self.batch = batch
        self.busy = busy
        self.idle = idle
        self._next = 0.0
        self._empty = 0  # empty passes in a row

    async def next_due(self, store: Store, now: float) -> float | None:
        """When to fold next (kept in memory)."""
        return self._next

    async def planned(self, store: Store, now: float) -> float | None:
        """Nothing: folding events depends on no moment."""
        return None

    async def run(self, store: Store, now: float) -> bool:
        """Fold one batch; the read model never makes jobs runnable, so this returns False."""
        self._next = now + self.idle  # a failing run is not retried at once
        folded = await fold_batch(store, limit=self.batch)
        self._next = now + self._delay(folded)
        return False

    def _delay(self, folded: Folded) -> float:
        """How long to wait after a pass that folded ``folded`` (and count the empty passes in a row)."""
        if folded.rows >= self.batch:
            self._empty = 0
            return 0.0
        if folded.events:
            self._empty = 0
            return self.busy
        self._empty += 1
        return min(self.idle, max(self.busy, EMPTY_FIRST) * 2.0 ** (self._empty - 1))


# -- reading ------------------------------------------------------------------------------------------


def _since(since: Any, now: float) -> float:
    if since is None:
        return now - 3600.0
    if isinstance(since, datetime):
        if since.tzinfo is None:
            raise InvalidOption("since", since, "a timezone-aware datetime, a timedelta or epoch seconds")
        return since.timestamp()
    if isinstance(since, timedelta):
        return now - since.total_seconds()
    if isinstance(since, int | float) and not isinstance(since, bool):
        return float(since)
    raise InvalidOption("since", since, "a timezone-aware datetime, a timedelta (ago) or epoch seconds")


def hourly_from(now: float) -> int:
    """The first minute (a whole hour) from which per-minute rows are read: before it, hourly rows (per-minute
    rows are kept :data:`MINUTE_RETENTION` seconds, so every minute from this hour on is still there)."""
    first = int((now - MINUTE_RETENTION) // 60) + 1
    return -(-first // 60) * 60


async def read_stats(store: Store, *, binding: str | None = None, since: Any = None) -> Stats:
    """The read model since ``since`` (default: the last hour), for one binding or all.

    ``since`` is an aware datetime, a timedelta (that long ago) or epoch seconds; it is rounded down
    to its minute, the read model's grain (to its hour, when it is older than the per-minute rows kept:
    :data:`MINUTE_RETENTION`). ``minutes`` holds one entry per minute of the last day, per hour before.
    """
    now = store.now()
    start = int(_since(since, now) // 60)
    cut = hourly_from(now)
    if start < cut:
        start -= start % 60

    async def work(tx: Tx) -> tuple[list[StatsRow], int]:
        rows = []
        if start < cut:
            rows = await tx.fetch(Q.stats_hourly_since, {"minute": start, "until": cut, "binding": binding})
        rows += await tx.fetch(Q.stats_since, {"minute": max(start, cut),
                                               "binding": binding})
        pending = await tx.fetchone(Q.count_unprojected)
        return rows, int(pending.n) if pending else 0

    rows, pending = await store.transact(work, exclusive=False)
    return _stats(start, rows, pending)


async def read_hours(store: Store, *, since: Any = None) -> Stats:
    """The read model's hourly rows since ``since`` (rounded down to its hour), every binding: ``minutes``
    holds one entry per hour (the current hour so far included). A week is 168 rows per binding."""
    start = int(_since(since, store.now()) // 60)
    start -= start % 60

    async def work(tx: Tx) -> tuple[list[StatsRow], int]:
        rows = await tx.fetch(Q.stats_hourly_since, {"minute": start, "until": 2**62, "binding": None})
        pending = await tx.fetchone(Q.count_unprojected)
        return rows, int(pending.n) if pending else 0

    rows, pending = await store.transact(work, exclusive=False)
    return _stats(start, rows, pending)


def _stats(start: int, rows: list[StatsRow], pending: int) -> Stats:
    total = Tally()
    per_binding: dict[str, Tally] = {}
    per_minute: dict[int, Tally] = {}
    for row in rows:
        tally = Tally.from_row(row)
        total.merge(tally)
        per_binding.setdefault(row.binding, Tally()).merge(tally)
        per_minute.setdefault(int(row.minute), Tally()).merge(tally)
    return Stats(
        since=datetime.fromtimestamp(start * 60, UTC), total=total.figures(),
        bindings={b: t.figures() for b, t in sorted(per_binding.items())},
        minutes=[(datetime.fromtimestamp(m * 60, UTC), t.figures()) for m, t in sorted(per_minute.items())],
        pending_events=pending,
    )


__all__ = [
    "BATCH",
    "COUNTERS",
    "EMPTY_FIRST",
    "HIST_BASE",
    "HIST_RATIO",
    "MINUTE_RETENTION",
    "Figures",
    "Folded",
    "Projector",
    "Stats",
    "Tally",
    "bucket_of",
    "bucket_value",
    "fold",
    "fold_batch",
    "hourly_from",
    "percentile",
    "project_once",
    "read_hours",
    "read_stats",
]
