"""Remote bindings and the pull protocol on every store: claims within limits, leases renewed or lost,
completions fenced by attempt, and every bad input refused with a clear error."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pydantic
import pytest

import jobloom
from jobloom.engine import coordinator
from jobloom.testing import TestClock


class Video(pydantic.BaseModel):
    url: str
    height: int = 720


TRANSCODE = jobloom.RemoteBinding("Transcode", payload=Video, concurrency=2, max_attempts=3,
                                  backoff=jobloom.Backoff.fixed(0.05))
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


class Local(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[jobloom.App]:
    app = jobloom.App(store_url, performers=[TRANSCODE, jobloom.RemoteBinding("Counted", payload=SCHEMA), Local],
                      auto_migrate=True, lease=1.0)
    yield app
    await app.close()


async def test_claims_respect_concurrency_and_hand_out_the_job(app: jobloom.App) -> None:
    jobs = [await app.enqueue(TRANSCODE, {"url": f"v{i}"}) for i in range(3)]
    before = app.now()
    got = await app.remote_claim("w1", ["Transcode"], max=5)
    assert [j.id for j in got] == [jobs[0].id, jobs[1].id], "concurrency 2: two of three"
    first = got[0]
    assert first.attempt == 1 and first.binding == "Transcode" and first.payload == {"url": "v0", "height": 720}
    assert first.lease_expires_at == pytest.approx(before + 1.0, abs=0.5)
    assert first.deadline == pytest.approx(before + 60.0, abs=0.5)
    assert await app.remote_claim("w2", ["Transcode"], max=5) == []
    assert (await app.get_job(first.id)).state == "running"
    assert await app.remote_complete("w1", first.id, 1, "succeeded", result={"frames": 3}, claim=first.claim)
    done = await app.get_job(first.id)
    assert done.state == "succeeded" and done.result == {"frames": 3}
    assert [j.id for j in await app.remote_claim("w2", ["Transcode"], max=5)] == [jobs[2].id]


async def test_a_long_poll_returns_when_a_job_is_enqueued(app: jobloom.App) -> None:
    claim = asyncio.create_task(app.remote_claim("w1", ["Counted"], max=1, wait=120))
    await asyncio.sleep(0.3)
    assert not claim.done()
    job = await app.enqueue("Counted", {"n": 1})
    got = await asyncio.wait_for(claim, 30)  # woken by the enqueue, long before its wait of 120 s ends
    assert [j.id for j in got] == [job.id]
    began = time.monotonic()
    assert await asyncio.wait_for(app.remote_claim("w1", ["Counted"], max=1, wait=0.3), 30) == []
    assert time.monotonic() - began >= 0.25  # it waited before it answered nothing


async def test_a_silent_remote_worker_loses_its_job_after_the_lease(app: jobloom.App) -> None:
    job = await app.enqueue(TRANSCODE, {"url": "v"})
    (held,) = await app.remote_claim("silent", ["Transcode"], max=1)
    began = time.monotonic()
    (again,) = await app.remote_claim("other", ["Transcode"], max=1, wait=10)
    assert time.monotonic() - began >= 0.9, "reaped before its lease expired"
    assert (again.id, again.attempt) == (job.id, 2) and held.attempt == 1
    first = (await app.attempts(job.id))[0]
    assert first.outcome == "lost" and first.worker == "silent"


@pytest.fixture
async def clocked(store_url: str) -> AsyncIterator[tuple[jobloom.App, TestClock]]:
    """The same app on a test clock: leases pass when the test says."""
    clock = TestClock()
    app = jobloom.App(store_url, performers=[TRANSCODE, jobloom.RemoteBinding("Counted", payload=SCHEMA), Local],
                      auto_migrate=True, lease=1.0, clock=clock)
    yield app, clock
    await app.close()


async def test_heartbeats_keep_the_lease(clocked: tuple[jobloom.App, TestClock]) -> None:
    app, clock = clocked
    job = await app.enqueue(TRANSCODE, {"url": "v"})
    (held,) = await app.remote_claim("w1", ["Transcode"], max=1)
    for _ in range(10):  # 2.5 s: more than twice the lease of 1 s and its grace
        assert await app.remote_heartbeat("w1", [(job.id, 1, held.claim), (job.id, 7, held.claim)]) == [(job.id, 1)]
        clock.jump(0.25)
        assert await app.remote_claim("w2", ["Transcode"], max=1) == []
    assert await app.remote_heartbeat("w2", [(job.id, 1, held.claim)]) == [], "another worker's attempt"
    assert await app.remote_heartbeat("w1", []) == []
    clock.jump(1.0 + coordinator.LEASE_GRACE + 0.25)  # no heartbeat for longer than the lease: lost
    assert await app.remote_claim("w2", ["Transcode"], max=1) == []  # found lost, retried after its backoff
    assert (await app.attempts(job.id))[0].outcome == "lost"
    clock.jump(0.1)
    [again] = await app.remote_claim("w2", ["Transcode"], max=1)
    assert (again.id, again.attempt) == (job.id, 2)


async def _lost_then_claimed(app: jobloom.App, clock: TestClock, worker: str) -> jobloom.RemoteJob:
    """The job held by a silent worker, claimed by ``worker`` once its lease is lost and its retry is due."""
    clock.jump(1.0 + coordinator.LEASE_GRACE + 0.25)  # no heartbeat for longer than the lease: lost
    assert await app.remote_claim(worker, ["Transcode"], max=1) == []  # found lost, retried after its backoff
    clock.jump(0.1)
    (claimed,) = await app.remote_claim(worker, ["Transcode"], max=1)
    return claimed


async def test_a_stale_completion_returns_false_and_changes_nothing(clocked: tuple[jobloom.App, TestClock]) -> None:
    app, clock = clocked
    job = await app.enqueue(TRANSCODE, {"url": "v"})
    (old,) = await app.remote_claim("old", ["Transcode"], max=1)
    current = await _lost_then_claimed(app, clock, "new")
    assert current.attempt == 2
    before = await app.get_job(job.id)
    history = [(a.attempt, a.outcome, a.error) for a in await app.attempts(job.id)]
    for worker, attempt, outcome, claim in [
        ("old", 1, "succeeded", old.claim), ("old", 1, "failed", old.claim),
        ("intruder", 2, "succeeded", current.claim), ("new", 3, "succeeded", current.claim),
    ]:
        assert await app.remote_complete(worker, job.id, attempt, outcome, result=None, claim=claim) is False, (
            worker, attempt)
    for worker in ("old", "new", "intruder"):  # the current attempt, with another claim's secret
        with pytest.raises(jobloom.ClaimRefused, match="claim secret does not match"):
            await app.remote_complete(worker, job.id, 2, "succeeded", result=None, claim=old.claim)
    after = await app.get_job(job.id)
    assert (after.state, after.attempt, after.result) == ("running", 2, None)
    assert (after.state, after.attempt, after.error, after.finished_at) == (
        before.state, before.attempt, before.error, before.finished_at)
    assert [(a.attempt, a.outcome, a.error) for a in await app.attempts(job.id)] == history
    done = {"result": {"ok": True}, "claim": current.claim}
    assert await app.remote_complete("new", job.id, 2, "succeeded", **done) is True
    assert await app.remote_complete("new", job.id, 2, "succeeded", **done) is True, "a repeat"
    assert await app.remote_complete("new", job.id, 2, "failed", claim=current.claim) is False
    with pytest.raises(jobloom.ClaimRefused):
        await app.remote_complete("new", job.id, 2, "succeeded", result={"ok": True}, claim=old.claim)
    assert (await app.get_job(job.id)).result == {"ok": True}


async def test_failed_retry_and_permanent_follow_the_binding_policy(app: jobloom.App) -> None:
    job = await app.enqueue(TRANSCODE, {"url": "v"})
    (a,) = await app.remote_claim("w", ["Transcode"], max=1)
    assert await app.remote_complete("w", a.id, a.attempt, "failed", error="codec crashed", claim=a.claim)
    (b,) = await app.remote_claim("w", ["Transcode"], max=1, wait=5)  # after the 0.05 s backoff
    assert b.attempt == 2
    asked = app.now()
    assert await app.remote_complete("w", b.id, b.attempt, "retry", retry_after=0.6, claim=b.claim)
    (c,) = await app.remote_claim("w", ["Transcode"], max=1, wait=5)
    assert c.attempt == 3 and app.now() - asked >= 0.55, "retry_after was not honoured"
    assert await app.remote_complete("w", c.id, c.attempt, "permanent", error="bad input", claim=c.claim)
    done = await app.get_job(job.id)
    assert done.state == "failed" and done.error == "bad input"
    assert [x.outcome for x in await app.attempts(job.id)] == ["failed", "retry", "permanent"]


async def test_a_cancel_is_seen_at_the_next_heartbeat(app: jobloom.App) -> None:
    job = await app.enqueue(TRANSCODE, {"url": "v"})
    (held,) = await app.remote_claim("w", ["Transcode"], max=1)
    await app.cancel(job.id)
    assert await app.remote_heartbeat("w", [(job.id, 1, held.claim)]) == []
    assert await app.remote_complete("w", job.id, 1, "failed", error="stopped", claim=held.claim)
    assert (await app.get_job(job.id)).state == "cancelled"


async def test_local_workers_never_claim_remote_bindings(app: jobloom.App) -> None:
    remote = await app.enqueue(TRANSCODE, {"url": "v"})
    local = await app.enqueue(Local, {})
    await app.drain()
    assert (await app.get_job(local.id)).state == "succeeded"
    assert (await app.get_job(remote.id)).state == "queued"
    with pytest.raises(jobloom.InvalidOption, match="remote workers"):
        jobloom.Worker(app, bindings=["Transcode"])


async def test_bad_input_is_refused_clearly(app: jobloom.App) -> None:
    with pytest.raises(jobloom.InvalidPayload, match="url"):
        await app.enqueue(TRANSCODE, {"height": 3})
    with pytest.raises(jobloom.InvalidPayload, match="'x' is not of type 'integer'"):
        await app.enqueue("Counted", {"n": "x"})
    claims: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"worker": "", "bindings": ["Transcode"], "max": 1}, jobloom.InvalidOption, "worker"),
        ({"worker": "w", "bindings": "Transcode", "max": 1}, jobloom.InvalidOption, "list of binding names"),
        ({"worker": "w", "bindings": [], "max": 1}, jobloom.InvalidOption, "bindings"),
        ({"worker": "w", "bindings": ["Nope"], "max": 1}, jobloom.UnknownBinding, "Nope"),
        ({"worker": "w", "bindings": ["Local"], "max": 1}, jobloom.InvalidOption, "RemoteBinding"),
        ({"worker": "w", "bindings": ["Transcode"], "max": 0}, jobloom.InvalidOption, "max"),
        ({"worker": "w", "bindings": ["Transcode"], "max": 5000}, jobloom.InvalidOption, "max"),
        ({"worker": "w", "bindings": ["Transcode"], "max": 1, "wait": -1}, jobloom.InvalidOption, "wait"),
        ({"worker": "w", "bindings": ["Transcode"], "max": 1, "wait": float("nan")}, jobloom.InvalidOption, "wait"),
    ]
    for kwargs, error, text in claims:
        with pytest.raises(error, match=text):
            await app.remote_claim(**kwargs)
    with pytest.raises(jobloom.InvalidOption, match=r"jobs\[0\]"):
        await app.remote_heartbeat("w", [(1, 1)])  # type: ignore[list-item]
    with pytest.raises(jobloom.InvalidOption, match=r"jobs\[1\] attempt"):
        await app.remote_heartbeat("w", [(1, 1, "c"), (1, "1", "c")])  # type: ignore[list-item]
    with pytest.raises(jobloom.InvalidOption, match=r"jobs\[0\] claim"):
        await app.remote_heartbeat("w", [(1, 1, "")])
    job = await app.enqueue(TRANSCODE, {"url": "v"})
    (held,) = await app.remote_claim("w", ["Transcode"], max=1)
    completes: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"outcome": "done"}, jobloom.InvalidOption, "outcome"),
        ({"outcome": "failed", "result": 1}, jobloom.InvalidOption, "result"),
        ({"outcome": "succeeded", "retry_after": 1}, jobloom.InvalidOption, "retry_after"),
        ({"outcome": "retry", "retry_after": -1}, jobloom.InvalidOption, "retry_after"),
        ({"outcome": "failed", "error": 3}, jobloom.InvalidOption, "error"),
        ({"outcome": "succeeded", "attempt": 0}, jobloom.InvalidOption, "attempt"),
        ({"outcome": "succeeded", "job_id": 10**9}, jobloom.JobNotFound, "no job"),
        ({"outcome": "succeeded", "result": float("nan")}, jobloom.InvalidPayload, "JSON"),
        ({"outcome": "succeeded", "claim": None}, jobloom.InvalidOption, "claim"),
        ({"outcome": "succeeded", "claim": "x" * 129}, jobloom.InvalidOption, "claim"),
        ({"outcome": "succeeded", "claim": "forged"}, jobloom.ClaimRefused, "claim secret does not match"),
    ]
    for kwargs, error, text in completes:
        args = {"worker": "w", "job_id": job.id, "attempt": held.attempt, "claim": held.claim, **kwargs}
        with pytest.raises(error, match=text):
            await app.remote_complete(**args)
    assert (await app.get_job(job.id)).state == "running", "a refused completion changes nothing"


def test_declarations_are_checked() -> None:
    with pytest.raises(jobloom.InvalidOption, match="concurrency on R"):
        jobloom.RemoteBinding("R", concurrency=-1)
    with pytest.raises(jobloom.InvalidOption, match="one of the options"):
        jobloom.RemoteBinding("R", url="https://x")
    with pytest.raises(jobloom.InvalidOption, match="valid JSON Schema"):
        jobloom.RemoteBinding("R", payload={"type": "nonsense"})
    flow = jobloom.Flow("f")
    flow.node("t", "R")
    with pytest.raises(jobloom.FlowError, match="R"):
        jobloom.App("sqlite:///:memory:", performers=[jobloom.RemoteBinding("R")], flows=[flow])


async def test_a_reaped_job_is_retried_even_when_only_remote_workers_serve_the_store(
    clocked: tuple[jobloom.App, TestClock]
) -> None:
    """No local worker runs: remote claims reap and promote by themselves."""
    app, clock = clocked
    job = await app.enqueue(TRANSCODE, {"url": "v"})
    await app.remote_claim("gone", ["Transcode"], max=1)
    again = await _lost_then_claimed(app, clock, "alive")
    assert again.id == job.id and (await app.get_job(job.id)).attempt == 2


async def test_a_remote_worker_is_registered_by_its_claims_and_counted_by_the_diagnosis(app: jobloom.App) -> None:
    from jobloom.app.diagnose import why_not_running
    from jobloom.engine import registry

    job = await app.enqueue("Counted", {"n": 1}, delay=3600)
    assert "no_worker" in (await why_not_running(app, job.id)).codes, "no remote worker has claimed yet"
    assert await app.remote_claim("pull-1", ["Counted"], max=4) == []
    store = await app.store()
    found = await store.transact(registry.workers, exclusive=False)
    mine = [w for w in found if w.name == "pull-1"]
    assert len(mine) == 1 and mine[0].remote and mine[0].bindings == ("Counted",) and mine[0].concurrency == 4
    assert mine[0].alive(app.now())
    assert (await why_not_running(app, job.id)).codes == ("scheduled",)
    assert not mine[0].alive(app.now() + 3 * app.lease + 2), "silent for longer than its lease allows: not alive"


async def test_a_remote_workers_row_is_written_a_few_times_per_lease_not_per_claim(store_url: str) -> None:
    from jobloom.engine import registry

    app = jobloom.App(store_url, performers=[jobloom.RemoteBinding("Counted", payload=SCHEMA)], auto_migrate=True,
                      lease=600.0)  # a third of it is far longer than the claims below take, however slow
    try:
        store = await app.store()
        assert await app.remote_claim("pull-2", ["Counted"], max=1) == []
        first = next(w for w in await store.transact(registry.workers, exclusive=False) if w.name == "pull-2")
        for _ in range(5):
            assert await app.remote_claim("pull-2", ["Counted"], max=1) == []
        again = next(w for w in await store.transact(registry.workers, exclusive=False) if w.name == "pull-2")
        assert again.seen_ts == first.seen_ts, "claims within a third of its lease do not write the row again"
    finally:
        await app.close()
