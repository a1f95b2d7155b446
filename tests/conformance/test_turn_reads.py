"""The reads of a dispatch under turns touch the jobs they return, not the binding's backlog, whatever
the planner's statistics say."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest

import jobloom
from jobloom.store.sql import load_queries

BACKLOG = 300
"""Queued jobs with a key: what a read of the keyless jobs must not walk through."""


class Turns(jobloom.Performer[dict[str, Any], None]):
    concurrency_key = staticmethod(lambda p: p.get("k"))
    fairness = "round_robin"

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture
async def app(store_url: str):
    app = jobloom.App(store_url, performers=[Turns], auto_migrate=True, lease=30.0)
    await app.register_bindings()
    yield app
    await app.close()


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", []) for n in _nodes(child))]


def _pg_plans(store_url: str, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The executed plan of ``query``, as planned for these parameters and as a generic plan (what a
    prepared statement comes to after a few executions)."""
    import psycopg

    from jobloom.store.postgres.tx import to_psycopg

    sql = to_psycopg(load_queries("postgres")[query])
    plans = []
    with psycopg.connect(store_url) as pg:
        for mode in ("force_custom_plan", "force_generic_plan"):
            pg.execute(f"SET plan_cache_mode = {mode}")
            # EXPLAIN of a statement with parameters plans it as the driver's own statement would be
            row = pg.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params).fetchone()
            assert row is not None
            plans.append(row[0][0]["Plan"])
        pg.rollback()  # the claiming read's row locks
    return plans


@pytest.mark.parametrize("query", ["candidates_keyless", "peek_keyless"])
async def test_the_keyless_jobs_are_read_without_walking_the_keyed_backlog(app: jobloom.App, store_url: str,
                                                                          query: str) -> None:
    await app.enqueue(Turns, {})
    # on PostgreSQL, a store's first backlog before autovacuum has analysed the table: no statistics
    await app.enqueue_many([(Turns, {"k": f"k{i % 50}"}) for i in range(BACKLOG)])
    if store_url.startswith("sqlite:"):
        sql = load_queries("sqlite")[query]
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
            steps = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, {"binding": "Turns", "limit": 10})]
        assert any("INDEX jobloom_jobs_queued_key (binding=? AND concurrency_key=?)" in s for s in steps), steps
        assert not any("TEMP B-TREE" in s for s in steps), steps  # the index yields the order
        return
    for plan in _pg_plans(store_url, query, {"binding": "Turns", "limit": 10}):
        nodes = _nodes(plan)
        assert plan["Actual Rows"] == 1, plan
        scans = [n for n in nodes if n["Node Type"] in ("Index Scan", "Index Only Scan")]
        assert [n["Index Name"] for n in scans] == ["jobloom_jobs_queued_key"], json.dumps(plan, indent=1)
        assert sum(n.get("Rows Removed by Filter", 0) for n in nodes) == 0, plan
        assert not any(n["Node Type"] == "Sort" for n in nodes), plan
