"""The coordinator's transitions on every store, driven directly: leases, reaping, fencing, release."""

from __future__ import annotations

import time
from typing import Any

import pytest

import jobloom
from jobloom.core import lifecycle
from jobloom.engine import coordinator
from jobloom.engine.jobs import Claimed, Outcome, ReportResult
from jobloom.housekeeping.stats import Projector

from .performers import Echo


class Once(jobloom.Performer[dict[str, Any], None]):
    delivery = "at_most_once"

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Keyed(jobloom.Performer[dict[str, Any], None]):
    concurrency = 2
    concurrency_key = staticmethod(lambda p: p.get("k"))

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class KeyedPaced(jobloom.Performer[dict[str, Any], None]):
    rate_limit = "1/h burst 3"
    concurrency_key = staticmethod(lambda p: p.get("k"))

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture
async def app(store_url: str):
    app = jobloom.App(store_url, performers=[Echo, Once, Keyed, KeyedPaced], auto_migrate=True, lease=5.0)
    await app.register_bindings()
    yield app
    await app.close()


async def tx(app: jobloom.App, fn: Any) -> Any:
    store = await app.store()
    return await store.transact(fn)


async def claim(app: jobloom.App, binding: str, worker: str, *, now: float, lease: float = 5.0,
                capacity: int = 10) -> list[Claimed]:
    async def work(t: Any) -> list[Claimed]:
        return (await coordinator.dispatch(t, binding, capacity=capacity, worker=worker, now=now,
                                           lease=lease)).claimed
    return await tx(app, work)


def outcome(c: Claimed, worker: str, kind: str = lifecycle.SUCCEEDED, **kw: Any) -> Outcome:
    return Outcome(c.id, c.attempt, kind, worker, c.started_at, time.time(), **kw)


async def test_a_claimed_job_is_not_claimed_again(app: jobloom.App) -> None:
    job = await app.enqueue(Echo, {})
    now = time.time()
    [c] = await claim(app, "Echo", "w1", now=now)
    assert c.id == job.id and c.attempt == 1
    assert await claim(app, "Echo", "w2", now=now) == []
    running = await app.get_job(job.id)
    assert running.state == "running" and running.attempt == 1


async def test_an_expired_lease_is_reaped_and_the_stale_report_is_recorded_not_applied(app: jobloom.App) -> None:
    job = await app.enqueue(Echo, {})
    now = time.time()
    [c] = await claim(app, "Echo", "w1", now=now, lease=1.0)

    async def reap(t: Any) -> list[int]:
        return await coordinator.reap(t, now + 1.0 + coordinator.LEASE_GRACE + 0.1, hooks=app.hooks)

    assert await tx(app, reap) == [job.id]
    after = await app.get_job(job.id)
    assert after.state == "scheduled"  # at-least-once: a failed attempt, retried with backoff
    # the lost worker reports success late: fenced off, recorded in the history
    async def late(t: Any) -> ReportResult:
        return await coordinator.report(t, [outcome(c, "w1")], time.time(), hooks=app.hooks)

    result = await tx(app, late)
    assert result.stale == [job.id] and result.applied == 0
    assert (await app.get_job(job.id)).state == "scheduled"
    [attempt] = await app.attempts(job.id)
    assert attempt.outcome == "lost" and attempt.reported_outcome == "succeeded"
    assert attempt.reported_at is not None


async def test_a_cycle_that_reports_a_job_whose_lease_expired_applies_the_report_not_a_reap(
    app: jobloom.App,
) -> None:
    done, lost = await app.enqueue(Echo, {"n": 1}), await app.enqueue(Echo, {"n": 2})
    now = time.time()
    claimed = {c.id: c for c in await claim(app, "Echo", "w1", now=now, lease=1.0)}
    later = now + 1.0 + coordinator.LEASE_GRACE + 0.1  # both leases have expired

    async def cycle(t: Any) -> tuple[list[int], set[int]]:
        reads = await coordinator.read_cycle(t, later, reporting=[done.id], worker="w1", watching=True,
                                             bindings=["Echo"])
        await coordinator.report(t, [outcome(claimed[done.id], "w1")], later, locked=reads.locked, hooks=app.hooks)
        return await coordinator.reap(t, later, expired=reads.expired, hooks=app.hooks), set(reads.bindings)

    reaped, bindings = await tx(app, cycle)
    assert reaped == [lost.id] and bindings == {"Echo"}
    assert (await app.get_job(done.id)).state == "succeeded"
    assert [(a.outcome, a.reported_outcome) for a in await app.attempts(done.id)] == [("succeeded", None)]
    assert [a.outcome for a in await app.attempts(lost.id)] == ["lost"]


async def test_a_newer_attempt_is_never_overwritten_by_an_older_one(app: jobloom.App) -> None:
    job = await app.enqueue(Echo, {}, max_attempts=5)
    t0 = time.time()
    [first] = await claim(app, "Echo", "w1", now=t0, lease=1.0)

    async def reap_and_promote(t: Any) -> None:
        later = t0 + 100
        await coordinator.reap(t, later, hooks=app.hooks)
        await t.execute("promote_due", {"now": later + 7200, "limit": 10})

    await tx(app, reap_and_promote)
    [second] = await claim(app, "Echo", "w2", now=time.time())
    assert second.attempt == 2
    async def report_both(t: Any) -> ReportResult:
        return await coordinator.report(t, [outcome(first, "w1", lifecycle.FAILED, error="old")], time.time(),
                                        hooks=app.hooks)

    assert (await tx(app, report_both)).stale == [job.id]
    assert (await app.get_job(job.id)).state == "running"

    async def report_new(t: Any) -> ReportResult:
        return await coordinator.report(t, [outcome(second, "w2", result='"ok"')], time.time(), hooks=app.hooks)

    assert (await tx(app, report_new)).applied == 1
    done = await app.get_job(job.id)
    assert done.state == "succeeded" and done.result == "ok" and done.attempt == 2


async def test_a_repeated_report_is_idempotent(app: jobloom.App) -> None:
    job = await app.enqueue(Echo, {})
    [c] = await claim(app, "Echo", "w1", now=time.time())
    o = outcome(c, "w1", result='"r"')

    async def rep(t: Any) -> ReportResult:
        return await coordinator.report(t, [o], time.time(), hooks=app.hooks)

    assert (await tx(app, rep)).applied == 1
    again = await tx(app, rep)
    assert again.applied == 0 and again.duplicate == 1 and again.stale == []
    [attempt] = await app.attempts(job.id)
    assert attempt.outcome == "succeeded" and attempt.reported_outcome is None


async def test_at_most_once_lost_worker_gives_stalled(app: jobloom.App) -> None:
    job = await app.enqueue(Once, {})
    now = time.time()
    await claim(app, "Once", "w1", now=now, lease=1.0)

    async def reap(t: Any) -> list[int]:
        return await coordinator.reap(t, now + 10, hooks=app.hooks)

    await tx(app, reap)
    stalled = await app.get_job(job.id)
    assert stalled.state == "stalled" and stalled.attempt == 1
    assert await claim(app, "Once", "w2", now=now + 20) == []
    retried = await app.retry(job.id)
    assert retried.state == "queued"


async def test_at_most_once_failure_is_not_retried(app: jobloom.App) -> None:
    job = await app.enqueue(Once, {})
    [c] = await claim(app, "Once", "w1", now=time.time())

    async def rep(t: Any) -> ReportResult:
        return await coordinator.report(t, [outcome(c, "w1", lifecycle.FAILED, error="x")], time.time(),
                                        hooks=app.hooks)

    await tx(app, rep)
    assert (await app.get_job(job.id)).state == "failed"


async def test_heartbeat_extends_only_the_owners_leases(app: jobloom.App) -> None:
    job = await app.enqueue(Echo, {})
    now = time.time()
    await claim(app, "Echo", "w1", now=now, lease=1.0)
    key = (job.id, 1)

    async def beat(worker: str, attempt: int = 1) -> Any:
        async def work(t: Any) -> Any:
            return await coordinator.heartbeat(t, worker, [(job.id, attempt)], now + 0.5, 1.0)
        return await tx(app, work)

    assert await beat("intruder") == (set(), set())
    assert await beat("w1", attempt=2) == (set(), set())  # fenced: not the job's current attempt
    assert await beat("w1") == ({key}, set())

    async def reap(t: Any) -> list[int]:
        return await coordinator.reap(t, now + 1.0 + coordinator.LEASE_GRACE + 0.2, hooks=app.hooks)

    assert await tx(app, reap) == []  # the lease was extended to now + 1.5
    await app.cancel(job.id)
    assert await beat("w1") == ({key}, {key})


async def test_release_returns_unstarted_jobs_without_spending_an_attempt(app: jobloom.App) -> None:
    job = await app.enqueue(Echo, {})
    [c] = await claim(app, "Echo", "w1", now=time.time())

    async def rel(t: Any) -> int:
        return await coordinator.release(t, "w1", [(c.id, c.attempt, c.binding)], time.time())

    assert await tx(app, rel) == 1
    back = await app.get_job(job.id)
    assert back.state == "queued" and back.attempt == 0
    assert await app.attempts(job.id) == []


async def test_dispatch_respects_binding_and_key_limits(app: jobloom.App) -> None:
    for k in ("a", "a", "a", "b", "b"):
        await app.enqueue(Keyed, {"k": k})
    now = time.time()
    first = await claim(app, "Keyed", "w1", now=now)
    assert len(first) == 2  # binding concurrency 2, one per key
    keys = sorted([(await app.get_job(c.id)).concurrency_key or "" for c in first])
    assert keys == ["a", "b"]
    assert await claim(app, "Keyed", "w2", now=now) == []


async def test_a_job_picked_in_one_round_of_a_dispatch_is_not_picked_again(app: jobloom.App) -> None:
    # the first round picks the unkeyed job and one of key "a", and passes over the other (its key is full);
    # the next round reads past key "a" and finds the unkeyed job still queued: it must not pick it (and
    # spend a token on it) again, so the third token is left for the next dispatch
    plain = (await app.enqueue(KeyedPaced, {})).id
    keyed = (await app.enqueue(KeyedPaced, {"k": "a"})).id
    await app.enqueue(KeyedPaced, {"k": "a"})
    now = time.time()
    assert sorted(c.id for c in await claim(app, "KeyedPaced", "w1", now=now)) == sorted([plain, keyed])
    later = (await app.enqueue(KeyedPaced, {})).id
    assert [c.id for c in await claim(app, "KeyedPaced", "w1", now=now)] == [later]


async def test_capacity_bounds_one_claim(app: jobloom.App) -> None:
    for _ in range(5):
        await app.enqueue(Echo, {})
    got = await claim(app, "Echo", "w1", now=time.time(), capacity=3)
    assert len(got) == 3


async def events_of(app: jobloom.App, job_id: int) -> list[str]:
    async def work(t: Any) -> list[Any]:
        return await t.fetch("job_events", {"job_id": job_id})
    return [r[4] for r in await tx(app, work)]


async def test_every_state_change_appends_an_event(app: jobloom.App) -> None:
    app.housekeepers = [k for k in app.housekeepers if not isinstance(k, Projector)]  # it folds the outbox
    ok = await app.enqueue(Echo, {})
    await app.drain()
    assert await events_of(app, ok.id) == ["enqueued", "started", "succeeded"]
    later = await app.enqueue(Echo, {}, delay=60)
    await app.cancel(later.id)
    await app.retry(later.id)
    assert await events_of(app, later.id) == ["scheduled", "cancelled", "requeued"]
    once = await app.enqueue(Once, {})
    now = time.time()
    await claim(app, "Once", "w1", now=now, lease=1.0)

    async def reap(t: Any) -> list[int]:
        return await coordinator.reap(t, now + 10, hooks=app.hooks)

    await tx(app, reap)
    assert await events_of(app, once.id) == ["enqueued", "started", "stalled"]


async def test_a_rolled_back_transition_leaves_no_event(app: jobloom.App) -> None:
    job = await app.enqueue(Echo, {})

    async def fail_after_claim(t: Any) -> None:
        await coordinator.dispatch(t, "Echo", capacity=1, worker="w", now=time.time(), lease=5)
        raise RuntimeError("crash inside the transaction")

    with pytest.raises(RuntimeError):
        await tx(app, fail_after_claim)
    assert await events_of(app, job.id) == ["enqueued"]
    assert (await app.get_job(job.id)).state == "queued"


@pytest.fixture
def store_url(pooled_store_url: str) -> str:
    """This module runs through PgBouncer (transaction pooling) too."""
    return pooled_store_url
