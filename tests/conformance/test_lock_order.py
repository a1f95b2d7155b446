"""PostgreSQL: transactions on runs and their jobs take locks in one order, so they never deadlock.

Workers report flow nodes while other transactions cancel the same runs and fail them past their
deadline, on several connections at once for a few seconds. PostgreSQL breaks a deadlock after
``deadlock_timeout`` by failing one transaction, which the store retries with a warning; here there
must be none, and every run must end consistently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from typing import Any

import pytest

import jobloom
from jobloom.core import lifecycle
from jobloom.core.errors import InvalidTransition
from jobloom.core.states import ACTIVE_STATES
from jobloom.engine import coordinator
from jobloom.engine.jobs import Claimed, Outcome
from jobloom.flows import stop as flowstop
from jobloom.store.base import Tx

pytestmark = pytest.mark.postgres

RUNS = 60
ROOTS = 6
SECONDS_AT_MOST = 30.0


class Node(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


def wide_flow() -> jobloom.Flow:
    flow = jobloom.Flow("wide")
    roots = [flow.node(f"r{i}", Node, input=lambda inp, up: {}) for i in range(ROOTS)]
    flow.node("last", Node, after=roots, input=lambda inp, up: {})
    return flow


class _Deadlocks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "DeadlockDetected" in message:
            self.seen.append(message)


async def _pg_deadlocks(url: str) -> int:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        row = await cur.fetchone()
        return int(row[0]) if row else 0


async def _worker(app: jobloom.App, name: str, stop: asyncio.Event) -> int:
    """A worker's cycle as :class:`jobloom.engine.worker.Worker` runs it, with jobs that finish at once."""
    store = await app.store()
    held: list[Claimed] = []
    reported = 0
    rng = random.Random(name)
    while True:
        outcomes = [Outcome(c.id, c.attempt, lifecycle.SUCCEEDED, name, c.started_at, time.time(),
                            run_id=c.run_id, payload="{}") for c in held]

        async def cycle(tx: Tx, outcomes: list[Outcome] = outcomes) -> list[Claimed]:
            now = time.time()
            reads = await coordinator.read_cycle(tx, now, reporting=[o.job_id for o in outcomes], worker=name,
                                                 watching=False, bindings=["Node"], runs=[o.run_id for o in outcomes])
            if outcomes:
                await coordinator.report(tx, outcomes, now, hooks=app.hooks, locked=reads.locked)
            await coordinator.reap(tx, now, hooks=app.hooks, expired=reads.expired)
            got = await coordinator.dispatch(tx, "Node", capacity=rng.randint(2, 8), worker=name, now=now,
                                             lease=30.0, binding_rows=reads.bindings["Node"])
            return got.claimed

        held = await store.transact(cycle)
        reported += len(outcomes)
        if not held and stop.is_set():
            return reported
        await asyncio.sleep(0)


async def _canceller(app: jobloom.App, run_ids: list[str]) -> None:
    store = await app.store()
    for run_id in run_ids:
        await asyncio.sleep(random.random() * 0.01)

        async def work(tx: Tx, run_id: str = run_id) -> None:
            run = await tx.fetchone("get_run", {"id": run_id})
            if run is not None and run[2] == "running":
                await flowstop.cancel_run(tx, run_id, time.time())

        with contextlib.suppress(InvalidTransition):  # the run ended between the look and the lock
            await store.transact(work)


async def _deadline_sweeper(app: jobloom.App, stop: asyncio.Event) -> None:
    store = await app.store()
    while not stop.is_set():
        await store.transact(lambda tx: flowstop.fail_past_deadline(tx, time.time(), limit=5))
        await asyncio.sleep(0.002)


async def test_reports_cancels_and_deadlines_never_deadlock(postgres_url: str) -> None:
    flow = wide_flow()
    apps = [jobloom.App(postgres_url, performers=[Node], flows=[flow], auto_migrate=True) for _ in range(4)]
    watch = _Deadlocks()
    logger = logging.getLogger("jobloom.store.postgres")
    logger.addHandler(watch)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        main = apps[0]
        await main.register_bindings(["Node"])
        runs = [await main.start(flow, {}, id=f"run-{i:03d}", deadline=0.3 if i % 3 == 0 else None)
                for i in range(RUNS)]
        cancel = [r.id for i, r in enumerate(runs) if i % 3 == 1]
        before = await _pg_deadlocks(postgres_url)
        stop = asyncio.Event()
        started = time.monotonic()
        workers = [asyncio.create_task(_worker(app, f"w{k}-{j}", stop)) for k, app in enumerate(apps) for j in range(2)]
        sweeper = asyncio.create_task(_deadline_sweeper(apps[1], stop))
        cancellers = [_canceller(apps[k % len(apps)], cancel[k::3]) for k in range(3)]
        await asyncio.gather(*cancellers)

        async def all_ended() -> bool:
            return all(r.state in ("succeeded", "failed", "cancelled")
                       for r in await main.list_runs(flow="wide", limit=RUNS))

        deadline = time.monotonic() + SECONDS_AT_MOST
        while not await all_ended():
            assert time.monotonic() < deadline, "runs did not all end"
            await asyncio.sleep(0.05)
        stop.set()
        reported = sum(await asyncio.gather(*workers))
        await sweeper
        elapsed = time.monotonic() - started
        after = await _pg_deadlocks(postgres_url)
        assert not watch.seen, (
            f"{len(watch.seen)} deadlock(s) in {elapsed:.1f} s (server count {before} -> {after}): {watch.seen[:3]}")
        assert reported > RUNS
        for run in await main.list_runs(flow="wide", limit=RUNS):
            states = {n.state for n in run.nodes.values()}
            assert not states & set(ACTIVE_STATES), (run.id, run.state, states)
            assert run.finished_at is not None, run.id
            index = int(run.id.split("-")[1])
            if run.state == "succeeded":
                assert states == {"succeeded"}, (run.id, states)
            elif run.state == "cancelled":
                assert index % 3 == 1, run.id
            else:
                assert run.state == "failed" and index % 3 == 0, (run.id, run.state, run.error)
    finally:
        logger.removeHandler(watch)
        logger.setLevel(old_level)
        for app in apps:
            await app.close()
