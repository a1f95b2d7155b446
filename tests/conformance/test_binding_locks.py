"""PostgreSQL: a worker's cycle never waits for a binding's lock while it holds another's.

A limited binding's dispatch takes the binding's row lock (its count of running jobs is exact under
it). A cycle dispatches its bindings in an order that turns from cycle to cycle; if it waited for
each lock in that order, two workers could each hold one binding and wait for the other's (a
deadlock that PostgreSQL breaks after a second), and a worker waiting for one binding would keep the
binding it holds from every other worker meanwhile. So only the first lock of a cycle is waited
for; any further one is taken only if free, and a binding skipped so is dispatched first next time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

import jobloom
from jobloom.engine import coordinator
from jobloom.store.base import Tx
from tests.helpers import eventually

pytestmark = pytest.mark.postgres

JOBS = 150


class Left(jobloom.Performer[dict[str, Any], None]):
    """A concurrency-limited binding."""

    concurrency = 3

    async def perform(self, payload: dict[str, Any]) -> None:
        """Return at once."""


class Right(Left):
    """Another."""


class Third(Left):
    """And a third."""


PERFORMERS = [Left, Right, Third]


async def test_a_second_lock_held_elsewhere_is_skipped_not_waited_for(postgres_url: str) -> None:
    import psycopg

    app = jobloom.App(postgres_url, performers=PERFORMERS, auto_migrate=True)
    try:
        await app.register_bindings(["Left", "Right"])
        left = await app.enqueue(Left, {})
        right = await app.enqueue(Right, {})
        store = await app.store()
        with psycopg.connect(postgres_url) as other:  # another transaction holds Right's lock
            other.execute("SELECT 1 FROM jobloom_bindings WHERE binding = 'Right' FOR UPDATE")

            async def cycle(tx: Tx) -> tuple[Any, Any]:
                now = time.time()
                first = await coordinator.dispatch(tx, "Left", capacity=4, worker="w", now=now, lease=30.0)
                second = await coordinator.dispatch(tx, "Right", capacity=4, worker="w", now=now, lease=30.0,
                                                    wait_for_lock=not first.locked)
                return first, second

            first, second = await asyncio.wait_for(store.transact(cycle), 10)
            assert first.locked and [c.id for c in first.claimed] == [left.id]
            assert second.contended and not second.locked and second.claimed == []
            other.rollback()

        async def again(tx: Tx) -> Any:
            return await coordinator.dispatch(tx, "Right", capacity=4, worker="w", now=time.time(), lease=30.0,
                                              wait_for_lock=False)

        free = await store.transact(again)
        assert [c.id for c in free.claimed] == [right.id] and free.locked and not free.contended
    finally:
        await app.close()


class _Deadlocks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "DeadlockDetected" in record.getMessage():
            self.seen.append(record.getMessage())


async def test_workers_turning_over_limited_bindings_never_deadlock(postgres_url: str) -> None:
    """Four workers (four connections) dispatch three limited bindings, each cycle in a turned order."""
    apps = [jobloom.App(postgres_url, performers=PERFORMERS, auto_migrate=True) for _ in range(4)]
    watch = _Deadlocks()
    logger = logging.getLogger("jobloom.store.postgres")
    logger.addHandler(watch)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    workers: list[tuple[jobloom.Worker, asyncio.Task[None]]] = []
    try:
        main = apps[0]
        await main.migrate()
        await main.enqueue_many([(p, {"i": i}) for i in range(JOBS) for p in PERFORMERS])
        for k, app in enumerate(apps):
            # 4 slots each, of the bindings' 9: no worker can hold every slot, so each one's first cycle
            # finds some free, and they contend to the end without depending on other wake-ups
            worker = jobloom.Worker(app, concurrency=4, grace=5.0, name=f"w{k}")
            workers.append((worker, asyncio.create_task(worker.run())))

        import psycopg

        conn = psycopg.connect(postgres_url, autocommit=True)

        def all_done() -> bool:
            rows = conn.execute("SELECT binding, state, count(*) FROM jobloom_jobs GROUP BY 1, 2").fetchall()
            return sorted(rows) == [(p.__name__, "succeeded", JOBS) for p in PERFORMERS]

        await eventually(all_done, timeout=60, interval=0.05, what="every job succeeded")
        assert not watch.seen, f"{len(watch.seen)} deadlock(s): {watch.seen[:3]}"
        with conn:
            row = conn.execute("SELECT count(DISTINCT worker) FROM jobloom_attempts").fetchone()
        assert row is not None and row[0] >= 2, "one worker ran every job: the bindings' locks were not contended"
    finally:
        for worker, _ in workers:
            worker.stop()
        await asyncio.gather(*(task for _, task in workers), return_exceptions=True)
        logger.removeHandler(watch)
        logger.setLevel(old_level)
        for app in apps:
            await app.close()
