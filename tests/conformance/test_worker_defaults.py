"""A worker's defaults on every store: 100 jobs at once, of which at most 16 of sync performers."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import jobloom
from jobloom.engine.worker import DEFAULT_CONCURRENCY, DEFAULT_SYNC_CONCURRENCY
from tests.helpers import eventually


class Gauge:
    """How many jobs of one kind run at once, and the most there ever were (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1


SYNC = Gauge()
ASYNC = Gauge()
RELEASE_SYNC = threading.Event()
RELEASE_ASYNC: list[asyncio.Event] = []


class Blocking(jobloom.Performer[dict[str, Any], None]):
    """A sync job (a thread) that holds its slot until released."""

    def perform(self, payload: dict[str, Any]) -> None:
        SYNC.enter()
        try:
            RELEASE_SYNC.wait(30)
        finally:
            SYNC.leave()


class Waiting(jobloom.Performer[dict[str, Any], None]):
    """An async job that holds its slot until released."""

    async def perform(self, payload: dict[str, Any]) -> None:
        ASYNC.enter()
        try:
            await asyncio.wait_for(RELEASE_ASYNC[0].wait(), 30)
        finally:
            ASYNC.leave()


@pytest.fixture
async def app(store_url: str):
    global SYNC, ASYNC
    SYNC, ASYNC = Gauge(), Gauge()
    RELEASE_SYNC.clear()
    RELEASE_ASYNC[:] = [asyncio.Event()]
    app = jobloom.App(store_url, performers=[Blocking, Waiting], auto_migrate=True, lease=5.0)
    yield app
    RELEASE_SYNC.set()
    await app.close()


async def _run(app: jobloom.App, worker: jobloom.Worker, sync_jobs: int, async_jobs: int,
               sync_expected: int, async_expected: int) -> None:
    jobs = [await app.enqueue(Blocking, {"i": i}) for i in range(sync_jobs)]
    jobs += [await app.enqueue(Waiting, {"i": i}) for i in range(async_jobs)]
    task = asyncio.create_task(worker.run())
    try:
        await eventually(lambda: SYNC.now == sync_expected and ASYNC.now == async_expected, timeout=30,
                         what=f"{sync_expected} sync and {async_expected} async jobs running")
        await asyncio.sleep(0.3)  # a few more cycles: none may start another sync job
        assert SYNC.most == sync_expected and ASYNC.now == async_expected
        RELEASE_SYNC.set()
        RELEASE_ASYNC[0].set()
        for job in jobs:
            assert (await app.wait(job.id, timeout=30)).state == "succeeded"
    finally:
        RELEASE_SYNC.set()
        RELEASE_ASYNC[0].set()
        worker.stop()
        await asyncio.wait_for(task, 15)


async def test_by_default_sync_jobs_take_at_most_16_slots_and_async_ones_the_rest(app: jobloom.App) -> None:
    worker = jobloom.Worker(app, grace=2.0)
    assert (worker.concurrency, worker.sync_concurrency) == (DEFAULT_CONCURRENCY, DEFAULT_SYNC_CONCURRENCY) == (100, 16)
    await _run(app, worker, sync_jobs=24, async_jobs=40, sync_expected=16, async_expected=40)


async def test_a_given_concurrency_applies_to_sync_jobs_too(app: jobloom.App) -> None:
    worker = jobloom.Worker(app, concurrency=20, grace=2.0)
    assert worker.sync_concurrency == 20
    await _run(app, worker, sync_jobs=24, async_jobs=0, sync_expected=20, async_expected=0)


async def test_sync_concurrency_is_a_share_of_the_slots(app: jobloom.App) -> None:
    worker = jobloom.Worker(app, concurrency=10, sync_concurrency=3, grace=2.0)
    await _run(app, worker, sync_jobs=6, async_jobs=12, sync_expected=3, async_expected=7)


@pytest.mark.parametrize("option", ["concurrency", "sync_concurrency"])
@pytest.mark.parametrize("value", [0, -1, 2.5, True])
async def test_a_bad_concurrency_is_refused_naming_it(app: jobloom.App, option: str, value: Any) -> None:
    with pytest.raises(jobloom.InvalidOption, match=f"invalid {option}: .*at least 1"):
        jobloom.Worker(app, **{option: value})
