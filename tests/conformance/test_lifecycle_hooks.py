"""Performers' lifecycle hooks, on every store: each runs once after its outcome is stored (on_failure only
when the job failed for good), from a durable row that a hook cut off brings back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import jobloom
from jobloom.core.errors import InvalidOption
from jobloom.core.queries import Q
from jobloom.engine import lifecycle_hooks
from jobloom.testing import TestClock

CALLS: list[tuple[Any, ...]] = []


class Hooked(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    backoff = jobloom.Backoff.fixed(0)
    max_attempts = 3

    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        if self.ctx.attempt <= payload.get("fail", 0):
            raise RuntimeError(f"boom {self.ctx.attempt}")
        return {"done": payload["n"]}

    async def on_success(self, payload: dict[str, Any], result: dict[str, Any]) -> None:
        CALLS.append(("success", payload["n"], result, self.ctx.job_id))

    async def on_failure(self, payload: dict[str, Any], error: str) -> None:
        CALLS.append(("failure", payload["n"], error))

    async def on_retry(self, payload: dict[str, Any], error: str, attempt: int) -> None:
        CALLS.append(("retry", payload["n"], error, attempt))


class SyncHooked(jobloom.Performer[dict[str, Any], str]):
    def perform(self, payload: dict[str, Any]) -> str:  # a plain def: the hook still runs on the loop
        return "sync"

    async def on_success(self, payload: dict[str, Any], result: str) -> None:
        CALLS.append(("sync-success", result))


class Raises(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None

    async def on_success(self, payload: dict[str, Any], result: None) -> None:
        CALLS.append(("raises",))
        raise ValueError("hook broke")


class Plain(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture(autouse=True)
def _clear() -> None:
    CALLS.clear()


async def hook_rows(app: jobloom.App) -> int:
    store = await app.store()
    row = await store.autocommit(lambda tx: tx.fetchone(Q.count_hooks, {}))
    assert row is not None
    return row.n


async def test_each_hook_runs_once_and_on_failure_only_at_the_end(store_url: str) -> None:
    app = jobloom.App(store_url, performers=[Hooked, SyncHooked, Plain], auto_migrate=True)
    try:
        ok = await app.enqueue(Hooked, {"n": 1})
        retried = await app.enqueue(Hooked, {"n": 2, "fail": 1})
        failed = await app.enqueue(Hooked, {"n": 3, "fail": 9})
        await app.enqueue(SyncHooked, {})
        await app.enqueue(Plain, {})
        for _ in range(3):
            await app.drain()
        assert (await app.get_job(failed.id)).state == "failed"
        assert (await app.get_job(retried.id)).state == "succeeded"
        assert sorted(CALLS, key=repr) == sorted([
            ("success", 1, {"done": 1}, ok.id),
            ("retry", 2, "RuntimeError: boom 1", 1), ("success", 2, {"done": 2}, retried.id),
            ("retry", 3, "RuntimeError: boom 1", 1), ("retry", 3, "RuntimeError: boom 2", 2),
            ("failure", 3, "RuntimeError: boom 3"),
            ("sync-success", "sync"),
        ], key=repr)
        assert await hook_rows(app) == 0  # every row deleted once its hook ran
    finally:
        await app.close()


async def test_a_raising_hook_is_logged_counted_and_not_run_again(store_url: str,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    app = jobloom.App(store_url, performers=[Raises], auto_migrate=True)
    try:
        job = await app.enqueue(Raises, {})
        worker = jobloom.Worker(app)
        await worker.drain()
        assert worker.completer.hooks.failed == 1 and worker.completer.hooks.ran == 1
        assert "hook_failed" in caplog.text and "hook broke" in caplog.text
        await app.drain()
        assert CALLS == [("raises",)]
        assert (await app.get_job(job.id)).state == "succeeded" and await hook_rows(app) == 0
    finally:
        await app.close()


async def test_a_hook_whose_worker_stopped_runs_again_after_its_lease(store_url: str) -> None:
    clock = TestClock()
    app = jobloom.App(store_url, performers=[Hooked], auto_migrate=True, clock=clock)
    try:
        job = await app.enqueue(Hooked, {"n": 7})
        # the outcome is stored and its hook row written, but the worker's hook never runs (it "died")
        started = lifecycle_hooks.HookRunner.start
        lifecycle_hooks.HookRunner.start = lambda self, rows: None  # type: ignore[method-assign]
        try:
            await app.drain()
        finally:
            lifecycle_hooks.HookRunner.start = started  # type: ignore[method-assign]
        assert (await app.get_job(job.id)).state == "succeeded"
        assert CALLS == [] and await hook_rows(app) == 1
        await app.drain()  # within the lease: the row is the other worker's still
        assert CALLS == []
        clock.jump(Hooked.hook_lease + 1)
        await app.drain()
        assert [("success", 7, {"done": 7}, job.id)] == CALLS and await hook_rows(app) == 0
    finally:
        await app.close()


async def test_hooks_never_hold_up_the_cycle(store_url: str) -> None:
    gate = asyncio.Event()
    entered = asyncio.Event()

    class Slow(jobloom.Performer[dict[str, Any], None]):
        async def perform(self, payload: dict[str, Any]) -> None:
            return None

        async def on_success(self, payload: dict[str, Any], result: None) -> None:
            entered.set()
            await gate.wait()

    app = jobloom.App(store_url, performers=[Slow, Plain], auto_migrate=True)
    worker = jobloom.Worker(app)
    task = asyncio.create_task(worker.run())
    try:
        await app.enqueue(Slow, {})
        async with asyncio.timeout(60):
            await entered.wait()
        plain = await app.enqueue(Plain, {})  # runs while the hook is blocked
        async with asyncio.timeout(60):
            while (await app.get_job(plain.id)).state != "succeeded":
                await asyncio.sleep(0.02)
        assert worker.completer.hooks.running == 1
        gate.set()
        async with asyncio.timeout(60):
            while await hook_rows(app):
                await asyncio.sleep(0.02)
    finally:
        gate.set()
        worker.stop()
        await task
        await app.close()


def test_a_hook_that_is_not_async_is_refused_naming_it() -> None:
    class SyncHook(jobloom.Performer[dict[str, Any], None]):
        async def perform(self, payload: dict[str, Any]) -> None:
            return None

        def on_failure(self, payload: dict[str, Any], error: str) -> None:
            return None

    with pytest.raises(InvalidOption, match="on_failure") as err:
        jobloom.App("sqlite:///unused.db", performers=[SyncHook])
    assert "SyncHook" in str(err.value)


async def test_hooks_read_encrypted_payloads_and_results(store_url: str) -> None:
    from jobloom.codecs import Encrypted, new_key

    app = jobloom.App(store_url, performers=[Hooked], auto_migrate=True, codec=Encrypted(keys=[new_key()]))
    try:
        job = await app.enqueue(Hooked, {"n": 11})
        await app.drain()
        assert [("success", 11, {"done": 11}, job.id)] == CALLS
    finally:
        await app.close()


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "60"])
def test_a_bad_hook_lease_is_refused_naming_it(bad: object) -> None:
    class Leased(Plain):
        hook_lease = bad  # type: ignore[assignment]

    with pytest.raises(InvalidOption, match="hook_lease") as err:
        jobloom.App("sqlite:///unused.db", performers=[Leased])
    assert "Leased" in str(err.value)
