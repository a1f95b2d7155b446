"""Reads on every store that must not grow with the history: ``App.counts()`` reads indexes only,
whatever the number of succeeded and skipped jobs (``counts(finished=True)`` counts those too), and
``App.list_runs()`` reads the listed runs' nodes in one query."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import jobloom
from jobloom.store.base import Tx
from jobloom.store.sql import load_queries

from .flow_performers import PERFORMERS, fanout_flow, image_flow

HISTORY = 20_000
# (binding, state, how many) of the jobs that are not succeeded or skipped
OPEN = [("A", "queued", 3), ("B", "scheduled", 2), ("A", "running", 1), ("A", "waiting", 2),
        ("B", "failed", 4), ("A", "stalled", 1), ("A", "cancelled", 2)]

# 20 000 finished jobs: succeeded, one in ten skipped, alternately of bindings A and B
SEED_HISTORY = f"""
INSERT INTO jobloom_jobs (binding, state, payload, run_at, max_attempts, delivery, created_at, finished_at)
SELECT CASE WHEN i % 2 = 0 THEN 'A' ELSE 'B' END, CASE WHEN i % 10 = 0 THEN 'skipped' ELSE 'succeeded' END,
       '{{}}', 0, 1, 'at_least_once', 0, i
FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {HISTORY}) SELECT i FROM n) s
"""
SEED_OPEN = """
INSERT INTO jobloom_jobs (binding, state, payload, run_at, max_attempts, delivery, created_at, finished_at)
VALUES ({binding}, {state}, '{{}}', 0, 1, 'at_least_once', 0, NULL)
"""


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[jobloom.App]:
    """A migrated app over a store seeded with a long history and a few jobs of every other state,
    with statistics taken."""
    app = jobloom.App(store_url, auto_migrate=True)
    await app.migrate()
    if store_url.startswith("sqlite:"):
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
            conn.execute(SEED_HISTORY)
            for binding, state, n in OPEN:
                for _ in range(n):
                    conn.execute(SEED_OPEN.format(binding="?", state="?"), (binding, state))
            conn.execute("ANALYZE")
    else:
        import psycopg

        with psycopg.connect(store_url, autocommit=True) as pg:
            pg.execute(SEED_HISTORY)
            for binding, state, n in OPEN:
                for _ in range(n):
                    pg.execute(SEED_OPEN.format(binding="%s", state="%s"), (binding, state))
            pg.execute("ANALYZE jobloom_jobs")
    yield app
    await app.close()


async def test_counts_leave_out_succeeded_and_skipped_unless_asked(app: jobloom.App) -> None:
    want: dict[str, dict[str, int]] = {}
    for binding, state, n in OPEN:
        want.setdefault(binding, {})[state] = n
    assert await app.counts() == want
    full = await app.counts(finished=True)
    assert sum(by.get("succeeded", 0) for by in full.values()) == HISTORY * 9 // 10
    assert sum(by.get("skipped", 0) for by in full.values()) == HISTORY // 10
    assert {b: {s: n for s, n in by.items() if s not in ("succeeded", "skipped")} for b, by in full.items()} == want


async def test_counts_read_indexes_not_the_table(app: jobloom.App, store_url: str) -> None:
    sql = load_queries("sqlite" if store_url.startswith("sqlite:") else "postgres")["count_by_state_indexed"]
    if store_url.startswith("sqlite:"):
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
            steps = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
        scans = [s for s in steps if "jobloom_jobs" in s]
        assert len(scans) == 4, steps  # one per branch
        assert all("USING" in s and "INDEX" in s for s in scans), steps  # never a full SCAN jobloom_jobs
        used = " ".join(scans) + " "
        for index in ("jobloom_jobs_queued", "jobloom_jobs_scheduled ", "jobloom_jobs_running ",
                      "jobloom_jobs_counted "):  # queued: either of its two indexes
            assert f"INDEX {index}" in used, (index, steps)
    else:
        import psycopg

        with psycopg.connect(store_url, autocommit=True) as pg:
            plan = "\n".join(str(r[0]) for r in pg.execute("EXPLAIN " + sql).fetchall())
        assert "Seq Scan" not in plan, plan
        for index in ("jobloom_jobs_scheduled", "jobloom_jobs_running", "jobloom_jobs_counted"):
            assert index in plan, (index, plan)
        assert "jobloom_jobs_queued" in plan, plan  # either of the two indexes of queued jobs


@pytest.mark.parametrize("query", ["child_active", "run_child_active"])
async def test_flow_sibling_checks_read_the_index_of_active_run_jobs(app: jobloom.App, store_url: str,
                                                                     query: str) -> None:
    """A finishing node asks whether a sibling is still active through the partial index of active run
    jobs, whose predicate the query must repeat exactly for the planner to use it."""
    params = {"run_id": "r", "lo": "a:", "hi": "a;"}
    if store_url.startswith("sqlite:"):
        sql = load_queries("sqlite")[query]
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
            plan = " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
    else:
        import psycopg

        from jobloom.store.postgres.tx import to_psycopg

        sql = to_psycopg(load_queries("postgres")[query])
        with psycopg.connect(store_url, autocommit=True) as pg:
            pg.execute("SET enable_seqscan = off")
            plan = "\n".join(str(r[0]) for r in pg.execute("EXPLAIN " + sql, params).fetchall())
    assert "jobloom_jobs_run_active" in plan, plan


class _Recording:
    """A transaction that notes the name of every statement it runs (and runs it)."""

    def __init__(self, tx: Tx, names: list[str]) -> None:
        self._tx, self._names = tx, names
        self.codec = tx.codec

    async def fetch(self, query: Any, params: Any = None) -> list[Any]:
        self._names.append(getattr(query, "name", query))
        return await self._tx.fetch(query, params)


async def test_list_runs_reads_every_listed_runs_nodes_in_one_query(store_url: str) -> None:
    image, fanout = image_flow(), fanout_flow()
    app = jobloom.App(store_url, performers=PERFORMERS, flows=[image, fanout], auto_migrate=True)
    try:
        started = [await app.start(image, {"image": f"{i}.png"}, id=f"img-{i}") for i in range(4)]
        started.append(await app.start(fanout, {"sizes": [1, 2, 3]}, id="fan"))
        for _ in range(3):
            await app.drain()  # runs at different stages, the fan-out's map children among its jobs
        store = await app.store()
        names: list[str] = []
        transact = store.transact

        async def recording(fn: Callable[[Tx], Awaitable[Any]], **kw: Any) -> Any:
            return await transact(lambda tx: fn(_Recording(tx, names)), **kw)  # type: ignore[arg-type]

        store.transact = recording  # type: ignore[method-assign]
        try:
            listed = await app.list_runs()
        finally:
            store.transact = transact  # type: ignore[method-assign]
        assert names == ["list_runs", "runs_jobs"]
        assert sorted(r.id for r in listed) == sorted(r.id for r in started)
        for run in listed:
            assert run == await app.get_run(run.id)
        assert all(len(r.nodes) == 4 for r in listed if r.id != "fan")
        assert await app.list_runs(flow="no-such-flow") == []
    finally:
        await app.close()


async def test_list_runs_pages_with_before_without_gaps_or_repeats(store_url: str) -> None:
    image = image_flow()
    app = jobloom.App(store_url, performers=PERFORMERS, flows=[image], auto_migrate=True)
    try:
        ids = [(await app.start(image, {"image": f"{i}.png"}, id=f"r{i:02d}")).id for i in range(7)]
        seen: list[str] = []
        before: str | None = None
        for _ in range(4):  # 7 runs in pages of 3
            page = await app.list_runs(limit=3, before=before)
            seen += [r.id for r in page]
            if len(page) < 3:
                break
            before = page[-1].id
        assert sorted(seen) == sorted(ids)
        assert len(seen) == len(set(seen)) == 7
        assert seen == [r.id for r in await app.list_runs(limit=100)]
        assert [r.id for r in await app.list_runs(flow=image.name, limit=2, before=seen[1])] == seen[2:4]
    finally:
        await app.close()
