"""A worker is never wedged: not by an outcome no store can hold, not by a store that stops answering,
and not by a backlog that keeps it busy (its schedules still fire on time)."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import time
from typing import Any

import pytest

import jobloom
from jobloom.engine import coordinator
from jobloom.engine.jobs import Claimed, Outcome
from jobloom.engine.shutdown import ABANDON_MARGIN
from tests.helpers import eventually

from .conftest import Processes

pytestmark = pytest.mark.slow


async def test_a_performer_failing_with_unstorable_text_does_not_wedge_the_worker(
    app: jobloom.App, procs: Processes
) -> None:
    poisoned = await app.enqueue("Poison", {})
    worker = procs.worker(grace=3.0)
    done = await app.wait(poisoned.id, timeout=30)
    assert done.state == "failed" and done.error is not None
    assert "bad" in done.error and "\x00" not in done.error
    later = await app.enqueue("Plain", {"n": 7})
    assert (await app.wait(later.id, timeout=30)).result == 7  # the worker still claims
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=15) == 0


class Ok(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        return 1


async def _claim_two(ok_app: jobloom.App, worker: jobloom.Worker) -> list[Claimed]:
    store = await ok_app.store()
    await ok_app.register_bindings()

    async def work(tx: Any) -> list[Claimed]:
        got = await coordinator.dispatch(tx, "Ok", capacity=2, worker=worker.name, now=time.time(), lease=30.0)
        return got.claimed

    return await store.transact(work)


async def test_one_outcome_that_cannot_be_stored_fails_only_its_job(store_url: str) -> None:
    """A cycle that fails for a reason that is not transient is taken apart: the other outcomes are applied
    and the bad one ends its job with an error that says why."""
    app = jobloom.App(store_url, performers=[Ok], auto_migrate=True)
    try:
        a = await app.enqueue(Ok, {})
        b = await app.enqueue(Ok, {})
        worker = jobloom.Worker(app)
        claimed = {c.id: c for c in await _claim_two(app, worker)}
        now = time.time()
        worker.outcomes = [
            Outcome(a.id, claimed[a.id].attempt, "succeeded", worker.name, now, now, result='"\ud800"'),
            Outcome(b.id, claimed[b.id].attempt, "succeeded", worker.name, now, now, result="1"),
        ]
        assert await worker._cycle_with_retry(claim=False) is not None
        assert worker.outcomes == []
        bad, good = await app.get_job(a.id), await app.get_job(b.id)
        assert good.state == "succeeded" and good.result == 1
        assert bad.state == "failed" and bad.error is not None
        assert bad.error.startswith("jobloom could not store the outcome of this attempt (succeeded)")
        [attempt] = await app.attempts(a.id)
        assert attempt.outcome == "permanent"
    finally:
        await app.close()


@pytest.mark.serial
async def test_sigterm_stops_a_worker_within_its_grace_while_sqlite_is_stuck(sqlite_url: str, tmp_path: Any) -> None:
    """The store stops answering (another process holds SQLite's write lock): SIGTERM still ends the
    worker within its grace period and a small margin."""
    procs = Processes(sqlite_url, tmp_path)
    app = jobloom.App(sqlite_url, auto_migrate=True)
    await app.store()
    await app.close()
    worker = procs.worker(grace=2.0)
    path = sqlite_url.removeprefix("sqlite:///")
    await eventually(lambda: os.path.isdir(path + ".wake") and os.listdir(path + ".wake"), what="worker listening")
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")  # every write transaction of the worker now waits
    try:
        t0 = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(worker.wait, 15)
        took = time.monotonic() - t0
        assert took < 2.0 + ABANDON_MARGIN + 2.0, took
        assert code == 0
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        procs.cleanup()


@pytest.mark.serial
async def test_schedules_fire_on_time_while_the_worker_drains_a_backlog(
    app: jobloom.App, procs: Processes
) -> None:
    total = 250_000  # more than the worker drains in the measured window (SQLite: about 15,000/s)
    for _ in range(0, total, 10_000):
        await app.enqueue_many([("Noop", {}) for _ in range(10_000)])
    worker = procs.worker(concurrency=64, env={"JOBLOOM_IT_TICK": "1"})

    async def noop_done() -> int:
        return (await app.counts(finished=True)).get("Noop", {}).get("succeeded", 0)

    await eventually(lambda: noop_done(), timeout=30, what="the drain started")
    t0 = time.time()
    lags: list[int] = []
    while time.time() - t0 < 12.0:  # 10 ticks measured: one late one still leaves 90 %
        lags.append((await app.stats()).pending_events)
        await asyncio.sleep(0.5)
    busy_until = time.time()
    left = total - await noop_done()
    assert left > 0, "the backlog ran out before the measurement ended: make it larger"
    window = (t0 + 1, busy_until - 1)
    ticks = [j for j in await app.list_jobs(binding="Tick", limit=1000) if window[0] <= j.payload["tick"] <= window[1]]
    expected = int(busy_until - 1) - int(t0 + 1)
    on_time = [j for j in ticks if j.created_at.timestamp() - j.payload["tick"] <= 1.0]
    late = [round(j.created_at.timestamp() - j.payload["tick"], 3) for j in ticks]
    assert len(on_time) >= 0.9 * expected, (len(on_time), expected, late)
    assert max(lags[len(lags) // 2:]) <= max(lags[: len(lags) // 2]) + 50_000, lags  # the read model keeps up
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
