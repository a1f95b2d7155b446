"""The read model per hour beside per minute: every fold adds to both, per-minute rows are kept a day
and hourly ones as long as the read model, ``App.stats`` over a longer window reads the hours, a chart
of a week reads 168 hourly rows per binding, and migration 0018 rolls up the minutes already there."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

import jobloom
from jobloom.engine.jobs import event
from jobloom.housekeeping import retention
from jobloom.housekeeping.stats import MINUTE_RETENTION, Tally, bucket_of, hourly_from, read_hours
from jobloom.store.base import Tx
from jobloom.store.sqlite.store import sqlite_path
from tests.conformance.test_projector import add_events, app_before, project_all


class Hourly(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[jobloom.App]:
    app = jobloom.App(store_url, performers=[Hourly], auto_migrate=True)
    yield app
    await app.close()


async def test_hours_keep_what_the_pruned_minutes_counted(app: jobloom.App) -> None:
    store = await app.store()
    now = time.time()
    old, earlier = (now - 2 * 86400) // 3600 * 3600 + 10, now - 3 * 3600  # old and old + 1: one hour
    await add_events(store, [event(old, 1, "Hourly", "succeeded", 1, 0.010),
                             event(old + 1, 2, "Hourly", "failed", 1, 0.020),
                             event(earlier, 3, "Hourly", "succeeded", 1, 0.030),
                             event(now, 4, "Hourly", "succeeded", 1, 0.040)])
    assert await project_all(store) == 4
    week = await read_hours(store, since=timedelta(days=7))
    assert week.total.succeeded == 3 and week.total.failed == 1
    assert len(week.minutes) == 3 and all(m.minute == 0 for m, _ in week.minutes), "one entry per hour"
    assert week.bindings["Hourly"].p99 is not None

    await retention.prune(store, app.specs, now)
    stats = await app.stats(since=timedelta(days=3))  # hours before the last day, minutes within it
    assert stats.total.succeeded == 3 and stats.total.failed == 1 and stats.total.p50 is not None
    assert (await app.stats(since=timedelta(hours=1))).total.succeeded == 1
    recent = await app.stats(since=timedelta(hours=4))
    assert recent.total.succeeded == 2 and all(m.timestamp() >= hourly_from(now) * 60 - 4 * 3600 for m, _ in
                                               recent.minutes)
    assert (await read_hours(store, since=timedelta(days=7))).total == week.total, "the hours are kept"

    async def minutes_left(tx: Tx) -> list[int]:
        rows = await tx.fetch_batch([("stats_since", {"minute": 0, "binding": None})])
        return [int(r[1]) for r in rows[0]]

    kept = await store.transact(minutes_left, exclusive=False)
    assert kept and min(kept) * 60 >= now - MINUTE_RETENTION - 60, "per-minute rows older than a day are pruned"


async def test_the_migration_rolls_up_the_minutes_there(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with app_before(sqlite_url, monkeypatch, "0018_stats_hourly") as app:
        store = await app.store()
        first = int(time.time() // 60) - 120
        rows = []
        for i in range(5):  # minute rows as the projector wrote them before 0018 (and before 0022's expired)
            tally = Tally()
            tally.add("succeeded", 1, bucket_of(0.01), 0.01, 0.01)
            rows.append({k: v for k, v in tally.params("Ok", first + i * 20).items() if k != "expired"})
        columns = ", ".join(rows[0])
        with contextlib.closing(sqlite3.connect(sqlite_path(sqlite_url))) as conn, conn:
            conn.executemany(f"INSERT INTO jobloom_stats ({columns}) VALUES ({', '.join(':' + c for c in rows[0])})",
                             rows)
        monkeypatch.undo()
        assert (await store.migrate())[0] == "0018_stats_hourly"
        hours = await read_hours(store, since=timedelta(hours=3))
        assert hours.total.succeeded == 5 and hours.total.runs == 5
        assert hours.total.p50 is None, "the minutes' histograms are not rolled up"
