"""The reads of a dispatch under turns touch the jobs they return, not the binding's backlog, whatever
the planner's statistics say."""

from __future__ import annotations

import json
from typing import Any

import pytest

import jobloom
from jobloom.store.sql import load_queries
from tests.conformance.search_support import plan

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
        steps = plan(store_url, query, {"binding": "Turns", "limit": 10})
        assert "INDEX jobloom_jobs_queued_key (binding=? AND concurrency_key=?)" in steps, steps
        assert "TEMP B-TREE" not in steps, steps  # the index yields the order
        return
    for executed in _pg_plans(store_url, query, {"binding": "Turns", "limit": 10}):
        nodes = _nodes(executed)
        assert executed["Actual Rows"] == 1, executed
        scans = [n for n in nodes if n["Node Type"] in ("Index Scan", "Index Only Scan")]
        assert [n["Index Name"] for n in scans] == ["jobloom_jobs_queued_key"], json.dumps(executed, indent=1)
        assert sum(n.get("Rows Removed by Filter", 0) for n in nodes) == 0, executed
        assert not any(n["Node Type"] == "Sort" for n in nodes), executed
