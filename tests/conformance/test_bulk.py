"""Bulk actions on every store: retry_many, cancel_many and delete_many change exactly the matching jobs
whose state allows the action, chunk by chunk, while a worker keeps serving another binding."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

import jobloom
from jobloom.app import bulk
from jobloom.core.states import ALL_STATES, FINISHED_STATES, RETRYABLE_STATES

from .search_support import Row, seed, seed_sql


class Fast(jobloom.Performer[dict[str, Any], None]):
    seen: list[float] = []

    async def perform(self, payload: dict[str, Any]) -> None:
        Fast.seen.append(time.time() - payload["sent"])


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[jobloom.App]:
    app = jobloom.App(store_url, performers=[Fast], auto_migrate=True)
    await app.migrate()
    yield app
    await app.close()


def every_state(binding: str, tags: tuple[str, ...] = ()) -> list[Row]:
    return [Row(binding, s, tags, error="boom") for s in ALL_STATES for _ in range(3)]


async def states_of(app: jobloom.App, binding: str) -> dict[int, str]:
    return {j.id: j.state for j in await app.list_jobs(binding=binding, limit=10_000)}


async def test_retry_many_retries_only_what_may_be_retried(app: jobloom.App, store_url: str) -> None:
    ids = seed(store_url, every_state("A") + every_state("B") + [Row("Z", "queued")])
    before = await states_of(app, "A")
    store = await app.store()
    n = await bulk.retry_many(store, jobloom.JobFilter(binding="A"), chunk=4)  # several chunks
    assert n == 3 * len(RETRYABLE_STATES)
    after = await states_of(app, "A")
    for job_id, state in before.items():
        assert after[job_id] == ("queued" if state in RETRYABLE_STATES else state), (job_id, state)
    retried = {i for i, s in before.items() if s in RETRYABLE_STATES}
    assert all(j.error is None for j in await app.list_jobs(binding="A", state="queued") if j.id in retried)
    assert set((await states_of(app, "B")).values()) == set(ALL_STATES)  # another binding untouched
    assert await app.retry_many(jobloom.JobFilter(binding="A")) == 0  # nothing left to retry
    assert await app.retry_many(jobloom.JobFilter(binding="B", state=["failed", "succeeded"])) == 3
    assert len(ids) == 6 * len(ALL_STATES) + 1


async def test_cancel_many_cancels_unfinished_jobs_and_asks_running_ones(app: jobloom.App, store_url: str) -> None:
    seed(store_url, every_state("A", ("t",)) + every_state("A") + [Row("Z", "queued")])
    before = await states_of(app, "A")
    n = await app.cancel_many(jobloom.JobFilter(binding="A", tags=["t"]))
    assert n == 3 * 4  # waiting, scheduled, queued at once; running asked
    after = {j.id: j for j in await app.list_jobs(binding="A", limit=1000)}
    tagged = {j.id for j in await app.list_jobs(tags=["t"], limit=1000)}
    for job_id, state in before.items():
        job = after[job_id]
        if job_id not in tagged or state in FINISHED_STATES:
            assert job.state == state and not job.cancel_requested
        elif state == "running":
            assert job.state == "running" and job.cancel_requested
        else:
            assert job.state == "cancelled"


async def test_delete_many_deletes_finished_jobs_only(app: jobloom.App, store_url: str) -> None:
    seed(store_url, every_state("A", ("t",)) + every_state("B") + [Row("Z", "queued")])
    store = await app.store()
    n = await bulk.delete_many(store, jobloom.JobFilter(state=["succeeded", "failed", "queued"], binding="A"), chunk=2)
    assert n == 6
    left = await states_of(app, "A")
    assert sorted(left.values()) == sorted(s for s in ALL_STATES for _ in range(3) if s not in ("succeeded", "failed"))
    assert await app.list_jobs(tags=["t"], state="failed") == []
    assert len(await states_of(app, "B")) == 3 * len(ALL_STATES)
    assert await app.delete_many(jobloom.JobFilter(binding="A")) == 12  # stalled, cancelled, skipped, expired
    assert sorted(set((await states_of(app, "A")).values())) == ["queued", "running", "scheduled", "waiting"]


async def test_bulk_actions_take_a_filter(app: jobloom.App) -> None:
    with pytest.raises(jobloom.InvalidOption, match="JobFilter"):
        await app.retry_many({"state": "failed"})  # type: ignore[arg-type]
    with pytest.raises(jobloom.InvalidOption, match="state"):
        jobloom.JobFilter(state="done")
    assert await app.delete_many(jobloom.JobFilter(state="queued")) == 0  # no allowed state: nothing read


FAILED = 10_000


def _worker_thread(store_url: str, stop: threading.Event) -> None:
    async def go() -> None:
        app = jobloom.App(store_url, performers=[Fast], auto_migrate=True)
        worker = jobloom.Worker(app, bindings=["Fast"], concurrency=4, grace=2.0)
        task = asyncio.create_task(worker.run())
        while not stop.is_set():
            await asyncio.sleep(0.01)
        worker.stop()
        await task
        await app.close()

    asyncio.run(go())


@pytest.mark.serial
async def test_bulk_retry_leaves_another_binding_served_quickly(store_url: str) -> None:
    """A worker serving Fast keeps a low latency (enqueue to perform) while 10,000 failed jobs of another
    binding are retried in chunks (a short transaction each): the median probe waits a small part of the
    retry's length, p95 less than half of it (on SQLite one transaction for all of them makes the probes
    due meanwhile wait for its end: p95 of about the retry's length). The 100,000-job version, in
    processes of their own, is benchmarks/bulk_retry.py."""
    app = jobloom.App(store_url, performers=[Fast], auto_migrate=True)
    await app.migrate()
    now = time.time()  # recent: retention leaves them alone
    seed_sql(store_url, f"""
INSERT INTO jobloom_jobs (binding, state, payload, run_at, attempt, max_attempts, delivery, created_at, finished_at,
                          error)
SELECT 'Bulk', 'failed', '{{}}', 0, 1, 1, 'at_least_once', {now}, {now}, 'boom'
FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {FAILED}) SELECT i FROM n) s;""")
    Fast.seen = []
    stop = threading.Event()
    worker = threading.Thread(target=_worker_thread, args=(store_url, stop))
    worker.start()
    prober = jobloom.App(store_url, performers=[Fast], auto_migrate=True)
    try:
        await prober.enqueue(Fast, {"sent": time.time()})  # the worker is up
        await _eventually(lambda: len(Fast.seen) == 1)
        Fast.seen = []
        done = asyncio.Event()

        async def probe() -> int:
            """A probe every 5 ms, timed from when it was due (a probe held up delays the next ones,
            and their wait counts too)."""
            sent, start = 0, time.time()
            while not done.is_set():
                due = start + sent * 0.005
                await asyncio.sleep(max(0.0, due - time.time()))
                await prober.enqueue(Fast, {"sent": due})
                sent += 1
            return sent

        took = 0.0

        async def retry() -> int:
            nonlocal took
            start = time.monotonic()
            try:
                return await asyncio.to_thread(lambda: asyncio.run(_retry_all(store_url)))
            finally:
                took = time.monotonic() - start
                done.set()

        retried, sent = await asyncio.gather(retry(), probe())
        assert retried == FAILED
        await _eventually(lambda: len(Fast.seen) >= sent)
        assert sent >= 3, sent
        p50 = statistics.median(Fast.seen)
        p95 = statistics.quantiles(Fast.seen, n=20)[-1]
        shown = f"p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, {sent} probes, retry {took:.2f} s"
        print(shown)
        # one transaction for the whole retry: the probes due meanwhile wait for its end (p50 about half
        # the retry's length, p95 about all of it); chunks: a probe waits one chunk at most
        assert p50 < took / 4 and p95 < took / 2, shown
        assert len(await app.list_jobs(binding="Bulk", state="queued", limit=FAILED + 1)) == FAILED
    finally:
        stop.set()
        await asyncio.to_thread(worker.join)
        await prober.close()
        await app.close()


async def _retry_all(store_url: str) -> int:
    app = jobloom.App(store_url, auto_migrate=True)
    try:
        return await app.retry_many(jobloom.JobFilter(binding="Bulk", state="failed"))
    finally:
        await app.close()


async def _eventually(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)
