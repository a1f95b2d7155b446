"""A wake-up that names the one job its commit enqueued, and an idle worker that claims that job directly
(``claim_direct``: on PostgreSQL ``BEGIN``, ``hold_dispatch``, the claim and ``COMMIT`` in one round
trip) instead of running a whole cycle first. The direct claim holds only where a cycle's dispatch would
have claimed that job first; in every other case it claims nothing and a whole cycle decides."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

import jobloom
from jobloom.core.queries import Q
from jobloom.core.rows import PolicyRow
from jobloom.engine.running import CycleResult
from jobloom.store.base import job_hint, read_hint
from tests.helpers import eventually

from .performers import Limited, Tenant, Throttled


class Plain(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Batched(jobloom.BatchPerformer[dict[str, Any], None]):
    batch_size = 4

    async def perform_batch(self, items: list[jobloom.BatchItem[dict[str, Any]]]) -> None:
        return None


class Turns(jobloom.Performer[dict[str, Any], None]):
    concurrency_key = staticmethod(lambda p: p.get("k"))
    fairness = "round_robin"

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


PERFORMERS = [Plain, Batched, Turns, Limited, Tenant, Throttled]


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[jobloom.App]:
    app = jobloom.App(store_url, performers=PERFORMERS, auto_migrate=True)
    await app.register_bindings([p.__name__ for p in PERFORMERS])
    yield app
    await app.close()


async def state(app: jobloom.App, job_id: int) -> str:
    return (await app.get_job(job_id)).state


def test_the_policy_columns_that_claim_direct_checks_are_all_the_policys() -> None:
    # claim_direct (store/*/sql/queries.sql) claims only for a binding whose every limit is unset. A new
    # field here is a new way to limit dispatch: add it to claim_direct's test of the binding, then here.
    assert PolicyRow._fields == (
        "concurrency", "key_concurrency", "rate", "burst", "priority_aging", "backoff", "overrides", "tokens",
        "tokens_at", "paused", "batch_size", "batch_wait", "key_rules", "turn_key", "turn_used",
        "key_full_at",  # not a limit: the key buckets' state, set only by a dispatch under a key rate
    )


def test_a_wake_up_names_a_lone_job_queued_now_without_a_key() -> None:
    row = {"binding": "Plain", "state": "queued", "concurrency_key": None}
    assert job_hint([7], [row]) == "7:Plain"
    assert read_hint("7:Plain") == (7, "Plain") and read_hint("7:a:b") == (7, "a:b")
    assert job_hint([7, 8], [row, row]) is None
    assert job_hint([7], [{**row, "state": "scheduled"}]) is None
    assert job_hint([7], [{**row, "concurrency_key": "k"}]) is None
    assert read_hint("") is None and read_hint("x:Plain") is None and read_hint("7:") is None


async def test_an_idle_worker_claims_a_named_job_directly(app: jobloom.App) -> None:
    worker = jobloom.Worker(app, concurrency=10, bindings=["Plain"])
    await worker.cycle.run(claim=True)  # the worker reads its bindings' policies
    job = await app.enqueue(Plain, {})
    result = await worker.cycle.run_direct(job.id, "Plain")
    assert result is not None and [c.id for c in result.claimed] == [job.id]
    assert result.claimed[0].attempt == 1
    await eventually(lambda: len(worker.completer.outcomes) == 1, what="the job ran")
    await worker.cycle.run(claim=False)
    assert await state(app, job.id) == "succeeded"
    store = await app.store()
    events = await store.transact(lambda tx: tx.fetch(Q.job_events, {"job_id": job.id}), exclusive=False)
    assert [(e.kind, e.attempt) for e in events if e.kind == "started"] == [("started", 1)]
    assert await worker.cycle.run_direct(job.id, "Plain") is None  # claimed already: nothing


async def claim_direct(app: jobloom.App, job_id: int, binding: str) -> list[int]:
    """The ``claim_direct`` statement alone (the worker's own check of the binding left out)."""
    store = await app.store()

    async def work(tx: Any) -> Any:
        return await tx.claim_direct({"id": job_id, "binding": binding, "worker": "w", "lease_expires": 2e9,
                                      "now": store.now()})

    later = await store.transact(work)
    return [r.id for r in later.rows()]


@pytest.mark.parametrize("case", ["concurrency", "rate", "batch", "turns", "override", "paused",
                                  "key", "behind", "other binding", "not served", "no room"])
async def test_a_direct_claim_takes_nothing_where_dispatch_would_decide_otherwise(
    app: jobloom.App, case: str
) -> None:
    performer: Any = {"concurrency": Limited, "rate": Throttled, "batch": Batched,
                      "turns": Turns, "key": Tenant}.get(case, Plain)
    binding = performer.__name__
    worker = jobloom.Worker(app, concurrency=1 if case == "no room" else 10,
                            bindings=["Limited" if case == "not served" else binding])
    await worker.cycle.run(claim=True)  # the worker reads its bindings' policies
    payload: dict[str, Any] = {"tenant": "t"} if case == "key" else {}
    if case == "override":  # set after the worker read the binding: the statement sees it
        await app.set_limits(binding, concurrency=5)
    if case == "paused":
        await app.pause_binding(binding)
    first = await app.enqueue(performer, payload)
    job = await app.enqueue(performer, payload) if case == "behind" else first
    if case == "no room":
        worker.executor.free = lambda: 0  # type: ignore[method-assign]
    named = "Limited" if case == "other binding" else binding
    assert await worker.cycle.run_direct(job.id, named) is None
    if case not in ("not served", "no room"):  # the statement refuses it too, whatever the worker knew
        assert await claim_direct(app, job.id, named) == []
    assert await state(app, job.id) == "queued"


async def test_a_binding_read_as_limited_is_not_tried(app: jobloom.App) -> None:
    worker = jobloom.Worker(app, concurrency=10, bindings=["Limited", "Plain"])
    job = await app.enqueue(Limited, {})
    assert await worker.cycle.run_direct(job.id, "Limited") is None  # nothing read yet: not tried
    assert [c.id for c in (await worker.cycle.run(claim=True)).claimed] == [job.id]
    await eventually(lambda: len(worker.completer.outcomes) == 1, what="the job ran")
    await worker.cycle.run(claim=False)
    plain = await app.enqueue(Plain, {})
    assert await worker.cycle.run_direct(plain.id, "Plain") is not None  # read unlimited in those cycles
    limited = await app.enqueue(Limited, {})
    store = await app.store()
    statements = 0
    transact = store.transact

    async def counted(fn: Any, **kw: Any) -> Any:
        nonlocal statements
        statements += 1
        return await transact(fn, **kw)

    store.transact = counted  # type: ignore[method-assign]
    try:
        assert await worker.cycle.run_direct(limited.id, "Limited") is None
    finally:
        store.transact = transact  # type: ignore[method-assign]
    assert statements == 0  # read as limited: no transaction spent on it


async def test_a_job_with_another_queued_beside_it_is_left_to_a_whole_cycle(app: jobloom.App) -> None:
    worker = jobloom.Worker(app, concurrency=10, bindings=["Plain"])
    await worker.cycle.run(claim=True)
    low = await app.enqueue(Plain, {}, priority=0)
    high = await app.enqueue(Plain, {}, priority=5)
    assert await worker.cycle.run_direct(low.id, "Plain") is None  # the order is the cycle's to decide
    assert await worker.cycle.run_direct(high.id, "Plain") is None
    assert await claim_direct(app, high.id, "Plain") == []
    claimed = (await worker.cycle.run(claim=True)).claimed
    assert sorted(c.id for c in claimed) == sorted([high.id, low.id])


async def test_a_running_worker_claims_an_enqueued_job_from_its_wake_up(app: jobloom.App) -> None:
    worker = jobloom.Worker(app, concurrency=10, bindings=["Plain"])
    direct: list[CycleResult | None] = []
    run_direct = worker.cycle.run_direct

    async def counted(job_id: int, binding: str) -> CycleResult | None:
        got = await run_direct(job_id, binding)
        direct.append(got)
        return got

    worker.cycle.run_direct = counted  # type: ignore[method-assign]
    task = asyncio.create_task(worker.run())
    try:
        await eventually(lambda: worker._idle, what="the worker asleep")
        for _ in range(3):
            job = await app.enqueue(Plain, {})
            assert (await app.wait(job.id, timeout=10)).state == "succeeded"
            await eventually(lambda: worker._idle, what="the worker asleep again")
        claimed = [c.id for got in direct if got is not None for c in got.claimed]
        assert claimed, "no job was claimed from its wake-up"
        many = await app.enqueue_many([(Plain, {}) for _ in range(5)])  # one wake-up, naming no job
        for j in many:
            assert (await app.wait(j.id, timeout=10)).state == "succeeded"
    finally:
        worker.stop()
        await asyncio.wait_for(task, 10)
