"""Progress on every store: the latest value is visible while a job runs and kept after it ends;
writes are coalesced (at most one per job per second) and fenced by attempt; bad values are refused."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import jobloom
from jobloom.store.postgres.tx import PostgresTx
from jobloom.store.sqlite.store import SQLiteTx
from tests.helpers import eventually

from .sync_performers import ChildProgress

GATE: dict[str, Any] = {}


class Reports(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        await self.ctx.progress(0.5, "resized 1 of 2")
        await GATE["open"].wait()
        await self.ctx.progress(1, "resized 2 of 2")


class Busy(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        calls = 0
        end = time.monotonic() + payload["seconds"]
        while time.monotonic() < end:
            calls += 1
            await self.ctx.progress(min(1.0, calls / 10_000), f"step {calls}")
            await asyncio.sleep(0.0005)
        await self.ctx.progress(1.0, f"done after {calls}")
        return calls


class SyncReports(jobloom.Performer[dict[str, Any], None]):
    def perform(self, payload: dict[str, Any]) -> None:
        assert self.ctx.progress(0.25, "a quarter") is None
        GATE["thread"].wait(10)


class BadProgress(jobloom.Performer[dict[str, Any], str]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> str:
        for fraction, message in ((1.5, None), (float("nan"), None), (True, None), ("0.5", None), (0.5, 7)):
            try:
                await self.ctx.progress(fraction, message)  # type: ignore[arg-type]
            except jobloom.InvalidOption as exc:
                assert "progress" in str(exc)
            else:
                raise AssertionError(f"{fraction!r}, {message!r} was accepted")
        await self.ctx.progress(0.0, "x" * 5000 + "\x00")  # text is made storable: cut, NUL escaped
        return "ok"


@pytest.fixture
async def app(store_url: str):
    GATE["open"] = asyncio.Event()
    GATE["thread"] = threading.Event()
    app = jobloom.App(store_url, performers=[Reports, Busy, SyncReports, BadProgress, ChildProgress],
                      auto_migrate=True, lease=3.0)
    yield app
    GATE["open"].set()
    GATE["thread"].set()
    await app.close()


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Counts, per statement name, the executemany calls that reach either store driver (and their rows)."""
    seen: Counter[str] = Counter()
    for cls in (SQLiteTx, PostgresTx):
        original = cls.executemany

        async def spy(self: Any, name: str, rows: Any, _original: Any = original) -> None:
            seen[name] += 1
            seen[name + ":rows"] += len(rows)
            await _original(self, name, rows)

        monkeypatch.setattr(cls, "executemany", spy)
    yield seen


async def running_worker(app: jobloom.App) -> tuple[jobloom.Worker, asyncio.Task[None]]:
    worker = jobloom.Worker(app, concurrency=32, grace=5.0)
    return worker, asyncio.create_task(worker.run())


async def test_the_latest_progress_is_visible_while_the_job_runs_and_kept(app: jobloom.App) -> None:
    job = await app.enqueue(Reports, {})
    assert (await app.get_job(job.id)).progress is None
    began = app.now()
    worker, task = await running_worker(app)
    try:
        async def half() -> Any:
            p = (await app.get_job(job.id)).progress
            return p is not None and p
        progress = await eventually(half, timeout=10, what="progress stored")
        assert (progress.fraction, progress.message, progress.attempt) == (0.5, "resized 1 of 2", 1)
        assert began - 0.01 <= progress.at.timestamp() <= app.now() + 0.01  # written by this run
        await stale_writes(app, job.id, worker.name)
        assert (await app.get_job(job.id)).progress == progress, "fenced: another attempt or worker writes nothing"
        GATE["open"].set()
        done = await app.wait(job.id, timeout=10)
        assert done.state == "succeeded"
        assert (done.progress.fraction, done.progress.message) == (1.0, "resized 2 of 2")  # the last one, at report
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)


async def test_progress_under_load_is_written_at_most_once_a_second_per_job(
    app: jobloom.App, statements: Counter[str]
) -> None:
    jobs = await app.enqueue_many([(Busy, {"seconds": 2.0}) for _ in range(10)])
    began = time.monotonic()
    worker, task = await running_worker(app)
    try:
        done = [await app.wait(j.id, timeout=30) for j in jobs]
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)
    elapsed = time.monotonic() - began
    calls = sum(j.result for j in done)
    assert calls > 1000, "the jobs reported often"
    for j in done:
        assert j.state == "succeeded"
        assert j.progress.fraction == 1.0 and j.progress.message == f"done after {j.result}"
    # one statement (per transaction) carries the progress of every job of the worker, at most once a
    # second, plus one with the reports of the jobs that end
    assert statements["set_progress"] <= elapsed + 1 + len(jobs), statements
    assert statements["set_progress:rows"] <= len(jobs) * (elapsed + 2), statements
    assert worker.progress.writes == statements["set_progress"]


async def test_a_sync_perform_reports_progress(app: jobloom.App) -> None:
    job = await app.enqueue(SyncReports, {})
    worker, task = await running_worker(app)
    try:
        async def quarter() -> Any:
            p = (await app.get_job(job.id)).progress
            return p is not None and p.fraction == 0.25 and p.message == "a quarter"
        await eventually(quarter, timeout=10, what="progress from a thread")
        GATE["thread"].set()
        assert (await app.wait(job.id, timeout=10)).state == "succeeded"
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)


async def test_bad_progress_is_refused_and_long_text_cut(app: jobloom.App) -> None:
    job = await app.enqueue(BadProgress, {})
    await app.drain()
    done = await app.get_job(job.id)
    assert done.state == "succeeded", done.error
    assert done.progress.fraction == 0.0 and len(done.progress.message.encode()) <= 1024
    assert "bytes cut" in done.progress.message


async def stale_writes(app: jobloom.App, job_id: int, worker: str) -> None:
    from jobloom.engine.progress import ProgressBuffer, progress_json

    buffer = ProgressBuffer()
    buffer.record((job_id, 2), progress_json(0.9, "not this attempt", app.now(), 2))
    rows = buffer.take()
    buffer.record((job_id, 1), progress_json(0.9, "not this worker", app.now(), 1))
    rows_other = buffer.take()

    async def write(tx: Any) -> None:
        await buffer.write(tx, worker, rows)
        await buffer.write(tx, "another-worker", rows_other)

    await (await app.store()).transact(write)


async def test_a_process_isolated_job_reports_progress_over_its_pipe(app: jobloom.App) -> None:
    job = await app.enqueue(ChildProgress, {})
    await app.drain()
    done = await app.get_job(job.id)
    assert done.state == "succeeded", done.error
    assert (done.progress.fraction, done.progress.message) == (0.75, "in the child")
