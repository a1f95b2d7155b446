"""The read model per hour beside per minute: every fold adds to both, per-minute rows are kept a day
and hourly ones as long as the read model, ``App.stats`` over a longer window reads the hours,
and a chart of a week reads 168 hourly rows per binding."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

import jobloom
from jobloom.engine.jobs import event
from jobloom.housekeeping import retention
from jobloom.housekeeping.stats import MINUTE_RETENTION, hourly_from, read_hours
from jobloom.store.base import Tx
from tests.conformance.test_projector import add_events, project_all


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
