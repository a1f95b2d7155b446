"""Sync performers are first-class on every store: a plain def perform uses durable steps, sleeps,
event waits and spawn (blocking forms over the async core), and stops cooperatively on cancel or timeout."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Any

import jobloom
from jobloom.testing import TestClock
from tests.helpers import eventually

from .sync_performers import STEP_RUNS, Cooperative, CooperativeTimeout, SyncChild, SyncDurable


async def test_a_sync_perform_uses_steps_sleep_events_and_spawn(store_url: str) -> None:
    STEP_RUNS.clear()
    clock = TestClock(datetime(2030, 1, 1, tzinfo=UTC))
    app = jobloom.App(store_url, performers=[SyncDurable, SyncChild], auto_migrate=True, clock=clock)
    try:
        job = await app.enqueue(SyncDurable, {"n": 21})
        await app.drain()
        sleeping = await app.get_job(job.id)
        assert sleeping.state == "scheduled" and sleeping.run_ts == clock.now() + 3600, sleeping.error
        await clock.advance(3600)  # wakes, skips the step, waits for the event
        waiting = await app.get_job(job.id)
        assert waiting.state == "scheduled" and waiting.run_ts > clock.now() + 80000
        assert await app.send_event(job.id, "go", {"x": 1})
        await app.drain()
        done = await app.get_job(job.id)
        assert done.state == "succeeded", done.error
        assert done.result["doubled"] == 42 and done.result["data"] == {"x": 1}
        child = await app.get_job(done.result["child"])
        assert child.state == "succeeded" and child.result == 43
        assert len(STEP_RUNS["double"]) == 1, "the step ran once, then was remembered"
        assert STEP_RUNS["double"][0] != threading.main_thread().ident, "the step's function runs in the job's thread"
    finally:
        await app.close()


async def run_until(app: jobloom.App, job_id: int, then: Any) -> jobloom.Job:
    worker = jobloom.Worker(app, concurrency=2, grace=5.0)
    task = asyncio.create_task(worker.run())
    try:
        await eventually(lambda: app.get_job(job_id), timeout=10)

        async def running() -> bool:
            job = await app.get_job(job_id)
            return job.state == "running" and job.progress is not None

        await eventually(running, timeout=10, what="the job running")
        await then()
        return await app.wait(job_id, timeout=10)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)


async def test_a_sync_perform_stops_cooperatively_when_cancelled(store_url: str) -> None:
    app = jobloom.App(store_url, performers=[Cooperative], auto_migrate=True, lease=2.0)
    try:
        job = await app.enqueue(Cooperative, {})

        async def cancel() -> None:
            await app.cancel(job.id)

        done = await run_until(app, job.id, cancel)  # Cooperative loops until asked to stop (its timeout: 30 s)
        assert done.state == "cancelled"
    finally:
        await app.close()


async def test_a_sync_perform_stops_cooperatively_at_its_timeout(store_url: str) -> None:
    app = jobloom.App(store_url, performers=[CooperativeTimeout], auto_migrate=True, lease=2.0)
    try:
        job = await app.enqueue(CooperativeTimeout, {})

        async def nothing() -> None:
            return None

        done = await run_until(app, job.id, nothing)
        assert done.state == "failed" and "timed out" in (done.error or "")
        assert "then returned" in (done.error or ""), done.error
    finally:
        await app.close()
