"""The store contract: what every store must do, exercised on the seam itself (``store/base.py``).

The engine is written once against ``Store`` and ``Tx``; these tests hold each driver to what it relies
on, without a worker in between: migrations, transactions, named SQL, locks and fenced state changes,
wake-ups between store instances, the clock. Each test runs on every store in ``CONTRACT_STORES``
(SQLite, PostgreSQL, and PostgreSQL behind PgBouncer in transaction pooling). A new store adds itself
there, with fixtures giving an unmigrated and a migrated URL, and must pass every test here before
the conformance suite (``tests/conformance``) is worth running on it. CONTRIBUTING.md says the same.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from jobloom.core.codecs import IDENTITY
from jobloom.core.errors import StoreError
from jobloom.core.queries import Q
from jobloom.engine.jobs import NewJob
from jobloom.store import Store, Tx, open_store
from jobloom.store.sql import load_migrations
from tests.helpers import eventually

CONTRACT_STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres),
                   pytest.param("pgbouncer", marks=pytest.mark.postgres)]
"""Every store the contract runs on: a new store adds itself here (and to the two fixtures below)."""


@pytest.fixture(params=CONTRACT_STORES)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def empty_url(kind: str, request: pytest.FixtureRequest) -> str:
    """A URL of this store that nothing has migrated yet, private to the test."""
    name = {"sqlite": "sqlite_url", "postgres": "empty_postgres_url", "pgbouncer": "pgbouncer_url"}[kind]
    return str(request.getfixturevalue(name))


@pytest.fixture
def url(kind: str, request: pytest.FixtureRequest) -> str:
    """A URL of this store, private to the test (migrated or not: ``opened`` migrates it)."""
    name = {"sqlite": "sqlite_url", "postgres": "postgres_url", "pgbouncer": "pgbouncer_url"}[kind]
    return str(request.getfixturevalue(name))


async def opened(url: str) -> Store:
    store = open_store(url)
    await store.open()
    await store.migrate()
    return store


@pytest.fixture
async def store(url: str) -> AsyncIterator[Store]:
    """An open, migrated store."""
    s = await opened(url)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def other(store: Store) -> AsyncIterator[Store]:
    """A second instance on the same database (its own connections), as another process would have."""
    s = await opened(store.url)
    try:
        yield s
    finally:
        await s.close()


def job(binding: str = "Contract", payload: str = '{"n": 0}') -> dict[str, Any]:
    """An ``insert_job`` row (with the event ``insert_jobs`` records) of a job queued now."""
    now = time.time()
    new = NewJob(binding=binding, payload=payload, priority=0, run_at=now, state="queued", max_attempts=3,
                 delivery="at_least_once", timeout=60.0, unique_key=None, unique_until=None,
                 concurrency_key=None, created_at=now)
    return {**new.params(IDENTITY), "event": "enqueued"}


async def insert(store: Store, count: int = 1) -> list[int]:
    rows = [job(payload=f'{{"n": {i}}}') for i in range(count)]
    return await store.transact(lambda tx: tx.insert_jobs(rows, time.time()))


async def read(store: Store, fn: Callable[[Tx], Awaitable[Any]]) -> Any:
    return await store.transact(fn, exclusive=False)


async def states(store: Store) -> dict[str, int]:
    rows = await read(store, lambda tx: tx.fetch(Q.count_by_state))
    return {r.state: r.n for r in rows}


# -- migrations ----------------------------------------------------------------------------------------


async def test_migrate_applies_each_migration_once_in_order(empty_url: str) -> None:
    store = open_store(empty_url)
    await store.open()
    try:
        assert await store.applied_migrations() == []
        every = [m.name for m in load_migrations(store.dialect)]
        assert every == sorted(every) and len(every) == len(set(every))
        assert await store.migrate() == every
        assert await store.applied_migrations() == every
        assert await store.migrate() == []  # idempotent: a worker migrates at every start
    finally:
        await store.close()


async def test_two_instances_migrating_at_once_apply_each_migration_once(empty_url: str) -> None:
    a, b = open_store(empty_url), open_store(empty_url)
    await a.open()
    await b.open()
    try:
        done_a, done_b = await asyncio.gather(a.migrate(), b.migrate())
        every = [m.name for m in load_migrations(a.dialect)]
        assert sorted(done_a + done_b) == sorted(every), (done_a, done_b)
        assert await a.applied_migrations() == await b.applied_migrations() == every
    finally:
        await a.close()
        await b.close()


# -- transactions --------------------------------------------------------------------------------------


async def test_open_is_idempotent_and_a_store_says_where_it_keeps_its_tables(store: Store) -> None:
    await store.open()
    assert isinstance(await store.location(), str)
    assert store.dialect and store.url


async def test_a_transaction_commits_when_its_function_returns(store: Store, other: Store) -> None:
    [job_id] = await insert(store)
    row = await read(other, lambda tx: tx.fetchone(Q.get_job, {"id": job_id}))
    assert (row.id, row.binding, row.state, row.attempt) == (job_id, "Contract", "queued", 0)


async def test_a_transaction_that_raises_leaves_nothing_and_the_store_goes_on(store: Store, other: Store) -> None:
    class Boom(Exception):
        pass

    async def work(tx: Tx) -> None:
        await tx.insert_jobs([job()], time.time())
        raise Boom

    with pytest.raises(Boom):
        await store.transact(work)
    assert await states(other) == {} and await states(store) == {}
    await insert(store)  # the connection is usable after the rollback
    assert await states(other) == {"queued": 1}


async def test_a_transaction_is_not_seen_before_it_commits(store: Store, other: Store) -> None:
    inside = asyncio.Event()
    release = asyncio.Event()

    async def work(tx: Tx) -> None:
        await tx.insert_jobs([job()], time.time())
        await tx.flush()
        inside.set()
        await release.wait()

    writing = asyncio.create_task(store.transact(work))
    await asyncio.wait_for(inside.wait(), 30)
    try:
        assert await states(other) == {}  # a read-only transaction neither waits for nor sees the writer
    finally:
        release.set()
    await writing
    assert await states(other) == {"queued": 1}


# -- named SQL -----------------------------------------------------------------------------------------


async def test_named_queries_give_records_in_order_and_an_unknown_name_is_a_store_error(store: Store) -> None:
    ids = await insert(store, 5)
    assert ids == sorted(ids) and len(set(ids)) == 5  # ids in row order

    async def reads(tx: Tx) -> Any:
        batch = await tx.fetch_batch([(Q.get_job, {"id": i}) for i in reversed(ids)])
        return batch, await tx.fetchone(Q.get_job, {"id": max(ids) + 1000})

    batch, missing = await read(store, reads)
    assert [rows[0].id for rows in batch] == list(reversed(ids))  # answers in the order asked
    assert [rows[0].payload for rows in batch][-1] in ('{"n": 0}', {"n": 0})
    assert missing is None
    with pytest.raises(StoreError, match="no_such_query"):
        await read(store, lambda tx: tx.fetch_rows("no_such_query", {}))
    assert await states(store) == {"queued": 5}  # and the store goes on


# -- locks and fencing ---------------------------------------------------------------------------------


async def test_read_modify_writes_under_the_binding_lock_lose_nothing(store: Store, url: str) -> None:
    """Decisions on one binding are serialized by its lock (``lock_binding``): 3 instances of the store
    incrementing one counter 8 times each, all at once, end at 24."""
    await store.transact(lambda tx: tx.execute("set_overrides", {"binding": "Counted", "overrides": None,
                                                                  "now": time.time()}))
    others = [await opened(url) for _ in range(2)]

    async def bump(tx: Tx) -> None:
        policy = await tx.fetchone(Q.lock_binding, {"binding": "Counted"})
        await asyncio.sleep(0)  # let the other transactions of this process try meanwhile
        await tx.execute("save_bucket", {"binding": "Counted", "tokens": (policy.tokens or 0) + 1,
                                         "tokens_at": time.time()})

    try:
        await asyncio.gather(*(s.transact(bump) for s in [store, *others] for _ in range(8)))
    finally:
        for s in others:
            await s.close()
    policy = await read(store, lambda tx: tx.fetchone(Q.get_binding, {"binding": "Counted"}))
    assert policy.tokens == 24


async def test_a_job_is_claimed_by_one_transaction_only(store: Store, other: Store) -> None:
    """A claim takes the candidates its transaction has just read (``candidates_by_age``, which locks
    them where the store locks rows): two instances claiming at once never both get one job."""
    ids = await insert(store, 20)

    async def claim(s: Store, worker: str, limit: int) -> list[int]:
        async def work(tx: Tx) -> Any:
            found = await tx.fetch(Q.candidates_by_age, {"binding": "Contract", "full_keys": [], "limit": limit})
            await asyncio.sleep(0)  # let the other instance read its candidates meanwhile
            return await tx.claim({"ids": [c.id for c in found], "worker": worker,
                                   "lease_expires": time.time() + 60, "now": time.time()})

        later = await s.transact(work)
        return [r.id for r in later.rows()]

    claimed: list[int] = []
    for _ in range(3):
        mine, theirs = await asyncio.gather(claim(store, "a", 4), claim(other, "b", 4))
        assert not set(mine) & set(theirs), f"a job claimed twice: {mine} and {theirs}"
        claimed += mine + theirs
    assert len(claimed) == len(set(claimed))
    claimed += await claim(store, "c", 20)
    assert sorted(claimed) == sorted(ids)
    assert await claim(other, "d", 20) == []  # none is queued any more
    assert await states(other) == {"running": 20}


async def test_state_changes_are_fenced_by_attempt_and_owner(store: Store) -> None:
    [job_id] = await insert(store)
    started = time.time()
    [claimed] = (await store.transact(lambda tx: tx.claim({"ids": [job_id], "worker": "w", "now": started,
                                                           "lease_expires": time.time() + 60}))).rows()
    assert claimed.attempt == 1

    def beat(attempt: int, worker: str) -> Callable[[Tx], Awaitable[Any]]:
        return lambda tx: tx.fetch(Q.heartbeat, {"ids": [job_id], "attempts": [attempt], "pairs": [[job_id, attempt]],
                                                 "worker": worker, "lease_expires": time.time() + 120})

    def finish(attempt: int, worker: str = "w", at: float = started) -> Callable[[Tx], Awaitable[int]]:
        return lambda tx: tx.execute("finish_attempt", {
            "id": job_id, "attempt": attempt, "worker": worker, "started_at": at, "state": "succeeded",
            "result": None, "error": None, "run_at": time.time(), "finished_at": time.time(), "refund": 0,
            "payload": None})

    assert [(b.id, b.attempt) for b in await store.transact(beat(1, "w"))] == [(job_id, 1)]
    assert await store.transact(beat(1, "someone else")) == []  # not its lease
    assert await store.transact(beat(2, "w")) == []  # not the current attempt
    assert await store.transact(finish(2)) == 0  # a stale attempt changes nothing
    assert await store.transact(finish(1, "someone else")) == 0  # nor another owner's claim of the attempt
    assert await store.transact(finish(1, at=started + 1)) == 0  # nor another claim (a lost one) of it
    assert (await read(store, lambda tx: tx.fetchone(Q.get_job, {"id": job_id}))).state == "running"
    assert await store.transact(finish(1)) == 1
    assert await store.transact(finish(1)) == 0  # only while still running
    assert await store.transact(beat(1, "w")) == []
    assert (await read(store, lambda tx: tx.fetchone(Q.get_job, {"id": job_id}))).state == "succeeded"


# -- wake-ups, the clock, errors -----------------------------------------------------------------------


async def test_a_notify_wakes_a_subscriber_on_another_instance(store: Store, other: Store) -> None:
    wakeups = await store.wakeups()
    called: list[bool] = []
    try:
        supported = wakeups.on_signal(lambda: called.append(True))
        await asyncio.sleep(0)  # a subscription may finish setting up on the loop
        await eventually(lambda: deliver(other, wakeups), timeout=30, interval=0, what="a wake-up")
        if supported:
            await eventually(lambda: called, timeout=30, what="the signal callback")
    finally:
        await wakeups.close()


async def deliver(sender: Store, wakeups: Any) -> bool:
    """Notify, then wait a while for the signal (a subscription may still be starting the first time)."""
    await sender.notify()
    return bool(await wakeups.wait(1.0))


async def test_now_is_the_stores_clock_unless_a_test_clock_replaces_it(store: Store) -> None:
    assert abs(store.now() - time.time()) < 5  # one host: the store's clock is this clock, give or take
    store.clock = lambda: 1_000.5
    try:
        assert store.now() == 1_000.5  # every decision reads store.now(): a test decides the time
    finally:
        store.clock = None


async def test_transient_errors_are_told_apart_and_a_foreign_connection_is_refused(store: Store) -> None:
    assert store.is_transient(StoreError("unreachable"))
    assert not store.is_transient(ValueError("a bad payload"))

    async def nothing(tx: Tx) -> None:
        return None

    with pytest.raises(StoreError):
        await store.transact_on(object(), nothing)
