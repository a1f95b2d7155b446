"""The projector and the read model on every store: exact counts, run-time percentiles, exactly once
across crashes and concurrent projectors, pruning of consumed events, and jobs untouched by its failures."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jobloom
from jobloom.core.rows import ProjectedEventRow
from jobloom.engine.jobs import emit, event
from jobloom.housekeeping import stats as projector
from jobloom.housekeeping.stats import Tally, bucket_of, bucket_value, percentile, project_once
from jobloom.store.base import Store, Tx
from tests.helpers import eventually


class Ok(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Boom(jobloom.Performer[dict[str, Any], None]):
    max_attempts = 2
    backoff = jobloom.Backoff.fixed(0)

    async def perform(self, payload: dict[str, Any]) -> None:
        raise RuntimeError("boom")


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[jobloom.App]:
    app = jobloom.App(store_url, performers=[Ok, Boom], auto_migrate=True, lease=1.0)
    yield app
    await app.close()


async def project_all(store: Store, limit: int = projector.BATCH) -> int:
    """Fold until no event is left (on PostgreSQL an event of a transaction still open is folded once
    it commits)."""
    total = 0

    async def folded_everything() -> bool:
        nonlocal total
        while n := await project_once(store, limit=limit):
            total += n
        return await unprojected(store) == 0

    await eventually(folded_everything, timeout=30, interval=0.05, what="every event folded")
    return total


async def add_events(store: Store, rows: list[dict[str, Any]]) -> None:
    async def work(tx: Tx) -> None:
        await tx.executemany("insert_event", rows)

    await store.transact(work)


async def unprojected(store: Store) -> int:
    async def work(tx: Tx) -> int:
        row = await tx.fetchone("count_unprojected")
        return int(row[0]) if row else 0

    return await store.transact(work, exclusive=False)


# -- the histogram ------------------------------------------------------------------------------------


def test_percentiles_are_within_five_percent() -> None:
    rng = random.Random(7)
    durations = sorted(rng.lognormvariate(-2.0, 1.2) for _ in range(5000))
    tally = Tally()
    for d in durations:
        tally.add_event("succeeded", d)
    figures = tally.figures()
    for q, got in ((0.5, figures.p50), (0.9, figures.p90), (0.99, figures.p99)):
        exact = durations[int(q * len(durations)) - 1]
        assert got is not None and abs(got - exact) / exact < 0.06, (q, got, exact)
    assert figures.max == durations[-1] and figures.runs == 5000
    assert figures.mean == pytest.approx(sum(durations) / 5000)


def test_buckets_cover_tiny_and_huge_run_times() -> None:
    assert bucket_of(0.0) == 0 and bucket_of(1e-6) == 0
    for seconds in (0.0001, 0.02, 1.0, 3600.0, 86400.0):
        assert abs(bucket_value(bucket_of(seconds)) - seconds) / seconds < 0.05
    assert percentile({}, 0.5) is None
    assert percentile({bucket_of(2.0): 3}, 0.5, top=1.99) == 1.99  # never above the largest seen


# -- counting -----------------------------------------------------------------------------------------


async def test_stats_count_what_happened_per_binding(app: jobloom.App) -> None:
    await app.enqueue_many([(Ok, {}) for _ in range(5)])
    await app.enqueue(Boom, {})
    doomed = await app.enqueue(Ok, {}, delay=3600)
    await app.cancel(doomed.id)
    for _ in range(3):
        await app.drain()
    store = await app.store()
    await project_all(store)
    stats = await app.stats()
    ok, boom = stats.bindings["Ok"], stats.bindings["Boom"]
    assert (ok.enqueued, ok.started, ok.succeeded, ok.cancelled, ok.failed) == (6, 5, 5, 1, 0)
    assert (boom.enqueued, boom.started, boom.retried, boom.failed, boom.succeeded) == (1, 2, 1, 1, 0)
    assert ok.runs == 5 and boom.runs == 2 and ok.p50 is not None and ok.p99 is not None
    assert stats.total.enqueued == 7 and stats.pending_events == 0
    assert [f.enqueued for _, f in stats.minutes] and sum(f.enqueued for _, f in stats.minutes) == 7
    only = await app.stats(binding="Boom")
    assert set(only.bindings) == {"Boom"} and only.total.failed == 1
    later = await app.stats(since=datetime.now(UTC) + timedelta(minutes=2))
    assert later.total.enqueued == 0 and later.bindings == {}


async def test_stats_since_is_per_minute(app: jobloom.App) -> None:
    store = await app.store()
    now = time.time()
    await add_events(store, [event(now - 7200, 1, "Ok", "enqueued"), event(now - 60, 2, "Ok", "enqueued")])
    await project_all(store)
    assert (await app.stats()).total.enqueued == 1  # the last hour, by default
    assert (await app.stats(since=timedelta(hours=3))).total.enqueued == 2
    assert (await app.stats(since=now - 7200)).total.enqueued == 2
    with pytest.raises(jobloom.InvalidOption):
        await app.stats(since="yesterday")


async def test_projecting_twice_counts_once_and_consumed_events_are_pruned(app: jobloom.App) -> None:
    store = await app.store()
    now = time.time()
    await add_events(store, [event(now, i, "Ok", "succeeded", 1, 0.01 * i) for i in range(1, 101)])
    assert await unprojected(store) == 100
    assert await project_all(store, limit=7) == 100
    assert await project_once(store) == 0
    assert await unprojected(store) == 0
    stats = await app.stats()
    assert stats.total.succeeded == 100 and stats.total.runs == 100
    assert stats.total.max == pytest.approx(1.0)


def _awkward_events(rng: random.Random, n: int, now: float) -> list[dict[str, Any]]:
    """Events as a store may hold them: every kind (and kinds the read model does not count), run
    times missing, negative, zero, on and beside the histogram's bucket bounds, tiny and huge,
    bindings with quotes and non-ASCII text, moments on and beside minute bounds."""
    kinds = [*projector._COUNTER_OF, "progress", "it's odd", ""]
    bounds = [projector.HIST_BASE * projector.HIST_RATIO**k for k in range(0, 300, 7)]
    durations: list[float | None] = [None, -1.0, -1e-12, 0.0, 1e-12, projector.HIST_BASE, 1e6, *bounds,
                                     *(b * (1 + 1e-12) for b in bounds), *(b * (1 - 1e-12) for b in bounds)]
    bindings = ["Ok", "O'Brien", "日本語", "a\nb", "x" * 200]
    minute = (now // 60) * 60
    out = []
    for i in range(n):
        at = rng.choice([minute, minute - 1e-6, minute + 59.999999, now - rng.random() * 7200, now])
        duration = rng.choice(durations) if rng.random() < 0.5 else rng.lognormvariate(-4, 2)
        out.append(event(at, i + 1, rng.choice(bindings), rng.choice(kinds), 1, duration))
    return out


async def test_the_stores_counting_matches_folding_each_event(app: jobloom.App) -> None:
    """The store counts each batch per binding, minute, kind and run-time bucket in SQL; the read model
    it leaves is the one folding every event in Python (``stats.fold``) gives."""
    store = await app.store()
    events = _awkward_events(random.Random(11), 3000, time.time())
    await add_events(store, events)

    async def read(tx: Tx) -> list[Any]:
        return await tx.fetch(projector.Q.project_events, {"limit": len(events)})

    want = projector.fold(await store.transact(read, exclusive=False))
    assert await project_all(store, limit=333) == len(events)
    await assert_read_model(store, want)


async def assert_read_model(store: Store, want: dict[tuple[str, int], Tally]) -> None:
    """The read model holds exactly ``want``: counts, histograms and maxima equal, run-time sums within
    rounding."""
    async def stats_rows(tx: Tx) -> list[Any]:
        return await tx.fetch(projector.Q.stats_since, {"minute": 0, "binding": None})

    got = {(r.binding, int(r.minute)): Tally.from_row(r) for r in await store.transact(stats_rows, exclusive=False)}
    assert got.keys() == want.keys()
    for key, tally in want.items():
        other = got[key]
        assert other.counts == tally.counts, key
        assert (other.runs, other.histogram, other.run_max) == (tally.runs, tally.histogram, tally.run_max), key
        assert other.run_time == pytest.approx(tally.run_time, rel=1e-9, abs=1e-9), key


async def test_counted_rows_fold_to_what_each_event_gives(app: jobloom.App) -> None:
    """Events written as the engine writes them (many of one kind, binding and moment counted in one
    row) leave the read model that folding each event alone gives."""
    store = await app.store()
    rng = random.Random(12)
    events = _awkward_events(rng, 3000, time.time())
    moments = sorted({e["at"] for e in events})[:4]
    for e in events:  # a few moments, so that many events share one
        e["at"] = rng.choice(moments)
    for start in range(0, len(events), 250):  # a transaction per chunk, as a cycle's claims or outcomes
        chunk = events[start:start + 250]

        async def write(tx: Tx, chunk: list[dict[str, Any]] = chunk) -> None:
            await emit(tx, chunk)

        await store.transact(write)
    rows = await unprojected_rows(store)
    assert len(rows) < len(events) - 100  # some counted together
    assert any(r.n > 1 and r.bucket is not None for r in rows)
    want = projector.fold(ProjectedEventRow(0, e["at"], e["binding"], e["kind"], e["duration"]) for e in events)
    assert await project_all(store, limit=50) == len(events)
    await assert_read_model(store, want)


async def unprojected_rows(store: Store) -> list[ProjectedEventRow]:
    async def read(tx: Tx) -> list[ProjectedEventRow]:
        return await tx.fetch(projector.Q.project_events, {"limit": 1_000_000})

    return await store.transact(read, exclusive=False)


async def test_a_cycle_of_many_jobs_writes_a_counted_row_and_the_counts_stay_exact(app: jobloom.App) -> None:
    app.housekeepers = [k for k in app.housekeepers if k.name != "projector"]  # the outbox keeps its rows
    store = await app.store()
    await app.enqueue_many([(Ok, {}) for _ in range(50)])
    assert await app.drain() == 50
    rows = await unprojected_rows(store)
    assert sum(r.n for r in rows) == 150  # enqueued, started and succeeded for each job
    assert len(rows) < 20
    assert {r.kind for r in rows if r.n > 1} >= {"enqueued", "started", "succeeded"}
    assert await unprojected(store) == 150
    assert await project_all(store) == 150
    total = (await app.stats()).total
    assert (total.enqueued, total.started, total.succeeded, total.runs) == (50, 50, 50, 50)


async def test_events_after_every_event_was_pruned_are_counted_once(app: jobloom.App) -> None:
    """On SQLite the outbox's seqs are rowids: once every event is folded and deleted they start again
    below the cursor. Nothing may be skipped or counted twice."""
    store = await app.store()
    for _ in range(5):  # one transaction each: an outbox row each (enqueue_many would count them in one)
        await app.enqueue(Ok, {})
    assert await project_all(store) == 5
    cursor = await _cursor(store)
    later = [await app.enqueue(Ok, {}) for _ in range(3)]
    if store.dialect == "sqlite":
        assert await _seqs(store, later[0].id) == [1]  # below the cursor: the case this test is about
        assert cursor >= 5
    assert await project_all(store, limit=2) == 3
    assert await project_once(store) == 0
    await app.enqueue(Ok, {})
    await app.drain()  # started and succeeded events of all nine jobs (the drain folds some of them itself)
    await project_all(store)
    stats = await app.stats()
    assert (stats.total.enqueued, stats.total.started, stats.total.succeeded, stats.pending_events) == (9, 9, 9, 0)


async def _cursor(store: Store) -> int:
    async def work(tx: Tx) -> int:
        row = await tx.fetchone("get_projector", {"name": projector.CURSOR})
        return int(row[0]) if row else 0

    return await store.transact(work, exclusive=False)


async def _seqs(store: Store, job_id: int) -> list[int]:
    async def work(tx: Tx) -> list[int]:
        return [int(r[0]) for r in await tx.fetch("job_events", {"job_id": job_id})]

    return await store.transact(work, exclusive=False)


async def test_a_crash_mid_projection_counts_every_event_exactly_once(
    app: jobloom.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await app.store()
    now = time.time()
    await add_events(store, [event(now + i / 1000, i, "Ok", "started", 1) for i in range(1, 51)])

    class Crash(Exception):
        pass

    class CrashingTx(Tx):
        """Writes the read model and prunes events, then dies before the cursor moves."""

        def __init__(self, inner: Tx) -> None:
            self.inner = inner

        async def fetch_rows(self, name: str, params: Any = None) -> list[tuple[Any, ...]]:
            return await self.inner.fetch_rows(name, params)

        async def execute(self, name: str, params: Any = None) -> int:
            if name == "save_projector":
                raise Crash("killed before the cursor moved")
            return await self.inner.execute(name, params)

        async def executemany(self, name: str, rows: Any) -> None:
            await self.inner.executemany(name, rows)

        async def insert_many(self, name: str, rows: Any) -> list[int]:
            return await self.inner.insert_many(name, rows)

    real = store.transact

    async def crashing(fn: Callable[[Tx], Awaitable[Any]], **kw: Any) -> Any:
        return await real(lambda tx: fn(CrashingTx(tx)), **kw)

    monkeypatch.setattr(store, "transact", crashing)

    with pytest.raises(Crash):
        await project_once(store, limit=20)
    monkeypatch.undo()
    assert await unprojected(store) == 50  # rolled back: nothing pruned
    assert (await app.stats()).total.started == 0
    assert await project_all(store, limit=20) == 50
    assert (await app.stats()).total.started == 50


async def test_concurrent_projectors_count_every_event_once(app: jobloom.App, store_url: str) -> None:
    others = [jobloom.App(store_url, performers=[Ok], auto_migrate=True) for _ in range(3)]
    try:
        stores = [await app.store()] + [await o.store() for o in others]
        now = time.time()
        for chunk in range(5):
            await add_events(stores[0], [event(now, chunk * 100 + i, "Ok", "succeeded", 1, 0.5)
                                         for i in range(100)])
        for _ in range(30):
            await asyncio.gather(*(project_once(s, limit=13) for s in stores))
        await project_all(stores[0])
        assert (await app.stats()).total.succeeded == 500
    finally:
        for o in others:
            await o.close()


async def test_the_projector_paces_itself_by_what_it_finds(app: jobloom.App) -> None:
    """Full batches are folded without pause, a pass that found events is followed by another after
    ``busy``, and an empty outbox is looked at again after ``busy``, then twice as long each time up to
    ``idle``: an instant with nothing to fold during a drain does not leave seconds of events unfolded."""
    store = await app.store()
    keeper = projector.Projector(batch=5, busy=1.0, idle=5.0)
    await app.enqueue_many([(Ok, {}) for _ in range(7)])
    await add_events(store, [event(time.time(), i, "Ok", "cancelled") for i in range(6)])  # a row per event

    async def delay_after_pass() -> float:
        await keeper.run(store, 1000.0)
        return await keeper.next_due(store, 1000.0) - 1000.0  # type: ignore[operator]

    assert await delay_after_pass() == 0.0  # 5 rows: a full batch, again at once
    assert await delay_after_pass() == 1.0  # the rest: busy
    assert [await delay_after_pass() for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]  # empty: back off to idle
    await app.enqueue(Ok, {})
    assert await delay_after_pass() == 1.0  # events again: busy
    assert await delay_after_pass() == 1.0
    assert await unprojected(store) == 0


async def test_a_failing_projector_never_changes_a_job(app: jobloom.App, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(*args: Any, **kwargs: Any) -> projector.Folded:
        raise RuntimeError("read model unavailable")

    monkeypatch.setattr(projector, "fold_batch", broken)
    # a failed pass is tried again after `idle` (5 s by default): shorter here, where the wait is not the point
    app.housekeepers[:] = [projector.Projector(idle=0.5) if k.name == "projector" else k for k in app.housekeepers]
    worker = jobloom.Worker(app, grace=2.0)
    task = asyncio.create_task(worker.run())
    try:
        jobs = await app.enqueue_many([(Ok, {}) for _ in range(10)])
        for job in jobs:
            assert (await app.wait(job.id, timeout=20)).state == "succeeded"
        assert (await app.stats()).pending_events >= 30  # it lags: nothing was folded
        monkeypatch.undo()
        await eventually(lambda: _succeeded(app, 10), timeout=20, what="the read model to catch up")
        assert (await app.stats()).bindings["Ok"].enqueued == 10
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)


async def _succeeded(app: jobloom.App, n: int) -> bool:
    stats = await app.stats()
    return stats.total.succeeded == n and stats.pending_events == 0


@pytest.mark.postgres
async def test_postgres_events_of_a_slow_transaction_are_not_skipped(postgres_url: str) -> None:
    """A transaction that took a lower seq but commits later is still counted, once, after it commits;
    committed events are not held back by it."""
    import psycopg

    app = jobloom.App(postgres_url, performers=[Ok], auto_migrate=True)
    try:
        store = await app.store()
        slow = await psycopg.AsyncConnection.connect(postgres_url)
        try:
            await slow.execute(
                "INSERT INTO jobloom_events (at, job_id, binding, kind) VALUES (%s, 1, 'Ok', 'enqueued')", [time.time()]
            )
            await app.enqueue_many([(Ok, {}) for _ in range(3)])
            assert await project_once(store) == 3  # committed events are folded at once
            assert (await app.stats()).total.enqueued == 3
            await slow.commit()
        finally:
            await slow.close()
        await project_all(store)
        assert (await app.stats()).total.enqueued == 4
    finally:
        await app.close()
