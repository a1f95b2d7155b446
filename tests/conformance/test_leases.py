"""Leases: a worker that cannot renew a lease stops the attempt itself, so one job never has two live
attempts, even when the store is unreachable for longer than the lease and another worker reaps it."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import jobloom
from jobloom.engine import coordinator
from jobloom.store.base import Tx
from tests.helpers import eventually

SPANS: list[tuple[int, float, float]] = []  # (attempt, started, ended), monotonic


class Span(jobloom.Performer[dict[str, Any], int]):
    backoff = jobloom.Backoff.fixed(0.05)
    max_attempts = 5

    async def perform(self, payload: dict[str, Any]) -> int:
        started = time.monotonic()
        try:
            await asyncio.sleep(3.0 if self.ctx.attempt == 1 else 0.2)
        finally:
            SPANS.append((self.ctx.attempt, started, time.monotonic()))
        return self.ctx.attempt


def _unreachable(dialect: str) -> Exception:
    if dialect == "postgres":
        import psycopg

        return psycopg.OperationalError("server closed the connection unexpectedly")
    return sqlite3.OperationalError("disk I/O error")


@pytest.mark.serial  # a time bound: an attempt stopped within 2 s of its lease lost
async def test_an_attempt_whose_lease_could_not_be_renewed_is_stopped_before_anyone_reaps_it(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    SPANS.clear()
    app = jobloom.App(store_url, performers=[Span], auto_migrate=True, lease=1.0)
    other = jobloom.App(store_url, performers=[Span], auto_migrate=True, lease=1.0)
    try:
        store = await app.store()
        job = await other.enqueue(Span, {})
        down = False
        original = store.transact

        async def transact(fn: Callable[[Tx], Awaitable[Any]], *, exclusive: bool = True) -> Any:
            if down:
                raise _unreachable(store.dialect)
            return await original(fn, exclusive=exclusive)

        monkeypatch.setattr(store, "transact", transact)
        worker = jobloom.Worker(app, concurrency=4, grace=2.0)
        task = asyncio.create_task(worker.run())
        try:
            await eventually(lambda: (worker.running and all(r.started for r in worker.running.values())),
                             what="attempt 1 running")
            down = True  # from here the worker can neither renew its lease nor report
            ostore = await other.store()

            async def reap(tx: Tx) -> list[int]:
                return await coordinator.reap(tx, time.time(), hooks=other.hooks)

            async def reaped() -> bool:
                return job.id in await ostore.transact(reap)

            await eventually(reaped, timeout=10, what="another worker reaped the job")
            down = False
            done = await other.wait(job.id, timeout=20)
        finally:
            down = False
            worker.stop()
            await asyncio.wait_for(task, 15)
        assert done.state == "succeeded" and done.result == done.attempt >= 2
        first = [s for s in SPANS if s[0] == 1]
        later = [s for s in SPANS if s[0] > 1]
        assert first and later, SPANS
        assert first[0][2] - first[0][1] < 2.0, "attempt 1 ran on after its lease was lost"
        assert first[0][2] <= min(s[1] for s in later), f"two live attempts at once: {SPANS}"
        attempts = await other.attempts(job.id)
        assert attempts[0].outcome == "lost"
    finally:
        await app.close()
        await other.close()


class Quick(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        await asyncio.sleep(float(payload.get("hold", 0.05)))
        return self.ctx.attempt


async def test_a_cycle_the_store_ran_again_counts_its_leases_from_the_run_that_claimed(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store runs a transaction again after a lost connection (PostgreSQL, until its retry deadline):
    the jobs the later run claims hold leases from then, not from when the cycle began. Counted from the
    cycle's beginning, they were already expired when the jobs started, and the worker stopped them."""
    app = jobloom.App(store_url, performers=[Quick], auto_migrate=True, lease=1.0)
    try:
        store = await app.store()
        job = await app.enqueue(Quick, {"hold": 0.6})  # longer than the lease watch's look (a third of the lease)
        original = store.transact
        delayed: list[bool] = []

        async def transact(fn: Callable[[Tx], Awaitable[Any]], *, exclusive: bool = True) -> Any:
            if not delayed and "Cycle.run." in fn.__qualname__:  # the cycle's transaction
                delayed.append(True)
                await asyncio.sleep(1.5)  # longer than the lease: the store waited for a connection
            return await original(fn, exclusive=exclusive)

        monkeypatch.setattr(store, "transact", transact)
        worker = jobloom.Worker(app, concurrency=4, grace=2.0)
        task = asyncio.create_task(worker.run())
        try:
            done = await app.wait(job.id, timeout=20)
        finally:
            worker.stop()
            await task
        assert delayed
        assert done.state == "succeeded" and done.result == 1, (done.state, done.result, done.error)
        assert [a.outcome for a in await app.attempts(job.id)] == ["succeeded"]
    finally:
        await app.close()


@pytest.mark.parametrize("reason, state", [("cancel", "cancelled"), ("lease_lost", "queued")])
async def test_an_attempt_stopped_before_its_task_began_is_reported_and_let_go(
    store_url: str, reason: str, state: str
) -> None:
    """A task cancelled before its first step never runs its body: the attempt is still reported (as the
    stop ends it) and the worker lets go of it, instead of heartbeating it, and its job, for ever."""
    app = jobloom.App(store_url, performers=[Quick], auto_migrate=True, lease=1.0)
    try:
        job = await app.enqueue(Quick, {}, max_attempts=3)
        worker = jobloom.Worker(app, concurrency=1, grace=1.0)
        result = await worker.cycle.run(claim=True)
        assert [c.id for c in result.claimed] == [job.id]
        (key,) = list(worker.running)
        worker.executor.stop_job(key, reason)  # the task was created, and has not run a step yet
        await eventually(lambda: key not in worker.running, timeout=5, what="the attempt let go")
        assert [o.kind for o in worker.completer.outcomes] == ["cancelled" if reason == "cancel" else "lost"]
        await worker.cycle.run(claim=False)  # reports it
        got = await app.get_job(job.id)
        assert got.state in (state, "scheduled"), got.state
        assert [a.outcome for a in await app.attempts(job.id)] == ["cancelled" if reason == "cancel" else "lost"]
    finally:
        await app.close()


@pytest.fixture
def store_url(pooled_store_url: str) -> str:
    """This module runs through PgBouncer (transaction pooling) too."""
    return pooled_store_url
