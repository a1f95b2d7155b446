"""Retention on every store: finished jobs are deleted with their history after their binding's
retention, in bounded batches; unfinished jobs never are."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

import jobloom
from jobloom.housekeeping.retention import DEFAULTS, RetentionKeeper, prune, prune_batch, stored_retentions
from jobloom.store.base import Tx

from .flow_performers import PERFORMERS, image_flow

DAY = 86400.0


class Ok(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Bad(jobloom.Performer[dict[str, Any], None]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> None:
        raise RuntimeError("bad")


class Brief(jobloom.Performer[dict[str, Any], None]):
    retention = {"succeeded": 60.0, "failed": 120.0}

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[jobloom.App]:
    app = jobloom.App(store_url, performers=[Ok, Bad, Brief], auto_migrate=True)
    yield app
    await app.close()


async def exists(app: jobloom.App, job_id: int) -> bool:
    try:
        await app.get_job(job_id)
    except jobloom.JobNotFound:
        return False
    return True


async def attempt_rows(app: jobloom.App, job_id: int) -> int:
    store = await app.store()

    async def work(tx: Tx) -> int:
        return len(await tx.fetch("get_attempts", {"id": job_id}))

    return await store.transact(work, exclusive=False)


async def finished_jobs(app: jobloom.App) -> dict[str, int]:
    ok = await app.enqueue(Ok, {})
    bad = await app.enqueue(Bad, {})
    cancelled = await app.enqueue(Ok, {}, delay=3600)
    await app.cancel(cancelled.id)
    await app.drain()
    waiting = await app.enqueue(Ok, {}, delay=100 * DAY)  # unfinished, and the newest job
    return {"succeeded": ok.id, "failed": bad.id, "cancelled": cancelled.id, "waiting": waiting.id}


async def test_defaults_keep_successes_a_day_and_failures_a_week(app: jobloom.App) -> None:
    ids = await finished_jobs(app)
    assert await attempt_rows(app, ids["succeeded"]) == 1
    now = time.time()
    assert await prune(await app.store(), app.specs, now + 0.5 * DAY) == (0, False)
    deleted, more = await prune(await app.store(), app.specs, now + 2 * DAY)
    assert (deleted, more) == (1, False)
    assert not await exists(app, ids["succeeded"]) and await attempt_rows(app, ids["succeeded"]) == 0
    assert await exists(app, ids["failed"]) and await exists(app, ids["cancelled"])
    assert await prune(await app.store(), app.specs, now + 8 * DAY) == (2, False)
    assert not await exists(app, ids["failed"]) and await attempt_rows(app, ids["failed"]) == 0
    assert not await exists(app, ids["cancelled"])
    assert await prune(await app.store(), app.specs, now + 1000 * DAY) == (0, False)
    assert await exists(app, ids["waiting"])  # never an unfinished job


async def test_each_binding_uses_its_performer_retention(app: jobloom.App) -> None:
    brief = await app.enqueue(Brief, {})
    ok = await app.enqueue(Ok, {})
    await app.drain()
    await app.enqueue(Ok, {}, delay=DAY)
    await prune(await app.store(), app.specs, time.time() + 90)
    assert not await exists(app, brief.id) and await exists(app, ok.id)


async def test_bindings_the_app_does_not_know_get_the_defaults(app: jobloom.App, store_url: str) -> None:
    ids = await finished_jobs(app)
    bare = jobloom.App(store_url, auto_migrate=True)
    try:
        assert await prune(await bare.store(), bare.specs, time.time() + 2 * DAY) == (1, False)
        assert not await exists(app, ids["succeeded"]) and await exists(app, ids["failed"])
    finally:
        await bare.close()


class Report(jobloom.Performer[dict[str, Any], None]):
    retention = 30 * DAY

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Mine(jobloom.Performer[dict[str, Any], None]):
    retention = {"succeeded": 60.0}

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


async def test_an_app_prunes_another_apps_binding_by_the_retention_its_performer_stored(store_url: str) -> None:
    performing = jobloom.App(store_url, performers=[Report], auto_migrate=True)
    enqueuing = jobloom.App(store_url, performers=[Mine], auto_migrate=True)  # never performs Report
    try:
        report = await performing.enqueue(Report, {})
        await performing.drain()  # a worker stores its bindings' retention when it starts
        mine = await enqueuing.enqueue(Mine, {})
        await enqueuing.drain()
        await enqueuing.enqueue(Mine, {}, delay=100 * DAY)  # unfinished, and the newest job
        stored = await stored_retentions(await enqueuing.store())
        assert stored["Report"] == dict.fromkeys(DEFAULTS, 30 * DAY)
        assert stored["Mine"] == {**DEFAULTS, "succeeded": 60.0}
        now = time.time()
        # the pass by the defaults never picks a binding that has a stored retention, even one the
        # pruner did not know of when it listed the stored retentions
        assert await prune_batch(await enqueuing.store(), state="succeeded", cutoff=now + 2 * DAY, bindings=["Mine"],
                                 others=True, limit=10) == 0
        keeper = RetentionKeeper(enqueuing.specs)

        await keeper.run(await enqueuing.store(), now + 90)  # its own binding by its own retention
        assert not await exists(enqueuing, mine.id) and await exists(enqueuing, report.id)
        for later in (2 * DAY, 29 * DAY):  # past the default day, within the stored 30 days: kept
            await keeper.run(await enqueuing.store(), now + later)
            assert await exists(enqueuing, report.id), later
        await keeper.run(await enqueuing.store(), now + 31 * DAY)
        assert not await exists(enqueuing, report.id) and await attempt_rows(enqueuing, report.id) == 0
        assert keeper.deleted == 2
    finally:
        await performing.close()
        await enqueuing.close()


async def test_a_binding_with_no_stored_retention_gets_the_defaults(store_url: str) -> None:
    performers = jobloom.App(store_url, performers=[Report, Ok], auto_migrate=True)  # never starts a worker
    pruner = jobloom.App(store_url, performers=[Mine], auto_migrate=True)
    try:
        await performers.set_limits("Report", concurrency=2)  # a binding row with no retention
        cancelled = [await performers.enqueue(p, {}, delay=DAY) for p in (Report, Ok)]  # Ok has no row at all
        for job in cancelled:
            await performers.cancel(job.id)
        await performers.enqueue(Ok, {}, delay=100 * DAY)  # unfinished, and the newest job
        assert await stored_retentions(await pruner.store()) == {}
        now = time.time()
        assert await prune(await pruner.store(), pruner.specs, now + 6 * DAY) == (0, False)
        # cancelled: 7 days by default
        assert await prune(await pruner.store(), pruner.specs, now + 8 * DAY) == (2, False)
        assert [await exists(pruner, j.id) for j in cancelled] == [False, False]
    finally:
        await performers.close()
        await pruner.close()


async def test_pruning_goes_in_bounded_batches(app: jobloom.App) -> None:
    jobs = await app.enqueue_many([(Ok, {}) for _ in range(10)])
    await app.drain()
    await app.enqueue(Ok, {}, delay=DAY)
    store = await app.store()
    later = time.time() + 2 * DAY
    assert await prune_batch(store, state="succeeded", cutoff=later - DAY, bindings=["Ok"], others=False,
                             limit=3) == 3
    assert await prune(await app.store(), app.specs, later, batch=3, max_batches=2) == (6, True)
    assert await prune(await app.store(), app.specs, later, batch=3, max_batches=2) == (1, False)
    assert [await exists(app, j.id) for j in jobs] == [False] * 10


async def test_the_keeper_runs_again_at_once_only_while_work_is_left(app: jobloom.App) -> None:
    await app.enqueue_many([(Ok, {}) for _ in range(5)])
    await app.drain()
    await app.enqueue(Ok, {}, delay=DAY)
    keeper = RetentionKeeper(app.specs, interval=60.0, batch=2, max_batches=1)
    now = time.time()
    assert await keeper.next_due(await app.store(), now) <= now  # due at start
    await keeper.run(await app.store(), now)  # nothing old yet
    assert await keeper.next_due(await app.store(), now) == now + 60.0
    later = now + 2 * DAY
    store = await app.store()
    await keeper.run(store, later)
    assert (await keeper.next_due(store, later)) <= app.now() and keeper.deleted == 2
    for _ in range(3):
        await keeper.run(await app.store(), later)
    assert keeper.deleted == 5 and await keeper.next_due(await app.store(), later) == later + 60.0


async def test_a_finished_run_goes_with_the_last_of_its_jobs(store_url: str) -> None:
    image = image_flow()
    app = jobloom.App(store_url, performers=[*PERFORMERS, Ok], flows=[image], auto_migrate=True)
    try:
        ok = await app.start(image, {"image": "a.png"}, id="ok-run")
        failed = await app.start(image, {"image": "b.png", "fail_thumb": True}, id="failed-run")
        for _ in range(5):
            await app.drain()
        running = await app.start(image, {"image": "c.png"}, id="running-run")  # not drained
        await app.enqueue(Ok, {}, delay=100 * DAY)  # the newest job, which SQLite never prunes
        assert ((await app.get_run(ok.id)).state, (await app.get_run(failed.id)).state) == ("succeeded", "failed")
        now = time.time()

        # successes go after a day: the failed run keeps its failed node
        await prune(await app.store(), app.specs, now + 2 * DAY)
        with pytest.raises(jobloom.RunNotFound):
            await app.get_run(ok.id)
        kept = await app.get_run(failed.id)
        assert {n: s.state for n, s in kept.nodes.items()} == {"thumbnail": "failed", "publish": "skipped"}

        await prune(await app.store(), app.specs, now + 8 * DAY)
        with pytest.raises(jobloom.RunNotFound):
            await app.get_run(failed.id)
        assert (await app.get_run(running.id)).state == "running"  # its jobs never finished

        again = await app.start(image, {"image": "d.png"}, id="ok-run")  # the id starts a new run
        assert again.state == "running" and again.input == {"image": "d.png"}
    finally:
        await app.close()


async def test_old_read_model_rows_are_pruned(app: jobloom.App) -> None:
    from jobloom.engine.jobs import event
    from jobloom.housekeeping.stats import project_once

    store = await app.store()
    now = time.time()

    async def add(tx: Tx) -> None:
        await tx.executemany("insert_event", [event(now - 40 * DAY, 1, "Ok", "enqueued"),
                                              event(now - 60, 2, "Ok", "enqueued")])

    await store.transact(add)
    while await project_once(store):
        pass
    assert (await app.stats(since=now - 50 * DAY)).total.enqueued == 2
    await prune(await app.store(), app.specs, now)
    assert (await app.stats(since=now - 50 * DAY)).total.enqueued == 1
