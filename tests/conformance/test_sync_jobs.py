"""Sync performers on every store: errors from threads and child processes, and the isolation option."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest

import jobloom

from .sync_performers import AsyncExits, ChildEnv, ChildFails, ChildRetries, Exits, InChild, Point

ALL = [Exits, InChild, ChildRetries, ChildFails, ChildEnv, AsyncExits]


@pytest.fixture
async def app(store_url: str):
    app = jobloom.App(store_url, performers=ALL, env={"greeting": "hello"}, auto_migrate=True, lease=1.0)
    yield app
    await app.close()


async def test_system_exit_from_a_sync_job_fails_the_attempt(app: jobloom.App) -> None:
    job = await app.enqueue(Exits, {}, max_attempts=1)
    after = await app.enqueue(InChild, Point(1, 2))
    worker = jobloom.Worker(app, concurrency=1, grace=2.0)
    task = asyncio.create_task(worker.run())
    try:
        done = await app.wait(job.id, timeout=20)
        assert done.state == "failed" and done.error == "SystemExit: 3"
        [attempt] = await app.attempts(job.id)
        assert attempt.outcome == "failed" and attempt.traceback is not None
        assert "raise SystemExit(3)" in attempt.traceback
        assert all(key[0] != job.id for key in worker.running), "its running entry would be heartbeated for ever"
        assert (await app.wait(after.id, timeout=20)).state == "succeeded", "the worker's one slot was freed"
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)


async def test_system_exit_from_an_async_job_fails_the_attempt_not_the_worker(app: jobloom.App) -> None:
    job = await app.enqueue(AsyncExits, {}, max_attempts=1)
    after = await app.enqueue(InChild, Point(1, 2))
    worker = jobloom.Worker(app, concurrency=1, grace=2.0)
    task = asyncio.create_task(worker.run())
    try:
        done = await app.wait(job.id, timeout=20)
        assert done.state == "failed" and done.error == "SystemExit: 4"
        assert (await app.wait(after.id, timeout=20)).state == "succeeded", "the worker went on"
        assert not task.done()
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)


async def test_a_process_job_gets_its_payload_and_returns_its_result(app: jobloom.App) -> None:
    job = await app.enqueue(InChild, Point(x=5, y=0))
    await app.drain()
    done = await app.get_job(job.id)
    assert done.state == "succeeded", done
    assert done.result["x"] == 6 and done.result["y"] not in (os.getpid(), 0)


async def test_retry_and_permanent_from_a_child_are_honoured(app: jobloom.App) -> None:
    retried = await app.enqueue(ChildRetries, {})
    permanent = await app.enqueue(ChildFails, {"how": "permanent"}, max_attempts=3)
    worker = jobloom.Worker(app, concurrency=2, grace=2.0)
    task = asyncio.create_task(worker.run())
    try:
        assert (await app.wait(retried.id, timeout=20)).result == 2
        await app.wait(permanent.id, timeout=20)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)
    assert [a.outcome for a in await app.attempts(retried.id)] == ["retry", "succeeded"]
    failed = await app.get_job(permanent.id)
    assert failed.state == "failed" and failed.attempt == 1 and failed.error == "Permanent: card declined"


async def test_an_error_in_a_child_becomes_the_attempts_error_and_traceback(app: jobloom.App) -> None:
    bad = await app.enqueue(ChildFails, {"how": "raise", "n": 7})
    gone = await app.enqueue(ChildFails, {"how": "exit"})
    await app.drain()
    [attempt] = await app.attempts(bad.id)
    assert attempt.outcome == "failed" and attempt.error == "ValueError: bad value 7"
    assert attempt.traceback is not None and "raise ValueError(f\"bad value {payload['n']}\")" in attempt.traceback
    [exited] = await app.attempts(gone.id)
    assert exited.error == "the child process ended (exit code 9) without a result"


async def test_a_child_gets_a_copy_of_a_picklable_env_only(store_url: str) -> None:
    async with _app(store_url, env={"greeting": "hello"}) as app:
        job = await app.enqueue(ChildEnv, {})
        await app.drain()
        assert (await app.get_job(job.id)).result == "hello"
    async with _app(store_url, env={"greeting": "hello", "lock": threading.Lock()}) as app:
        job = await app.enqueue(ChildEnv, {})
        await app.drain()
        error = (await app.get_job(job.id)).error
        assert error is not None and error.startswith(
            "JobloomError: self.env is not available in a process-isolated job: the app's env (dict) cannot be "
            "pickled"
        )


class _app:
    def __init__(self, url: str, env: Any) -> None:
        self.app = jobloom.App(url, performers=ALL, env=env, auto_migrate=True, lease=1.0)

    async def __aenter__(self) -> jobloom.App:
        return self.app

    async def __aexit__(self, *exc: object) -> None:
        await self.app.close()


def test_isolation_is_checked_when_the_app_is_built() -> None:
    class Fiber(jobloom.Performer[dict[str, Any], None]):
        isolation = "fiber"

        def perform(self, payload: dict[str, Any]) -> None: ...

    class Local(jobloom.Performer[dict[str, Any], None]):
        isolation = "process"

        def perform(self, payload: dict[str, Any]) -> None: ...

    class AsyncInChild(jobloom.Performer[dict[str, Any], None]):
        isolation = "process"

        async def perform(self, payload: dict[str, Any]) -> None: ...

    with pytest.raises(jobloom.InvalidOption, match="invalid isolation on Fiber: 'fiber'; expected \"thread\" or "):
        jobloom.App("sqlite:///unused.db", performers=[Fiber])
    with pytest.raises(jobloom.InvalidOption, match="importable by module path .*<locals>.Local is not"):
        jobloom.App("sqlite:///unused.db", performers=[Local])
    with pytest.raises(jobloom.InvalidOption, match="a plain \"def perform\""):
        jobloom.App("sqlite:///unused.db", performers=[AsyncInChild])
    assert jobloom.App("sqlite:///unused.db", performers=[InChild]).spec(InChild).isolation == "process"

