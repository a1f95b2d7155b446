"""A worker's cycle on a store whose batches of reads cost one round trip: it reads the candidates of the
bindings it expects to dispatch with its first reads, before their policies, and sends its claim with
its ``COMMIT``. The limits in force still decide, and a job that the cycle's own report makes runnable
is still claimed in that cycle. SQLite runs the same code here, told to read ahead as PostgreSQL does;
the round trips themselves are counted on PostgreSQL (``test_pg_tx.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import jobloom
from jobloom.core.queries import Q
from jobloom.core.records import policy_from_row
from jobloom.engine.jobs import Claimed
from tests.helpers import eventually

from .flow_performers import PERFORMERS, calls, image_flow
from .test_projector import project_all


class Plain(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[jobloom.App]:
    calls.clear()
    app = jobloom.App(store_url, performers=[Plain, *PERFORMERS], flows=[image_flow()], auto_migrate=True)
    store = await app.store()
    store.pipelines = True  # SQLite too: the reads ahead and the deferred claim, as PostgreSQL runs them
    yield app
    await app.close()


async def settle(worker: jobloom.Worker, n: int) -> None:
    """Wait until ``n`` started attempts have finished, then report them (no new claims)."""
    await eventually(lambda: len(worker.completer.outcomes) >= n, timeout=10, what=f"{n} attempts finished")
    await worker.cycle.run(claim=False)


def ids(claimed: list[Claimed]) -> list[int]:
    return sorted(c.id for c in claimed)


async def test_a_limit_set_after_the_worker_last_read_the_binding_decides_the_claim(app: jobloom.App) -> None:
    worker = jobloom.Worker(app, concurrency=10, bindings=["Plain"])
    assert (await worker.cycle.run(claim=True)).claimed == []  # the binding, read unlimited: read ahead from now on
    first = await app.enqueue(Plain, {})
    assert ids((await worker.cycle.run(claim=True)).claimed) == [first.id]  # through the candidates read ahead
    await settle(worker, 1)
    await app.set_limits("Plain", concurrency=1)
    jobs = [await app.enqueue(Plain, {}) for _ in range(3)]
    # the cycle reads three candidates ahead, then the binding's new limit: it claims one, under the lock
    assert len((await worker.cycle.run(claim=True)).claimed) == 1
    assert len((await worker.cycle.run(claim=True)).claimed) == 0
    await settle(worker, 1)
    await app.set_limits("Plain", concurrency=None)
    assert len((await worker.cycle.run(claim=True)).claimed) == 2
    await settle(worker, 2)
    assert {(await app.get_job(j.id)).state for j in jobs} == {"succeeded"}


async def test_a_paused_binding_starts_nothing_though_its_candidates_were_read_ahead(app: jobloom.App) -> None:
    worker = jobloom.Worker(app, concurrency=10, bindings=["Plain"])
    await worker.cycle.run(claim=True)
    await app.pause_binding("Plain")
    job = await app.enqueue(Plain, {})
    assert (await worker.cycle.run(claim=True)).claimed == []
    await app.resume_binding("Plain")
    assert ids((await worker.cycle.run(claim=True)).claimed) == [job.id]
    await settle(worker, 1)


async def test_a_node_made_runnable_by_the_cycles_own_report_is_claimed_in_that_cycle(app: jobloom.App) -> None:
    worker = jobloom.Worker(app, concurrency=10)
    await worker.cycle.run(claim=True)
    run = await app.start(app.flows["publish-image"], {"image": "a.png"})
    [analyze] = (await worker.cycle.run(claim=True)).claimed
    assert analyze.node == "analyze"
    await eventually(lambda: len(worker.completer.outcomes) == 1, timeout=10, what="analyze finished")
    # one cycle reports analyze, which queues thumbnail and metadata, and claims them: the candidates
    # read ahead of that report cannot have them, so this cycle reads its candidates after it
    nodes = sorted(c.node or "" for c in (await worker.cycle.run(claim=True)).claimed)
    assert nodes == ["metadata", "thumbnail"]
    await eventually(lambda: len(worker.completer.outcomes) == 2, timeout=10, what="thumbnail and metadata finished")
    assert [c.node for c in (await worker.cycle.run(claim=True)).claimed] == ["publish"]
    await settle(worker, 1)
    assert (await app.get_run(run.id)).state == "succeeded"


async def test_a_cycle_claims_what_it_counts_and_the_outbox_counts_each_start(app: jobloom.App) -> None:
    worker = jobloom.Worker(app, concurrency=4, bindings=["Plain"])
    await worker.cycle.run(claim=True)
    jobs = await app.enqueue_many([(Plain, {}) for _ in range(6)])
    first = (await worker.cycle.run(claim=True)).claimed
    assert len(first) == 4 and all(c.attempt == 1 for c in first)
    assert len((await worker.cycle.run(claim=True)).claimed) == 0  # no room: four run
    await settle(worker, 4)
    second = (await worker.cycle.run(claim=True)).claimed
    assert ids(first + second) == sorted(j.id for j in jobs)
    await settle(worker, 2)
    await project_all(await app.store())
    stats = await app.stats()
    assert (stats.total.started, stats.total.succeeded) == (6, 6)


async def test_a_transaction_that_claims_one_snapshot_does_not_see_a_commit_made_meanwhile(store_url: str) -> None:
    # dispatch trusts Tx.one_snapshot to skip reading a policy again: the flag must say what the store does
    first = jobloom.App(store_url, performers=[Plain], auto_migrate=True)
    other = jobloom.App(store_url, performers=[Plain])
    try:
        await first.register_bindings()
        store = await first.store()
        seen: list[int | None] = []
        flags: list[bool] = []

        async def read_twice(tx: Any) -> None:
            flags.append(tx.one_snapshot)
            seen.append(policy_from_row((await tx.fetch(Q.get_binding, {"binding": "Plain"}))[0])[0].concurrency)
            await other.set_limits("Plain", concurrency=3)  # commits on its own connection meanwhile
            seen.append(policy_from_row((await tx.fetch(Q.get_binding, {"binding": "Plain"}))[0])[0].concurrency)

        await store.transact(read_twice, exclusive=False)
        assert seen[0] is None
        assert seen[1] == (None if flags[0] else 3), (flags, seen)
    finally:
        await other.close()
        await first.close()
