"""The pull protocol's claims on every store: a heartbeat or report must present the secret its claim
returned, a worker limited to some bindings touches no other, and a lease never outlives the attempt's
timeout, whatever the heartbeats say (the attempt then ends as timed out, as a local one does)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator

import pytest

import jobloom
import jobloom.testing

RENDER = jobloom.RemoteBinding("Render", concurrency=4, max_attempts=2, backoff=jobloom.Backoff.fixed(0.05))
SHORT = jobloom.RemoteBinding("Short", timeout=1.5, max_attempts=2, backoff=jobloom.Backoff.fixed(0.05))


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[jobloom.App]:
    app = jobloom.App(store_url, performers=[RENDER, SHORT], auto_migrate=True, lease=1.0)
    yield app
    await app.close()


async def test_a_heartbeat_with_another_claims_secret_is_refused_and_renews_nothing(app: jobloom.App) -> None:
    a = await app.enqueue(RENDER, {"n": 0})
    b = await app.enqueue(RENDER, {"n": 1})
    first, second = await app.remote_claim("w", ["Render"], max=2)
    assert first.claim != second.claim and len(first.claim) >= 32
    before = [await _lease(app, j.id) for j in (a, b)]
    with pytest.raises(jobloom.ClaimRefused, match=f"job {second.id} attempt 1: the claim secret does not match"):
        await app.remote_heartbeat("w", [(first.id, 1, first.claim), (second.id, 1, first.claim)])
    assert [await _lease(app, j.id) for j in (a, b)] == before, "the refused heartbeat renewed nothing"
    held = await app.remote_heartbeat("w", [(first.id, 1, first.claim), (second.id, 1, second.claim)])
    assert held == sorted([(first.id, 1), (second.id, 1)])
    assert await app.remote_heartbeat("other", [(first.id, 1, first.claim)]) == [], "another worker's name"


async def test_a_binding_limited_caller_touches_no_other_binding(app: jobloom.App) -> None:
    job = await app.enqueue(SHORT, {})
    only = frozenset({"Render"})
    with pytest.raises(jobloom.ClaimRefused, match="limited to the bindings Render: not 'Short'"):
        await app.remote_claim("w", ["Render", "Short"], max=1, only=only)
    (held,) = await app.remote_claim("w", ["Short"], max=1)  # claimed by a caller without a limit
    with pytest.raises(jobloom.ClaimRefused, match="not 'Short'"):
        await app.remote_heartbeat("w", [(job.id, 1, held.claim)], only=only)
    with pytest.raises(jobloom.ClaimRefused, match="not 'Short'"):
        await app.remote_complete("w", job.id, 1, "succeeded", claim=held.claim, only=only)
    assert (await app.get_job(job.id)).state == "running"
    assert await app.remote_complete("w", job.id, 1, "succeeded", claim=held.claim, only=frozenset({"Short"}))


async def test_heartbeats_never_keep_an_attempt_past_its_timeout(store_url: str) -> None:
    clock = jobloom.testing.TestClock()  # heartbeats every 0.1 s of the clock, however slow the machine
    app = jobloom.App(store_url, performers=[RENDER, SHORT], auto_migrate=True, lease=1.0, clock=clock)
    try:
        job = await app.enqueue(SHORT, {})
        (held,) = await app.remote_claim("w", ["Short"], max=1)
        assert held.deadline is not None and held.lease_expires_at <= held.deadline
        stopped_at = None
        for _ in range(40):  # 4 s: well past the timeout of 1.5 s
            if await app.remote_heartbeat("w", [(job.id, 1, held.claim)]) == []:
                stopped_at = app.now()
                break
            assert await _lease(app, job.id) <= held.deadline + 1e-6, "renewed past the deadline"
            clock.jump(0.1)
        assert stopped_at is not None, "heartbeats kept the attempt for 4 s"
        assert stopped_at >= held.deadline - 0.05, "dropped before the deadline"
        await clock.advance(5)  # its lease runs out: reaped, timed out, and retried after its backoff
        first = (await app.attempts(job.id))[0]
        assert first.outcome == "timeout" and first.error == "timed out after 1.5 s", first
        (again,) = await app.remote_claim("other", ["Short"], max=1)
        assert (again.id, again.attempt) == (job.id, 2)
        assert await app.remote_complete("w", job.id, 1, "succeeded", claim=held.claim) is False
    finally:
        await app.close()


async def test_a_report_after_the_timeout_is_refused_and_the_attempt_times_out(store_url: str) -> None:
    clock = jobloom.testing.TestClock()
    app = jobloom.App(store_url, performers=[SHORT], auto_migrate=True, lease=1.0, clock=clock)
    try:
        job = await app.enqueue(SHORT, {})
        (held,) = await app.remote_claim("w", ["Short"], max=1)
        clock.jump(1.5)  # the attempt's timeout, and nothing reaped it yet
        assert await app.remote_complete("w", job.id, 1, "succeeded", result=1, claim=held.claim) is False
        assert (await app.get_job(job.id)).state == "running", "the late report changed nothing"
        await clock.advance(5)  # the reaper ends it as timed out (past the lease's grace)
        first = (await app.attempts(job.id))[0]
        assert first.outcome == "timeout" and first.error == "timed out after 1.5 s", first
        assert await app.remote_complete("w", job.id, 1, "succeeded", result=1, claim=held.claim) is False
    finally:
        await app.close()


async def _lease(app: jobloom.App, job_id: int) -> float:
    """The job's lease expiry as the store holds it (read with the store's own driver)."""
    url = app.url
    if url.startswith("sqlite:"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            row = conn.execute("SELECT lease_expires FROM jobloom_jobs WHERE id = ?", (job_id,)).fetchone()
    else:
        import psycopg

        with psycopg.connect(url, autocommit=True) as pg:
            row = pg.execute("SELECT lease_expires FROM jobloom_jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None and row[0] is not None
    return float(row[0])
