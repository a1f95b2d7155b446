"""Batches of jobs with callbacks (``App.batch``), on both stores: the callbacks run once, when the
batch's last job ended, with the batch's counts; jobs added from inside a job are waited for too."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import jobloom
from jobloom.blobs import Directory
from jobloom.engine import coordinator
from jobloom.engine.jobs import Outcome
from jobloom.engine.middleware import EnqueueCall

CALLED: list[tuple[str, dict[str, Any]]] = []


class Item(jobloom.Performer[dict[str, Any], Any]):
    """Fails if asked; adds ``more`` jobs to its batch first if asked."""

    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> Any:
        if payload.get("more"):
            added = await self.ctx.batch.add([(Item, {"n": i}) for i in range(payload["more"])])
            assert all(j.state == "queued" for j in added)
        if payload.get("fail"):
            raise jobloom.Permanent("asked to fail")
        return payload.get("n")


class SyncItem(jobloom.Performer[dict[str, Any], Any]):
    """Adds one job to its batch from a plain ``def``."""

    def perform(self, payload: dict[str, Any]) -> Any:
        return [j.id for j in self.ctx.batch.add([(Item, {"n": 99})])]


class Done(jobloom.Performer[dict[str, Any], None]):
    """A callback: records its payload."""

    async def perform(self, payload: dict[str, Any]) -> None:
        CALLED.append((payload["kind"], payload))


@pytest.fixture
async def app(store_url: str):
    CALLED.clear()
    app = jobloom.App(store_url, performers=[Item, SyncItem, Done], auto_migrate=True)
    yield app
    await app.close()


async def test_callbacks_run_once_with_the_counts(app: jobloom.App) -> None:
    b = await app.batch([(Item, {"n": i}) for i in range(5)], on_complete=(Done, {"kind": "complete"}),
                        on_success=(Done, {"kind": "success"}))
    assert (b.total, b.pending, len(b.job_ids)) == (5, 5, 5)
    await app.drain()
    assert sorted(k for k, _ in CALLED) == ["complete", "success"]
    counts = {"batch": b.id, "total": 5, "succeeded": 5, "failed": 0, "cancelled": 0}
    assert all(p == {"kind": k, **counts} for k, p in CALLED)
    now = await app.get_batch(b.id)
    assert (now.total, now.succeeded, now.pending, now.finished) == (5, 5, 0, True)
    assert (await app.drain()) == 0  # nothing runs again


async def test_on_success_is_skipped_when_a_job_fails_and_on_complete_counts(app: jobloom.App) -> None:
    b = await app.batch([(Item, {"n": 1}), (Item, {"fail": True}), (Item, {}, jobloom.EnqueueOptions(delay=3600))],
                        on_complete=(Done, {"kind": "complete"}), on_success=(Done, {"kind": "success"}))
    await app.drain()
    assert CALLED == []
    await app.cancel(b.job_ids[2])
    await app.drain()
    assert [(k, p["succeeded"], p["failed"], p["cancelled"]) for k, p in CALLED] == [("complete", 1, 1, 1)]
    assert b.on_success is not None and (await app.get_job(b.on_success)).state == "skipped"
    got = await app.get_batch(b.id)
    assert (got.succeeded, got.failed, got.cancelled, got.pending) == (1, 1, 1, 0)


async def test_jobs_added_from_inside_a_job_are_waited_for(app: jobloom.App) -> None:
    b = await app.batch([(Item, {"more": 3}), (SyncItem, {})], on_complete=(Done, {"kind": "complete"}))
    await app.drain()
    assert [(k, p["total"], p["succeeded"]) for k, p in CALLED] == [("complete", 6, 6)]
    assert (await app.get_batch(b.id)).total == 6


async def test_a_job_in_no_batch_cannot_add_to_one(app: jobloom.App) -> None:
    job = await app.enqueue(SyncItem, {})
    await app.drain()
    failed = await app.get_job(job.id)
    assert failed.state in ("failed", "scheduled") and "in none" in (failed.error or "")


async def test_bad_batches_are_refused_and_leave_nothing(app: jobloom.App) -> None:
    with pytest.raises(jobloom.InvalidOption, match="items"):
        await app.batch([])
    with pytest.raises(jobloom.InvalidOption, match="on_complete"):
        await app.batch([(Item, {})], on_complete=Done)  # type: ignore[arg-type]
    with pytest.raises(jobloom.InvalidOption, match="unique_key"):
        await app.batch([(Item, {}, jobloom.EnqueueOptions(unique_key="k"))])
    with pytest.raises(jobloom.InvalidOption, match="JSON object"):
        await app.batch([(Item, {})], on_complete=(Item, [1]))
    with pytest.raises(jobloom.BatchNotFound):
        await app.get_batch(424242)
    assert await app.list_jobs() == []


async def test_the_last_two_jobs_ending_at_once_release_the_callback_once(app: jobloom.App) -> None:
    """Two transactions report the batch's last two jobs at the same moment (on PostgreSQL, two
    connections): the countdown's row lock orders them, and the callback is released exactly once."""
    b = await app.batch([(Item, {"n": 1}), (Item, {"n": 2})], on_complete=(Done, {"kind": "complete"}))
    store = await app.store()
    now = store.now()

    async def claim(tx: Any) -> Any:
        return await coordinator.dispatch(tx, "Item", capacity=2, worker="w1", now=now, lease=30.0)

    claimed = (await store.transact(claim)).claimed
    assert sorted(c.id for c in claimed) == sorted(b.job_ids)
    other = app.stores.open()
    await other.open()
    try:
        async def report(s: Any, c: Any) -> None:
            o = Outcome(c.id, c.attempt, "succeeded", "w1", now, now, result="1")
            await s.transact(lambda tx: coordinator.report(tx, [o], s.now(), hooks=app.hooks))

        await asyncio.gather(report(store, claimed[0]), report(other, claimed[1]))
    finally:
        await other.close()
    assert b.on_complete is not None and (await app.get_job(b.on_complete)).state == "queued"
    await app.drain()
    assert [k for k, _ in CALLED] == ["complete"]


class Marks:
    """Enqueue middleware: tags each job, and refuses a payload marked ``refuse``."""

    async def enqueue(self, request: EnqueueCall, call_next: Any) -> EnqueueCall:
        if request.payload.get("refuse"):
            raise PermissionError("refused by middleware")
        request.tags = [*request.tags, "marked"]
        return await call_next(request)  # type: ignore[no-any-return]


async def test_a_batchs_jobs_pass_the_enqueue_middleware(store_url: str) -> None:
    app = jobloom.App(store_url, performers=[Item, Done], auto_migrate=True, middleware=[Marks()])
    try:
        made = await app.batch([(Item, {"n": 1}), (Item, {"n": 2})], on_complete=(Done, {"kind": "complete"}))
        assert [(await app.get_job(i)).tags for i in made.job_ids] == [["marked"], ["marked"]]
        with pytest.raises(PermissionError) as refused:
            await app.batch([(Item, {"n": 3}), (Item, {"n": 4, "refuse": True})])
        assert "in item 1 of batch" in "".join(refused.value.__notes__)
        assert len(await app.list_jobs()) == 3  # the first batch and its callback; the refused one left nothing
    finally:
        await app.close()


async def test_a_batchs_large_payloads_go_to_the_blob_store(store_url: str, tmp_path: Path) -> None:
    CALLED.clear()
    folder = tmp_path / "blobs"
    app = jobloom.App(store_url, performers=[Item, Done], auto_migrate=True, blobs=Directory(folder),
                      offload_over=1024)
    try:
        big = {"n": 1, "pad": "b" * 4096}
        made = await app.batch([(Item, big), (Item, {"n": 2})], on_complete=(Done, {"kind": "complete"}))
        assert len(list(folder.glob("*/*"))) == 1
        assert (await app.get_job(made.job_ids[0])).payload == big
        await app.drain()
        assert (await app.get_batch(made.id)).succeeded == 2
        assert [kind for kind, _ in CALLED] == ["complete"]
    finally:
        await app.close()
