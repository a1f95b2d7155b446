"""Batch performers on every store: batches fill up to batch_size or wait batch_wait, every item is
its own job with its own attempts, and concurrency counts batches."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import jobloom
from tests.helpers import eventually

SIZES: list[int] = []
RUNNING = [0, 0]  # batches in perform_batch now, and the peak


class Index(jobloom.BatchPerformer[dict[str, Any], str]):
    """Settles items by their payload: ``ok`` (left unsettled), ``bad`` (fail), ``later`` (retry once),
    ``named`` (succeed with a result); a batch with ``boom`` raises on its first attempt."""

    batch_size = 4
    batch_wait = 0.3
    concurrency = 1
    backoff = jobloom.Backoff.fixed(0)

    async def perform_batch(self, items: list[jobloom.BatchItem[dict[str, Any]]]) -> None:
        SIZES.append(len(items))
        RUNNING[0] += 1
        RUNNING[1] = max(RUNNING[1], RUNNING[0])
        try:
            await asyncio.sleep(0.02)
            for item in items:
                kind = item.payload["kind"]
                if kind == "bad":
                    item.fail("bad document")
                elif kind == "later" and item.ctx.attempt == 1:
                    item.retry(after=0)
                elif kind == "named":
                    item.succeed(f"indexed {item.job_id}")
            if any(i.payload["kind"] == "boom" and i.ctx.attempt == 1 for i in items):
                raise RuntimeError("the index is down")
        finally:
            RUNNING[0] -= 1


@pytest.fixture
async def app(store_url: str):
    SIZES.clear()
    RUNNING[:] = [0, 0]
    app = jobloom.App(store_url, performers=[Index], auto_migrate=True, lease=2.0)
    yield app
    await app.close()


async def _workers(app: jobloom.App, n: int) -> list[tuple[jobloom.Worker, asyncio.Task[None]]]:
    out = []
    for _ in range(n):
        w = jobloom.Worker(app, concurrency=4, grace=2.0)
        out.append((w, asyncio.create_task(w.run())))
    return out


async def _stop(workers: list[tuple[jobloom.Worker, asyncio.Task[None]]]) -> None:
    for w, _ in workers:
        w.stop()
    await asyncio.wait_for(asyncio.gather(*(t for _, t in workers)), 15)


async def _finished(app: jobloom.App, jobs: list[jobloom.Job]) -> list[jobloom.Job] | None:
    now = [await app.get_job(j.id) for j in jobs]
    return now if all(j.finished for j in now) else None


async def test_items_settle_one_by_one(app: jobloom.App) -> None:
    kinds = ["ok", "bad", "later", "named", "ok", "ok"]
    jobs = [await app.enqueue(Index, {"kind": k}) for k in kinds]
    workers = await _workers(app, 1)
    try:
        done = await eventually(lambda: _finished(app, jobs), what="every item finished")
    finally:
        await _stop(workers)
    by_kind = dict(zip(kinds[:4], done[:4], strict=True))
    assert by_kind["ok"].state == "succeeded" and by_kind["ok"].attempt == 1
    assert by_kind["bad"].state == "failed" and by_kind["bad"].error == "Permanent: bad document"
    assert by_kind["bad"].attempt == 1  # failed for good: no other attempt
    assert by_kind["later"].state == "succeeded" and by_kind["later"].attempt == 2
    assert by_kind["named"].result == f"indexed {by_kind['named'].id}"
    assert [a.outcome for a in await app.attempts(by_kind["later"].id)] == ["retry", "succeeded"]
    # a full batch of 4 at once; the 2 left waited batch_wait and went with the retried item
    assert SIZES[0] == 4 and sum(SIZES) == 7 and RUNNING[1] == 1


async def test_a_raising_batch_fails_its_unsettled_items_each_by_its_own_policy(app: jobloom.App) -> None:
    jobs = [await app.enqueue(Index, {"kind": k}) for k in ("boom", "ok", "bad")]
    workers = await _workers(app, 1)
    try:
        boom, ok, bad = await eventually(lambda: _finished(app, jobs), what="every item finished")
    finally:
        await _stop(workers)
    assert SIZES[0] == 3  # fewer than batch_size: started once the first had waited batch_wait
    for job in (boom, ok):  # unsettled when it raised: a failed attempt each, retried by the backoff
        assert job.state == "succeeded" and job.attempt == 2
        assert [a.outcome for a in await app.attempts(job.id)] == ["failed", "succeeded"]
        assert "the index is down" in ((await app.attempts(job.id))[0].error or "")
    assert bad.state == "failed" and bad.attempt == 1  # settled before the raise: kept


@pytest.mark.serial  # a time bound: a partial batch starts soon after batch_wait
async def test_a_partial_batch_waits_batch_wait(app: jobloom.App) -> None:
    job = await app.enqueue(Index, {"kind": "ok"})
    workers = await _workers(app, 1)
    try:
        done = await app.wait(job.id, timeout=10)
    finally:
        await _stop(workers)
    assert done.state == "succeeded" and done.started_at is not None
    waited = (done.started_at - done.created_at).total_seconds()
    assert 0.25 <= waited < 2.0, waited


async def test_concurrency_counts_batches_across_workers(app: jobloom.App) -> None:
    jobs = await app.enqueue_many([(Index, {"kind": "ok"}) for _ in range(24)])
    workers = await _workers(app, 3)
    try:
        await eventually(lambda: _finished(app, jobs), what="every item finished")
    finally:
        await _stop(workers)
    assert RUNNING[1] == 1, "two batches ran at once with concurrency = 1"
    assert sum(SIZES) == 24 and max(SIZES) == 4 and len(SIZES) >= 6


def test_batch_options_are_checked() -> None:
    class Sync(jobloom.BatchPerformer[int, None]):
        def perform_batch(self, items: list[jobloom.BatchItem[int]]) -> None:  # type: ignore[override]
            return None

    class Zero(jobloom.BatchPerformer[int, None]):
        batch_size = 0

        async def perform_batch(self, items: list[jobloom.BatchItem[int]]) -> None:
            return None

    with pytest.raises(jobloom.InvalidOption, match="perform_batch on Sync"):
        jobloom.App("sqlite:///:memory:", performers=[Sync])
    with pytest.raises(jobloom.InvalidOption, match="batch_size on Zero"):
        jobloom.App("sqlite:///:memory:", performers=[Zero])
