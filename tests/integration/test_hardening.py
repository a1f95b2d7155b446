"""A worker is never wedged: not by an outcome no store can hold, not by a store that stops answering,
and not by a backlog that keeps it busy (its schedules still fire on time)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import time
from typing import Any

import pytest

import jobloom
from jobloom.engine import coordinator
from jobloom.engine.jobs import Claimed, Outcome
from jobloom.engine.worker import ABANDON_MARGIN
from jobloom.store.sqlite.store import wake_folder
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
        worker.completer.extend([
            Outcome(a.id, claimed[a.id].attempt, "succeeded", worker.name, claimed[a.id].started_at, now,
                    result='"\ud800"'),
            Outcome(b.id, claimed[b.id].attempt, "succeeded", worker.name, claimed[b.id].started_at, now,
                    result="1"),
        ])
        assert await worker.cycle.run_with_retry(claim=False) is not None
        assert worker.completer.outcomes == []
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
    try:
        worker = procs.worker(grace=2.0)
        path = sqlite_url.removeprefix("sqlite:///")
        wakes = wake_folder(path)  # beside the file, or under the temp folder when that path is too long
        await eventually(lambda: os.path.isdir(wakes) and os.listdir(wakes), what="worker listening")
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
    finally:
        procs.cleanup()  # a worker left running by a failure above (it outlives the test otherwise)


class Backlog:
    """Keeps a worker busy however fast it drains: tops the ``Noop`` backlog up to a few seconds of work,
    as measured from the drain itself, and records what was queued at each look."""

    AHEAD = 3.0  # seconds of work kept queued
    LEAST = 20_000  # jobs kept queued before the rate is known

    def __init__(self, app: jobloom.App) -> None:
        self.app = app
        self.enqueued = 0
        self.queued: list[int] = []  # at each look, once the drain has started
        self.rate = 0.0  # jobs taken from the backlog per second, the latest measure

    async def add(self, n: int) -> None:
        for at in range(0, n, 10_000):
            size = min(10_000, n - at)
            await self.app.enqueue_many([("Noop", {}) for _ in range(size)])
            self.enqueued += size

    async def taken(self) -> tuple[int, int]:
        """(jobs taken from the backlog so far, jobs queued now)."""
        queued = (await self.app.counts()).get("Noop", {}).get("queued", 0)
        return self.enqueued - queued, queued

    async def keep_busy(self) -> None:
        t_last, taken_last = time.monotonic(), (await self.taken())[0]
        while True:
            await asyncio.sleep(0.2)
            taken, queued = await self.taken()
            now = time.monotonic()
            self.rate = (taken - taken_last) / (now - t_last)
            t_last, taken_last = now, taken
            self.queued.append(queued)
            want = max(self.LEAST, int(self.rate * self.AHEAD))
            if queued < want:
                await self.add(want - queued)


@pytest.mark.serial
async def test_schedules_fire_on_time_while_the_worker_drains_a_backlog(
    app: jobloom.App, procs: Processes
) -> None:
    """A worker draining as fast as it can still makes its 1 s schedule's ticks on time, and its read
    model stays a few seconds behind the jobs at most. The backlog is topped up from the drain rate
    measured as it runs, so the worker has runnable jobs through the whole window on any machine."""
    backlog = Backlog(app)
    await backlog.add(Backlog.LEAST)
    worker = procs.worker(concurrency=64, env={"JOBLOOM_IT_TICK": "1"})
    await eventually(lambda: _taken(backlog), timeout=30, what="the drain started")
    producer = asyncio.create_task(backlog.keep_busy())
    t0 = time.time()
    behind = 3.0  # seconds the read model may be behind the jobs (its projector folds every second)
    seen: list[tuple[float, int, int, int]] = []  # (when, jobs taken, started in the read model, pending events)
    try:
        while time.time() - t0 < 8.0:  # 6 ticks measured, of which at most one late
            taken = (await backlog.taken())[0]
            stats = await app.stats()
            noop = stats.bindings.get("Noop")
            seen.append((time.time(), taken, noop.started if noop else 0, stats.pending_events))
            await asyncio.sleep(0.5)
        busy_until = time.time()
    finally:
        producer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await producer
    assert min(backlog.queued) > 0, ("the worker ran out of jobs: the producer fell behind", backlog.queued)
    window = (t0 + 1, busy_until - 1)
    ticks = [j for j in await _all_jobs(app, "Tick") if window[0] <= j.payload["tick"] <= window[1]]
    expected = int(busy_until - 1) - int(t0 + 1)
    on_time = [j for j in ticks if j.created_at.timestamp() - j.payload["tick"] <= 1.0]
    late = [round(j.created_at.timestamp() - j.payload["tick"], 3) for j in ticks]
    assert expected >= 5 and len(on_time) >= expected - 1, (len(on_time), expected, late)
    # the read model keeps up: what it counts at each look, the jobs had reached `behind` seconds earlier
    for when, _, started, _ in seen:
        earlier = [taken for t, taken, _, _ in seen if t <= when - behind]
        if earlier:
            assert started >= max(earlier), (f"read model more than {behind} s behind", backlog.rate, seen)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0


async def _all_jobs(app: jobloom.App, binding: str) -> list[jobloom.Job]:
    """Every job of ``binding``, page by page (a page scans a bounded range of ids)."""
    jobs: list[jobloom.Job] = []
    cursor: str | None = None
    while True:
        page = await app.list_jobs(binding=binding, limit=1000, cursor=cursor)
        jobs += page.jobs
        if page.next_cursor is None:
            return jobs
        cursor = page.next_cursor


async def _taken(backlog: Backlog) -> bool:
    return (await backlog.taken())[0] > 0
