"""A claim lost with the server, on every store: its attempt number is taken again by the re-run's claim,
and whatever the first run reports late is fenced off by the claim (owner and started_at), not by the
attempt number alone.

A claim committed without its flush (or one that a failover to an asynchronous standby never saw) is
gone after the server comes back: the job is queued again at the attempt before it. The tests make that
state directly, by setting the row back as it was before the claim, without a server crash."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from typing import Any

import pytest

import jobloom
from jobloom.core import lifecycle
from jobloom.engine import coordinator
from jobloom.engine.jobs import Claimed, Outcome, ReportResult
from jobloom.engine.links import Links
from jobloom.engine.steps import StepContext
from tests.helpers import eventually

from .performers import Echo

STARTED: list[int] = []
CANCELLED: list[int] = []
GATE: list[asyncio.Event] = []


class Waits(jobloom.Performer[dict[str, Any], str]):
    """Each run waits for ``GATE[0]`` and returns ``"run N"`` (N: the how-manieth run it is)."""

    async def perform(self, payload: dict[str, Any]) -> str:
        STARTED.append(len(STARTED) + 1)
        n = len(STARTED)
        try:
            await GATE[0].wait()
        except asyncio.CancelledError:
            CANCELLED.append(n)
            raise
        return f"run {n}"

LOSE = ("UPDATE jobloom_jobs SET state = 'queued', attempt = attempt - 1, lease_owner = NULL, "
        "lease_expires = NULL, started_at = NULL WHERE id = {p}")


@pytest.fixture
async def app(store_url: str):
    STARTED.clear()
    CANCELLED.clear()
    GATE[:] = [asyncio.Event()]
    app = jobloom.App(store_url, performers=[Echo, Waits], auto_migrate=True, lease=30.0)
    await app.register_bindings()
    yield app
    await app.close()


def lose_claim(store_url: str, job_id: int) -> None:
    """The job as it was before its last claim: queued at the attempt before, no lease, never started."""
    if store_url.startswith("sqlite:"):
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
            assert conn.execute(LOSE.format(p="?"), (job_id,)).rowcount == 1
        conn.close()
        return
    import psycopg

    with psycopg.connect(store_url) as pg:
        assert pg.execute(LOSE.format(p="%s"), (job_id,)).rowcount == 1


async def claim(app: jobloom.App, worker: str, now: float) -> Claimed:
    store = await app.store()

    async def work(t: Any) -> list[Claimed]:
        return (await coordinator.dispatch(t, "Echo", capacity=1, worker=worker, now=now, lease=30.0)).claimed

    [c] = await store.transact(work)
    return c


async def report(app: jobloom.App, o: Outcome) -> ReportResult:
    store = await app.store()
    return await store.transact(lambda t: coordinator.report(t, [o], time.time(), hooks=app.hooks))


def outcome(c: Claimed, worker: str, kind: str = lifecycle.SUCCEEDED, **kw: Any) -> Outcome:
    return Outcome(c.id, c.attempt, kind, worker, c.started_at, time.time(), **kw)


async def history(app: jobloom.App, job_id: int) -> list[tuple[int, str | None, str | None, str | None]]:
    """The attempts' recorded history rows (a running attempt, shown with no outcome, left out)."""
    return [(a.attempt, a.worker, a.outcome, a.reported_outcome) for a in await app.attempts(job_id)
            if a.outcome is not None]


@pytest.mark.parametrize("second", ["w2", "w1"])  # the re-run on another worker, or on the same one
async def test_a_lost_claims_late_report_does_not_end_the_re_run(
    app: jobloom.App, store_url: str, second: str,
) -> None:
    """Case A: the first run's report names the re-run's attempt number; it is stale, and the job goes on
    running the re-run until the re-run's own report ends it."""
    job = await app.enqueue(Echo, {})
    t0 = time.time()
    first = await claim(app, "w1", t0)
    lose_claim(store_url, job.id)
    rerun = await claim(app, second, t0 + 1)
    assert rerun.attempt == first.attempt == 1

    late = await report(app, outcome(first, "w1", result='"first"'))
    assert late.applied == 0 and late.stale == [job.id] and late.duplicate == 0
    running = await app.get_job(job.id)
    assert running.state == "running" and running.attempt == 1 and running.result is None
    assert await history(app, job.id) == []  # nothing recorded for a claim the job never durably ran

    done = await report(app, outcome(rerun, second, result='"re-run"'))
    assert done.applied == 1 and done.stale == []
    ended = await app.get_job(job.id)
    assert ended.state == "succeeded" and ended.result == "re-run"
    assert await history(app, job.id) == [(1, second, "succeeded", None)]
    # the first run's report again, after the re-run ended: still stale, and the re-run's row is left alone
    assert (await report(app, outcome(first, "w1", lifecycle.FAILED, error="late"))).stale == [job.id]
    assert await history(app, job.id) == [(1, second, "succeeded", None)]


async def test_a_lost_claims_report_before_the_re_run_writes_nothing(app: jobloom.App, store_url: str) -> None:
    """Case B: reported while the job is queued again below the attempt, the first run's outcome leaves no
    history row (no ``lost`` row to take the re-run's place), and the re-run's own row is the one kept."""
    job = await app.enqueue(Echo, {})
    t0 = time.time()
    first = await claim(app, "w1", t0)
    lose_claim(store_url, job.id)

    late = await report(app, outcome(first, "w1", lifecycle.FAILED, error="boom"))
    assert late.applied == 0 and late.stale == [job.id]
    queued = await app.get_job(job.id)
    assert queued.state == "queued" and queued.attempt == 0
    assert await history(app, job.id) == []

    rerun = await claim(app, "w2", t0 + 1)
    assert rerun.attempt == 1
    assert (await report(app, outcome(rerun, "w2", result='"ok"'))).applied == 1
    assert await history(app, job.id) == [(1, "w2", "succeeded", None)]
    assert (await app.get_job(job.id)).state == "succeeded"


async def test_a_reaped_attempts_late_report_is_still_recorded_beside_its_history(app: jobloom.App) -> None:
    """The fence keeps what a claim that the job did run reports late: the reaper's ``lost`` row of it
    notes the report (its owner and start are the claim's)."""
    job = await app.enqueue(Echo, {})
    now = time.time()
    c = await claim(app, "w1", now)
    store = await app.store()
    later = now + 30.0 + coordinator.LEASE_GRACE + 1
    assert await store.transact(lambda t: coordinator.reap(t, later, hooks=app.hooks)) == [job.id]
    assert (await report(app, outcome(c, "w1"))).stale == [job.id]
    assert await history(app, job.id) == [(1, "w1", "lost", "succeeded")]


async def test_a_lost_claims_snooze_steps_and_last_resort_are_fenced(app: jobloom.App, store_url: str) -> None:
    """Every other write of an attempt is fenced the same way: a snooze, a durable step, the last-resort
    failure of an outcome that cannot be applied."""
    job = await app.enqueue(Echo, {})
    t0 = time.time()
    first = await claim(app, "w1", t0)
    lose_claim(store_url, job.id)
    rerun = await claim(app, "w2", t0 + 1)
    store = await app.store()

    snooze = outcome(first, "w1", lifecycle.SNOOZED, retry_after=60.0)
    assert (await report(app, snooze)).stale == [job.id]
    old_steps = StepContext(store, job.id, 1, claim=("w1", first.started_at))
    assert not await store.transact(lambda t: old_steps.save_in(t, "charge", '"first"'))
    assert not await store.transact(lambda t: coordinator.quarantine(t, outcome(first, "w1", error="bad"), time.time()))
    running = await app.get_job(job.id)
    assert running.state == "running" and running.attempt == 1

    new_steps = StepContext(store, job.id, 1, claim=("w2", rerun.started_at))
    assert await store.transact(lambda t: new_steps.save_in(t, "charge", '"re-run"'))
    assert (await report(app, outcome(rerun, "w2", lifecycle.SNOOZED, retry_after=60.0))).applied == 1
    assert (await app.get_job(job.id)).state == "scheduled"


async def test_a_worker_that_claims_its_own_lost_claim_again_stops_the_first_run(
    app: jobloom.App, store_url: str,
) -> None:
    """The worker that made the lost claim claims the job again (same attempt number): it stops the run
    of the lost claim at once, and only the re-run's outcome is applied, even in one report with the
    first run's."""
    job = await app.enqueue(Waits, {})
    worker = jobloom.Worker(app, concurrency=4, bindings=["Waits"], name="w1")
    await worker.cycle.run(claim=True)
    await eventually(lambda: STARTED == [1], what="the first run started")
    lose_claim(store_url, job.id)
    await worker.cycle.run(claim=True)
    await eventually(lambda: STARTED == [1, 2] and CANCELLED == [1], what="the first run stopped, the re-run on")
    GATE[0].set()
    await eventually(lambda: len(worker.completer.outcomes) == 2, what="both runs' outcomes")
    await worker.cycle.run(claim=False)
    done = await app.get_job(job.id)
    assert done.state == "succeeded" and done.result == "run 2" and done.attempt == 1
    assert await history(app, job.id) == [(1, "w1", "succeeded", None)]


async def test_a_lost_claims_run_adds_nothing_to_its_batch(app: jobloom.App, store_url: str) -> None:
    """``ctx.batch.add`` is fenced by the claim too: the run of a lost claim (same attempt number as the
    re-run's) is refused, and the re-run adds."""
    batch = await app.batch([(Echo, {})])
    [job_id] = batch.job_ids
    t0 = time.time()
    first = await claim(app, "w1", t0)
    lose_claim(store_url, job_id)
    rerun = await claim(app, "w2", t0 + 1)
    links = Links(app.store, app.spec)
    with pytest.raises(jobloom.InvalidTransition, match="not running attempt 1 under this claim"):
        await links.batch_add(job_id, 1, [(Echo, {"late": True})], worker="w1", started_at=first.started_at)
    [added] = await links.batch_add(job_id, 1, [(Echo, {"n": 2})], worker="w2", started_at=rerun.started_at)
    assert set((await app.get_batch(batch.id)).job_ids) == {job_id, added.id}


SYNC_GATE = threading.Event()


class WaitsInThread(jobloom.Performer[dict[str, Any], str]):
    """A sync performer with a timeout: a thread that is told to stop runs on until ``SYNC_GATE`` opens."""

    timeout = 30.0

    def perform(self, payload: dict[str, Any]) -> str:  # a plain def: runs in a thread
        STARTED.append(len(STARTED) + 1)
        SYNC_GATE.wait(30)
        return "done"


async def test_a_superseded_runs_timeout_cannot_stop_the_re_run(store_url: str) -> None:
    """The run of a lost claim may outlive its stop (a thread runs on). Its timeout clock is keyed by job
    and attempt, which the re-run shares: it is disarmed when the run is superseded, so that only the
    re-run's own timeout can stop the re-run."""
    STARTED.clear()
    SYNC_GATE.clear()
    app = jobloom.App(store_url, performers=[WaitsInThread], auto_migrate=True, lease=30.0)
    worker = jobloom.Worker(app, concurrency=4, bindings=["WaitsInThread"], name="w1")
    try:
        job = await app.enqueue(WaitsInThread, {})
        await worker.cycle.run(claim=True)
        await eventually(lambda: STARTED == [1], what="the first run's thread started")
        key = (job.id, 1)
        first = worker.executor.running[key]
        await eventually(lambda: first.timer is not None, what="the first run's timeout armed")
        lose_claim(store_url, job.id)
        await worker.cycle.run(claim=True)
        await eventually(lambda: STARTED == [1, 2], what="the re-run's thread started")
        rerun = worker.executor.running[key]
        assert rerun is not first and first.stop_reason == "lease_lost"
        assert first.timer is None  # disarmed: left armed it would fire stop_job(key) at the re-run
        assert rerun.timer is not None and not rerun.timer.cancelled() and rerun.stop_reason is None
    finally:
        SYNC_GATE.set()
        await eventually(lambda: not worker.executor.running, what="both threads ended")
        await worker.executor.close()
        await app.close()
