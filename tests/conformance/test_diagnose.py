"""Why a job is not running, on every store: each cause produced for real (running jobs that fill a
binding or a key, a spent rate bucket, a pause, no worker, a delay, a retry backoff, upstream flow
nodes), and the diagnosis checked against the coordinator's own dispatch."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest

import jobloom
from jobloom.app.diagnose import Diagnosis, Reason, why_not_running
from jobloom.core.errors import JobNotFound
from jobloom.engine import coordinator, registry
from jobloom.store.base import Tx
from jobloom.testing import TestClock
from tests.helpers import eventually

GATE = threading.Event()  # the blocking performers run until it is set


async def _hold() -> None:
    while not GATE.is_set():
        await asyncio.sleep(0.01)


class DiagPair(jobloom.Performer[dict[str, Any], None]):
    concurrency = 2

    async def perform(self, payload: dict[str, Any]) -> None:
        await _hold()


class DiagTenant(jobloom.Performer[dict[str, Any], None]):
    concurrency_key = staticmethod(lambda p: p["tenant"])
    key_concurrency = 1

    async def perform(self, payload: dict[str, Any]) -> None:
        await _hold()


class DiagRated(jobloom.Performer[dict[str, Any], None]):
    rate_limit = "1/m"

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class DiagFails(jobloom.Performer[dict[str, Any], None]):
    backoff = jobloom.Backoff.fixed(3600)
    max_attempts = 3

    async def perform(self, payload: dict[str, Any]) -> None:
        raise RuntimeError("the printer is on fire")


class DiagStep(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        if payload.get("hold"):
            await _hold()
        return {"ok": True}


class DiagOpen(jobloom.Performer[dict[str, Any], None]):
    """No limit at all: a queued job of it is held by nothing but the absence of workers."""

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


def _flow() -> jobloom.Flow:
    flow = jobloom.Flow("diag-flow")
    first = flow.node("first", DiagStep, input=lambda inp, up: {"hold": True})
    second = flow.node("second", DiagStep, input=lambda inp, up: {})
    flow.node("last", DiagStep, after=[first, second], input=lambda inp, up: {})
    return flow


FLOW = _flow()
PERFORMERS = [DiagPair, DiagTenant, DiagRated, DiagFails, DiagStep, DiagOpen]


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[jobloom.App]:
    GATE.clear()
    app = jobloom.App(store_url, performers=PERFORMERS, flows=[FLOW], auto_migrate=True, lease=2.0)
    yield app
    GATE.set()
    await app.close()


async def _worker(app: jobloom.App, bindings: list[str]) -> tuple[jobloom.Worker, asyncio.Task[None]]:
    worker = jobloom.Worker(app, concurrency=8, bindings=bindings, grace=5.0)
    task = asyncio.create_task(worker.run())
    await eventually(lambda: _serves(app, bindings[0]), what="the worker in the registry")
    return worker, task


async def _serves(app: jobloom.App, binding: str) -> bool:
    return any(binding in b.binding and b.workers for b in await app.list_bindings() if b.binding == binding)


async def _stop(worker: jobloom.Worker, task: asyncio.Task[None]) -> None:
    GATE.set()
    worker.stop()
    await asyncio.wait_for(task, 15)


async def _state(app: jobloom.App, job_id: int) -> str:
    return (await app.get_job(job_id)).state


async def _running(app: jobloom.App, ids: list[int]) -> bool:
    return all([await _state(app, i) == "running" for i in ids])


def _one(d: Diagnosis, code: str) -> Reason:
    found = [r for r in d.reasons if r.code == code]
    assert len(found) == 1, d
    return found[0]


async def test_a_binding_at_its_concurrency_limit_names_the_running_jobs(app: jobloom.App) -> None:
    jobs = [await app.enqueue(DiagPair, {"n": i}) for i in range(3)]
    worker, task = await _worker(app, ["DiagPair"])
    try:
        await eventually(lambda: _running(app, [jobs[0].id, jobs[1].id]), what="two jobs running")
        d = await why_not_running(app, jobs[2].id)
        assert d.state == "queued" and d.codes == ("binding_full",), d
        reason = d.reasons[0]
        assert sorted(reason.job_ids) == [jobs[0].id, jobs[1].id]
        assert "2/2" in reason.text
        assert (await why_not_running(app, jobs[0].id)).reasons == ()  # a running job: nothing to say
        GATE.set()
        await eventually(lambda: _is(app, jobs[2].id, "succeeded"), what="the third job done")
        assert (await why_not_running(app, jobs[2].id)) == Diagnosis(jobs[2].id, "succeeded", ())
    finally:
        await _stop(worker, task)


async def test_a_full_concurrency_key_names_its_running_job(app: jobloom.App) -> None:
    a1 = await app.enqueue(DiagTenant, {"tenant": "acme"})
    b1 = await app.enqueue(DiagTenant, {"tenant": "beta"})
    worker, task = await _worker(app, ["DiagTenant"])
    try:
        await eventually(lambda: _running(app, [a1.id, b1.id]), what="one job per tenant running")
        a2 = await app.enqueue(DiagTenant, {"tenant": "acme"})
        d = await why_not_running(app, a2.id)
        assert d.codes == ("key_full",), d
        assert d.reasons[0].job_ids == (a1.id,) and "'acme'" in d.reasons[0].text and "1/1" in d.reasons[0].text
    finally:
        await _stop(worker, task)


async def test_an_empty_rate_bucket_says_when_the_next_token_comes(app: jobloom.App) -> None:
    first = await app.enqueue(DiagRated, {"n": 1})
    worker, task = await _worker(app, ["DiagRated"])
    try:
        await eventually(lambda: _is(app, first.id, "succeeded"), what="the first job (the one token)")
        second = await app.enqueue(DiagRated, {"n": 2})
        d = await why_not_running(app, second.id)
        assert d.codes == ("rate_limited",), d
        until = d.reasons[0].until
        assert until is not None and 30 < until.timestamp() - time.time() <= 61
        assert "next one comes in" in d.reasons[0].text
    finally:
        await _stop(worker, task)


async def _is(app: jobloom.App, job_id: int, state: str) -> bool:
    return await _state(app, job_id) == state


async def test_a_paused_binding_and_no_worker(app: jobloom.App) -> None:
    job = await app.enqueue(DiagOpen, {})
    d = await why_not_running(app, job.id)
    assert d.codes == ("no_worker",) and "'DiagOpen'" in d.reasons[0].text
    await app.pause_binding("DiagOpen")
    assert (await why_not_running(app, job.id)).codes == ("paused", "no_worker")
    later = await app.enqueue(DiagOpen, {}, delay=3600)
    assert (await why_not_running(app, later.id)).codes == ("scheduled", "paused", "no_worker")
    await app.resume_binding("DiagOpen")
    assert (await why_not_running(app, job.id)).codes == ("no_worker",)


async def test_a_worker_of_other_bindings_does_not_serve_it(app: jobloom.App) -> None:
    worker, task = await _worker(app, ["DiagPair"])
    try:
        job = await app.enqueue(DiagOpen, {})
        d = await why_not_running(app, job.id)
        assert d.codes == ("no_worker",) and "1 worker(s) alive" in d.reasons[0].text
    finally:
        await _stop(worker, task)


async def test_a_scheduled_job_waits_until_its_time(app: jobloom.App) -> None:
    at = datetime.fromtimestamp(time.time() + 3600).astimezone()
    job = await app.enqueue(DiagOpen, {}, run_at=at)
    d = await why_not_running(app, job.id)
    assert d.state == "scheduled" and d.codes == ("scheduled", "no_worker")
    reason = d.reasons[0]
    assert reason.until is not None and abs(reason.until.timestamp() - at.timestamp()) < 0.01
    assert reason.until.isoformat(timespec="seconds") in reason.text


async def test_a_failed_attempt_waits_out_its_backoff(app: jobloom.App) -> None:
    job = await app.enqueue(DiagFails, {})
    worker, task = await _worker(app, ["DiagFails"])
    try:
        await eventually(lambda: _is(app, job.id, "scheduled"), what="the first attempt failed")
        d = await why_not_running(app, job.id)
        assert d.codes == ("retry_backoff",), d
        reason = d.reasons[0]
        assert "Attempt 1 of 3" in reason.text and "the printer is on fire" in reason.text
        assert reason.until is not None and 3500 < reason.until.timestamp() - time.time() <= 3600
    finally:
        await _stop(worker, task)


async def test_a_flow_node_waits_on_its_upstream_nodes(app: jobloom.App) -> None:
    worker, task = await _worker(app, ["DiagStep"])
    try:
        run = await app.start(FLOW, {})
        await eventually(lambda: _node(app, run.id, "second", "succeeded"), what="the free upstream node done")
        await eventually(lambda: _node(app, run.id, "first", "running"), what="the held upstream node running")
        run = await app.get_run(run.id)
        d = await why_not_running(app, run.nodes["last"].job_id)
        assert d.state == "waiting" and d.codes == ("upstream",), d
        assert d.reasons[0].job_ids == (run.nodes["first"].job_id,)
        assert "first (running)" in d.reasons[0].text
    finally:
        await _stop(worker, task)


async def _node(app: jobloom.App, run_id: str, node: str, state: str) -> bool:
    return (await app.get_run(run_id)).nodes[node].state == state


async def test_a_job_that_does_not_exist(app: jobloom.App) -> None:
    with pytest.raises(JobNotFound):
        await why_not_running(app, 10**9)


# ------------------------------------------------------------ against the coordinator's own dispatch


async def _beat(app: jobloom.App, binding: str) -> None:
    """A live worker row serving ``binding``, written as a worker's heartbeat writes it."""
    store = await app.store()
    now = app.now()
    await store.transact(lambda tx: registry.beat(tx, "diag-worker", [binding], 64, 10.0, now))


@pytest.mark.parametrize("seed", range(8))
async def test_ready_is_exactly_what_dispatch_starts(store_url: str, seed: int) -> None:
    """Random limits, running jobs, keys and priorities: the jobs the diagnosis calls ready are exactly
    the jobs the coordinator's dispatch (with room to spare) starts next, at the same moment."""
    rng = random.Random(seed)
    clock = TestClock()
    app = jobloom.App(store_url, performers=PERFORMERS, auto_migrate=True, clock=clock)
    try:
        limits: dict[str, Any] = {"concurrency": rng.choice([None, 2, 4, 6]),
                                  "key_concurrency": rng.choice([1, 2]),
                                  "rate_limit": rng.choice([None, "3/m", "5/m burst 5", "1/h"])}
        await app.set_limits("DiagOpen", **limits)
        store = await app.store()
        jobs = [await app.enqueue(DiagOpen, {"n": i}, priority=rng.choice([0, 0, 1, 5]),
                                  concurrency_key=rng.choice([None, "k1", "k2", "k3"]))
                for i in range(rng.randint(4, 14))]

        async def claim(tx: Tx, n: int) -> list[int]:
            done = await coordinator.dispatch(tx, "DiagOpen", capacity=n, worker="w1", now=app.now(), lease=600)
            return [c.id for c in done.claimed]

        started = await store.transact(lambda tx: claim(tx, rng.randint(0, 3)))  # some run already
        await _beat(app, "DiagOpen")
        waiting = [j.id for j in jobs if j.id not in started]
        diagnosed = {i: await why_not_running(app, i) for i in waiting}
        ready = {i for i, d in diagnosed.items() if d.ready}
        assert all(d.codes == ("ready",) for i, d in diagnosed.items() if i in ready)
        claimed = set(await store.transact(lambda tx: claim(tx, 1000)))
        assert ready == claimed, (limits, diagnosed)
    finally:
        await app.close()
