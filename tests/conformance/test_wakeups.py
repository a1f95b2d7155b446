"""PostgreSQL: a wake-up that races with the job suspending to wait for it is never lost.

A job reports that it suspends to wait for an event (or for its sub-flow's run to end) while the
event is sent (or the sub-flow's last node finishes) on another connection. Each interleaving is
forced: one transaction is held open after its work, the other is seen waiting for its lock, then
the first commits; whichever came first, the job ends up runnable, never asleep until its timeout.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

import pytest

import jobloom
from jobloom.core import lifecycle
from jobloom.engine import coordinator
from jobloom.engine.jobs import Claimed, Outcome
from jobloom.engine.steps import FOREVER
from jobloom.flows.flow import SUBFLOW_BINDING
from jobloom.flows.runs import SUBFLOW_DONE
from jobloom.store.base import Tx
from tests.helpers import eventually

pytestmark = pytest.mark.postgres


class Waits(jobloom.Performer[dict[str, Any], Any]):
    async def perform(self, payload: dict[str, Any]) -> Any:
        return await self.wait_for_event("go")


class Leaf(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        return 1


def flows() -> list[jobloom.Flow]:
    child = jobloom.Flow("child")
    child.node("leaf", Leaf, input=lambda inp, up: {})
    parent = jobloom.Flow("parent")
    parent.subflow("sub", child, input=lambda inp, up: {})
    return [child, parent]


@pytest.fixture
async def app(postgres_url: str) -> AsyncIterator[jobloom.App]:
    app = jobloom.App(postgres_url, performers=[Waits, Leaf], flows=flows(), auto_migrate=True)
    await app.register_bindings(["Waits", "Leaf", SUBFLOW_BINDING])
    yield app
    await app.close()


class Held:
    """A transaction that does its work, then stays open (holding its locks) until released."""

    def __init__(self, app: jobloom.App, work: Callable[[Tx], Awaitable[Any]]) -> None:
        self.app, self.work = app, work
        self.pid: int | None = None
        self.done = asyncio.Event()
        self.release = asyncio.Event()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> Any:
        store = await self.app.store()

        async def tx_work(tx: Tx) -> Any:
            conn = await tx.connection()  # type: ignore[attr-defined]
            self.pid = (await (await conn.execute("SELECT pg_backend_pid()")).fetchone())[0]
            result = await self.work(tx)
            self.done.set()
            await self.release.wait()
            return result

        return await store.transact(tx_work)


async def blocked_by(app: jobloom.App, pid: int) -> bool:
    """Whether some session waits for a lock that backend ``pid`` holds."""
    store = await app.store()

    async def read(tx: Tx) -> bool:
        conn = await tx.connection()  # type: ignore[attr-defined]
        cur = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                                 (pid,))
        row = await cur.fetchone()
        return bool(row and row[0])

    return await store.transact(read, exclusive=False)


async def claim(app: jobloom.App, binding: str) -> Claimed:
    store = await app.store()

    async def work(tx: Tx) -> list[Claimed]:
        got = await coordinator.dispatch(tx, binding, capacity=1, worker="w", now=time.time(), lease=60.0)
        return got.claimed

    (claimed,) = await store.transact(work)
    return claimed


def suspended(c: Claimed, wait: str) -> Outcome:
    return Outcome(c.id, c.attempt, lifecycle.SUSPENDED, "w", c.started_at, time.time(), retry_after=FOREVER,
                   wait=wait, run_id=c.run_id)


async def report(app: jobloom.App, tx: Tx, outcome: Outcome) -> None:
    await coordinator.report(tx, [outcome], time.time(), hooks=app.hooks)


async def runnable(app: jobloom.App, job_id: int) -> bool:
    job = await app.get_job(job_id)
    return job.state == "queued" or (job.state == "scheduled" and job.run_at is not None
                                     and job.run_at.timestamp() <= time.time() + 1)


async def first_holds_then_second(app: jobloom.App, first: Callable[[Tx], Awaitable[Any]],
                                  second: Callable[[], Coroutine[Any, Any, Any]]) -> tuple[Any, bool]:
    """Run ``first`` in a transaction kept open, start ``second``, wait until it either waits for a
    lock ``first`` holds or is done, commit ``first``; return what ``second`` returned, and whether
    it waited."""
    held = Held(app, first)
    await asyncio.wait_for(held.done.wait(), 10)
    later: asyncio.Task[Any] = asyncio.create_task(second())
    try:
        waited = await eventually(
            lambda: "done" if later.done() else blocked_by(app, held.pid or 0), timeout=10,
            what="the second transaction waiting for the first one's lock (or done)") != "done"
    finally:
        held.release.set()
    await asyncio.wait_for(held.task, 10)
    return await asyncio.wait_for(later, 10), waited


async def waiting_job(app: jobloom.App) -> Claimed:
    job = await app.enqueue(Waits, {})
    c = await claim(app, "Waits")
    assert c.id == job.id
    store = await app.store()
    await store.transact(lambda tx: tx.execute("save_step", {  # what wait_for_event records before suspending
        "job_id": c.id, "name": "wait:go", "result": repr(FOREVER), "now": time.time(), "attempt": c.attempt,
        "worker": "w", "started_at": c.started_at}))
    return c


async def test_an_event_sent_while_the_job_suspends_waits_for_it_and_wakes_it(app: jobloom.App) -> None:
    c = await waiting_job(app)
    woken, waited = await first_holds_then_second(app, lambda tx: report(app, tx, suspended(c, "go")),
                                                  lambda: app.send_event(c.id, "go", {"ok": 1}))
    assert (await app.get_job(c.id)).state == "queued" and woken is True
    assert waited


async def test_a_job_suspending_while_an_event_is_sent_sees_the_event(app: jobloom.App) -> None:
    from jobloom.engine import steps

    c = await waiting_job(app)
    store = await app.store()
    _, waited = await first_holds_then_second(
        app, lambda tx: steps.send_event(tx, c.id, "go", json.dumps({"ok": 1}), time.time()),
        lambda: store.transact(lambda tx: report(app, tx, suspended(c, "go"))))
    assert await runnable(app, c.id), await app.get_job(c.id)
    assert waited


async def sub_flow(app: jobloom.App) -> tuple[Claimed, Claimed]:
    """A parent run whose sub-flow node has started the child run: (that node's claim, the child's leaf)."""
    from jobloom.engine.steps import Suspended
    from jobloom.flows.execute import NodeContexts, run_subflow

    run = await app.start(app.flows["parent"], {})
    node = await claim(app, SUBFLOW_BINDING)
    assert node.run_id == run.id
    with pytest.raises(Suspended):
        await run_subflow(NodeContexts(app), node)
    leaf = await claim(app, "Leaf")
    assert leaf.run_id == f"{run.id}/sub"
    return node, leaf


def succeeded(c: Claimed) -> Outcome:
    return Outcome(c.id, c.attempt, lifecycle.SUCCEEDED, "w", c.started_at, time.time(), result="1",
                   payload="{}", run_id=c.run_id)


async def test_a_sub_flow_ending_while_its_parent_suspends_wakes_the_parent(app: jobloom.App) -> None:
    node, leaf = await sub_flow(app)
    store = await app.store()
    _, waited = await first_holds_then_second(app, lambda tx: report(app, tx, suspended(node, SUBFLOW_DONE)),
                                              lambda: store.transact(lambda tx: report(app, tx, succeeded(leaf))))
    assert (await app.get_run(f"{node.run_id}/sub")).state == "succeeded"
    assert (await app.get_job(node.id)).state == "queued", await app.get_job(node.id)
    assert waited


async def test_a_parent_suspending_while_its_sub_flow_ends_sees_the_end(app: jobloom.App) -> None:
    node, leaf = await sub_flow(app)
    store = await app.store()
    _, waited = await first_holds_then_second(
        app, lambda tx: report(app, tx, succeeded(leaf)),
        lambda: store.transact(lambda tx: report(app, tx, suspended(node, SUBFLOW_DONE))))
    assert (await app.get_run(f"{node.run_id}/sub")).state == "succeeded"
    assert await runnable(app, node.id), await app.get_job(node.id)
    assert waited
    await app.drain()
    assert (await app.get_run(node.run_id or "")).state == "succeeded"
