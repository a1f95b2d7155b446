"""Retention on every store deletes a finished chain's dependency edges and a finished batch's rows
with their jobs; an edge from a living job to a deleted dependency stays until that job goes."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

import jobloom
from jobloom.housekeeping.retention import prune

DAY = 86400.0


class Ok(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[jobloom.App]:
    app = jobloom.App(store_url, performers=[Ok], auto_migrate=True)
    yield app
    await app.close()


def count(store_url: str, table: str) -> int:
    sql = f"SELECT count(*) FROM {table}"
    if store_url.startswith("sqlite:"):
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
            return int(conn.execute(sql).fetchone()[0])
    import psycopg

    with psycopg.connect(store_url) as pg:
        row = pg.execute(sql).fetchone()
        assert row is not None
        return int(row[0])


TABLES = ("jobloom_dependencies", "jobloom_dependency_waits", "jobloom_batches", "jobloom_batch_jobs")


async def test_retention_of_a_finished_chain_and_batch_empties_their_tables(
    app: jobloom.App, store_url: str
) -> None:
    a = await app.enqueue(Ok, {})
    b = await app.enqueue(Ok, {}, depends_on=[a.id])
    await app.enqueue(Ok, {}, depends_on=[a.id, b.id])
    await app.batch([(Ok, {}), (Ok, {})], on_complete=(Ok, {}), on_success=(Ok, {}))
    await app.drain()
    await app.enqueue(Ok, {}, delay=100 * DAY)  # unfinished, and the newest job
    assert all(count(store_url, t) > 0 for t in TABLES)
    deleted, more = await prune(await app.store(), app.specs, time.time() + 2 * DAY, batch=2)
    assert (deleted, more) == (7, False)
    assert [count(store_url, t) for t in TABLES] == [0, 0, 0, 0]


async def test_a_waiting_job_keeps_its_edge_to_a_deleted_dependency(app: jobloom.App, store_url: str) -> None:
    done = await app.enqueue(Ok, {})
    await app.drain()
    gate = await app.enqueue(Ok, {}, delay=3 * DAY)
    waiting = await app.enqueue(Ok, {}, depends_on=[done.id, gate.id])
    await app.enqueue(Ok, {}, delay=100 * DAY)  # the newest job
    assert await prune(await app.store(), app.specs, time.time() + 2 * DAY) == (1, False)
    with pytest.raises(jobloom.JobNotFound):
        await app.get_job(done.id)
    assert (await app.get_job(waiting.id)).state == "waiting"  # the deleted dependency does not release it
    assert count(store_url, "jobloom_dependencies") == 2  # the closed edge stays with its living dependant
    await app.cancel(gate.id)  # its last open dependency ends: decided once, by that one alone
    job = await app.get_job(waiting.id)
    assert job.state == "skipped" and str(gate.id) in (job.error or "")


async def test_a_delete_by_hand_takes_the_edges_and_batch_of_its_jobs(app: jobloom.App, store_url: str) -> None:
    a = await app.enqueue(Ok, {})
    b = await app.enqueue(Ok, {}, depends_on=[a.id])
    batch = await app.batch([(Ok, {})])
    await app.drain()
    await app.enqueue(Ok, {}, delay=100 * DAY)  # the newest job
    for job_id in (b.id, a.id, *batch.job_ids):
        await app.delete(job_id)
    assert [count(store_url, t) for t in TABLES] == [0, 0, 0, 0]
