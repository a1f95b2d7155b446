"""Durable steps on every store: remembered results, durable sleep, events, spawn."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import jobloom
from tests.helpers import eventually

ran: dict[str, int] = {}


class ThreeSteps(jobloom.Performer[dict[str, Any], list[Any]]):
    async def perform(self, payload: dict[str, Any]) -> list[Any]:
        out = []
        for name in ("one", "two", "three"):
            out.append(await self.step(name, self._work, name))
        if self.ctx.attempt == 1:
            raise RuntimeError("crash after three steps")
        return out

    def _work(self, name: str) -> dict[str, str]:
        ran[name] = ran.get(name, 0) + 1
        return {"did": name}


class Sleeper(jobloom.Performer[dict[str, Any], str]):
    concurrency = 1
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> str:
        before = await self.step("before", lambda: time.time())
        await self.sleep("nap", float(payload["seconds"]))
        return f"slept {time.time() - before:.1f}"


class Waiter(jobloom.Performer[dict[str, Any], Any]):
    async def perform(self, payload: dict[str, Any]) -> Any:
        return await self.wait_for_event("approval", timeout=payload.get("timeout"))


class Parent(jobloom.Performer[dict[str, Any], list[int]]):
    async def perform(self, payload: dict[str, Any]) -> list[int]:
        a = await self.ctx.spawn("child-a", "Child", {"n": 1})
        b = await self.ctx.spawn("child-a", "Child", {"n": 2})
        return [a.id, b.id]


class Child(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        return int(payload["n"])


class BigStep(jobloom.Performer[dict[str, Any], None]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> None:
        await self.step("big", lambda: "x" * 200_000)


@pytest.fixture
async def app(store_url: str):
    ran.clear()
    app = jobloom.App(store_url, performers=[ThreeSteps, Sleeper, Waiter, Parent, Child, BigStep],
                      auto_migrate=True)
    yield app
    await app.close()


async def test_finished_steps_are_not_run_again(app: jobloom.App) -> None:
    job = await app.enqueue(ThreeSteps, {}, max_attempts=2)
    await app.drain()
    assert (await app.get_job(job.id)).state == "scheduled"
    await eventually(lambda: _runnable(app, job.id), timeout=10)
    await app.drain()
    done = await app.get_job(job.id)
    assert done.state == "succeeded" and done.result == [{"did": "one"}, {"did": "two"}, {"did": "three"}]
    assert ran == {"one": 1, "two": 1, "three": 1}


async def test_sleep_frees_the_slot_and_spends_no_attempt(app: jobloom.App) -> None:
    sleeper = await app.enqueue(Sleeper, {"seconds": 0.6})
    other = await app.enqueue(Sleeper, {"seconds": 0})
    worker = jobloom.Worker(app, grace=2)
    task = asyncio.create_task(worker.run())
    try:
        # concurrency is 1: the other job runs while the first one sleeps
        await eventually(lambda: _state(app, other.id, "succeeded"), timeout=10, what="other job done")
        assert (await app.get_job(sleeper.id)).state in ("scheduled", "queued", "running")
        done = await app.wait(sleeper.id, timeout=10)
        assert done.state == "succeeded" and done.result.startswith("slept 0.")
        assert done.attempt == 2 and done.max_attempts == 1  # the sleep spent no attempt of the budget
        assert [a.outcome for a in await app.attempts(sleeper.id)] == ["suspended", "succeeded"]
    finally:
        worker.stop()
        await asyncio.wait_for(task, 10)


async def test_wait_for_event_resumes_with_the_data(app: jobloom.App) -> None:
    job = await app.enqueue(Waiter, {})
    await app.drain()
    assert (await app.get_job(job.id)).state == "scheduled"
    assert await app.send_event(job.id, "approval", {"by": "alice"}) is True
    await app.drain()
    done = await app.get_job(job.id)
    assert done.state == "succeeded" and done.result == {"by": "alice"}


async def test_an_event_sent_before_the_wait_is_not_lost(app: jobloom.App) -> None:
    job = await app.enqueue(Waiter, {})
    assert await app.send_event(job.id, "approval", "early") is False
    await app.drain()
    assert (await app.get_job(job.id)).result == "early"


async def test_wait_for_event_times_out_in_the_job(app: jobloom.App) -> None:
    job = await app.enqueue(Waiter, {"timeout": 0.2}, max_attempts=1)
    await app.drain()
    await eventually(lambda: _runnable(app, job.id), timeout=10)
    await app.drain()
    done = await app.get_job(job.id)
    assert done.state == "failed" and "EventTimeout: event 'approval' did not arrive within 0.2 s" in (done.error or "")


async def test_spawn_is_idempotent_by_child_id(app: jobloom.App) -> None:
    job = await app.enqueue(Parent, {})
    await app.drain()
    done = await app.get_job(job.id)
    a, b = done.result
    assert a == b
    assert (await app.get_job(a)).state == "succeeded"


async def test_a_step_result_over_the_limit_fails_clearly(app: jobloom.App) -> None:
    job = await app.enqueue(BigStep, {})
    await app.drain()
    done = await app.get_job(job.id)
    assert done.state == "failed" and "result of step 'big' is" in (done.error or "")
    assert "limit is 131072 bytes" in (done.error or "")


async def test_send_event_to_a_missing_job(app: jobloom.App) -> None:
    with pytest.raises(jobloom.JobNotFound):
        await app.send_event(999_999, "x")


async def _state(app: jobloom.App, job_id: int, state: str) -> bool:
    return (await app.get_job(job_id)).state == state


async def _runnable(app: jobloom.App, job_id: int) -> bool:
    job = await app.get_job(job_id)
    return job.run_at is not None and job.run_at.timestamp() <= time.time()
