"""Pausing and resuming bindings, and what ``list_bindings`` shows, on every store."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import jobloom
from tests.helpers import eventually

from .performers import Echo, Nap


@pytest.fixture
async def app(store_url: str):
    app = jobloom.App(store_url, performers=[Echo, Nap], auto_migrate=True, lease=1.0)
    yield app
    await app.close()


async def run_worker(app: jobloom.App, **kw: Any) -> tuple[jobloom.Worker, asyncio.Task[None]]:
    worker = jobloom.Worker(app, grace=2.0, **kw)
    return worker, asyncio.create_task(worker.run())


async def stop(worker: jobloom.Worker, task: asyncio.Task[None]) -> None:
    worker.stop()
    await asyncio.wait_for(task, 15)


async def _state(app: jobloom.App, job_id: int) -> str:
    return (await app.get_job(job_id)).state


async def _binding(app: jobloom.App, name: str) -> jobloom.BindingInfo:
    return next(b for b in await app.list_bindings() if b.binding == name)


async def test_a_paused_binding_starts_nothing_until_resumed(app: jobloom.App) -> None:
    long = await app.enqueue(Nap, {"seconds": 0.5})
    worker, task = await run_worker(app, concurrency=8)
    try:
        await eventually(lambda: _is(app, long.id, "running"), what="the long job running")
        info = await app.pause_binding("Nap")
        assert info.paused and info.held_by == "paused" and info.paused_ts is not None
        waiting = [await app.enqueue(Nap, {"n": i}) for i in range(3)]  # enqueue is still accepted
        later = await app.enqueue(Nap, {"n": "later"}, delay=0.2)  # a delayed job becomes due, and waits
        other = await app.enqueue(Echo, {"x": 1})  # the worker keeps dispatching other bindings
        await eventually(lambda: _is(app, other.id, "succeeded"), what="the other binding's job done")
        await eventually(lambda: _is(app, long.id, "succeeded"), what="the running job finished")
        await eventually(lambda: _is(app, later.id, "queued"), what="the delayed job due")
        another = await app.enqueue(Echo, {"x": 2})
        await eventually(lambda: _is(app, another.id, "succeeded"), what="a later cycle")
        assert [await _state(app, j.id) for j in waiting] == ["queued"] * 3
        nap = await _binding(app, "Nap")
        assert nap.paused and nap.counts == {"queued": 4} and nap.workers == (worker.name,)
        assert nap.as_json()["paused"] is True and nap.as_json()["paused_at"] is not None
        echo = await _binding(app, "Echo")
        assert not echo.paused and echo.held_by is None and echo.workers == (worker.name,)
        resumed = await app.resume_binding("Nap")
        assert not resumed.paused
        # the workers are woken by the resume, well before an idle worker's own re-check (5 s)
        await eventually(lambda: _all_done(app, [*waiting, later]), timeout=3, what="the held jobs done")
    finally:
        await stop(worker, task)
    assert (await _binding(app, "Nap")).workers == ()  # a stopped worker leaves the registry


async def test_drain_leaves_a_paused_binding_queued(app: jobloom.App) -> None:
    await app.pause_binding("Nap")
    job = await app.enqueue(Nap, {})
    assert await app.drain() == 0
    assert await _state(app, job.id) == "queued"
    await app.resume_binding("Nap")
    assert await app.drain() == 1


async def test_pause_refuses_a_binding_nobody_knows(app: jobloom.App) -> None:
    with pytest.raises(jobloom.UnknownBinding, match="'Nope'"):
        await app.pause_binding("Nope")
    with pytest.raises(jobloom.InvalidOption, match="binding"):
        await app.pause_binding("")
    # a binding the store knows (another app registered it) can be paused by an app without its performer
    await app.set_limits("Elsewhere", concurrency=2)
    assert (await app.pause_binding("Elsewhere")).paused
    assert [b.binding for b in await app.list_bindings() if b.paused] == ["Elsewhere"]


async def _is(app: jobloom.App, job_id: int, state: str) -> bool:
    return await _state(app, job_id) == state


async def _all_done(app: jobloom.App, jobs: list[jobloom.Job]) -> bool:
    return all([await _is(app, j.id, "succeeded") for j in jobs])


async def test_a_stopping_worker_ends_its_heartbeats_before_it_leaves_the_registry(
    app: jobloom.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A heartbeat that committed after the worker's row was deleted would write the row again, and the
    stopped worker would be listed until pruned: its heartbeats have ended when the row is deleted."""
    from jobloom.engine import registry

    forget = registry.forget
    beating: list[bool] = []

    async def watched(tx: Any, name: str) -> None:
        beating.append(worker.leases.beating)
        await forget(tx, name)

    monkeypatch.setattr(registry, "forget", watched)
    worker, task = await run_worker(app, concurrency=2)

    async def started() -> bool:  # (the row is written before the heartbeat starts)
        return worker.leases.beating and await _listed(app, worker.name)

    try:
        await eventually(started, what="the worker in the registry, its heartbeat running")
    finally:
        await stop(worker, task)
    assert beating == [False]
    assert not await _listed(app, worker.name)


async def _listed(app: jobloom.App, name: str) -> bool:
    return name in (await _binding(app, "Echo")).workers
