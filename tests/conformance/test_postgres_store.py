"""Driver-level tests of the PostgreSQL store: migrations, schemas, LISTEN/NOTIFY, retries, races.

They use the shared test server (``postgres_url`` from conftest, a private schema per test); tests
that need the ``schema=`` option make their own schemas and drop them afterwards.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from jobloom import App, MigrationsMissing, Performer, StoreError
from jobloom.core.codecs import IDENTITY
from jobloom.engine.coordinator import dispatch, enqueue
from jobloom.store.base import Tx
from jobloom.store.sql import load_migrations, load_queries

from ..conftest import INSTALL_POSTGRES, POSTGRES_URL, require_module, require_postgres
from ..pg_private import PrivateServer, private_server_fixture
from .pg_support import new_job, open_store

pytestmark = pytest.mark.postgres
private_server = private_server_fixture  # a server of the test's own, for the restart tests

psycopg = require_module("psycopg", INSTALL_POSTGRES)
from jobloom.store.postgres.faults import has_unread  # noqa: E402
from jobloom.store.postgres.store import PostgresStore  # noqa: E402


@dataclass
class Mail:
    to: str


class SendMail(Performer[Mail, str]):
    async def perform(self, payload: Mail) -> str:
        return "sent " + payload.to


class Limited(Performer[Mail, str]):
    concurrency = 3

    async def perform(self, payload: Mail) -> str:
        return payload.to


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[PostgresStore]:
    """A migrated store in the test's private schema."""
    async with open_store(postgres_url) as s:
        yield s


@pytest.fixture
def new_schema() -> Iterator[Callable[[], str]]:
    """Makes fresh schema names for ``schema=``; whatever the test created is dropped afterwards."""
    require_postgres()
    names: list[str] = []

    def make() -> str:
        names.append(f"jl_s_{uuid.uuid4().hex[:10]}")
        return names[-1]

    try:
        yield make
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            for name in names:
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


# -- named SQL ----------------------------------------------------------------------------------------


def test_every_sqlite_query_has_a_postgres_twin() -> None:
    postgres = set(load_queries("postgres"))
    variants = {name for name in postgres if "__" in name}  # set-based forms: insert_event__bulk, ...
    assert postgres - variants == set(load_queries("sqlite"))
    assert {name.split("__")[0] for name in variants} <= postgres  # variants of real statements
    assert [m.name for m in load_migrations("postgres")] == [m.name for m in load_migrations("sqlite")]


async def test_a_refused_login_fails_at_once_with_the_servers_reason() -> None:
    require_postgres()
    base = POSTGRES_URL.rsplit("/", 1)[0]
    store = PostgresStore(f"{base}/jobloom_no_such_database", retry_deadline=600)
    with pytest.raises(StoreError, match="does not exist"):
        await asyncio.wait_for(store.open(), 60)  # at once: not retried until the deadline of 600 s


async def test_a_url_libpq_cannot_read_fails_at_once_naming_the_parameter() -> None:
    require_postgres()
    sep = "&" if "?" in POSTGRES_URL else "?"
    store = PostgresStore(f"{POSTGRES_URL}{sep}schema=jobs", retry_deadline=600)  # not a libpq parameter
    with pytest.raises(StoreError, match='invalid URI query parameter: "schema"'):
        await asyncio.wait_for(store.open(), 60)  # at once: not retried until the deadline of 600 s


# -- migrations ---------------------------------------------------------------------------------------


async def test_migrations_apply_once_and_are_recorded(empty_postgres_url: str) -> None:
    s = PostgresStore(empty_postgres_url)
    try:
        assert await s.applied_migrations() == []
        names = [m.name for m in load_migrations("postgres")]
        assert await s.migrate() == names
        assert await s.migrate() == []
        assert await s.applied_migrations() == names
    finally:
        await s.close()


async def test_app_refuses_a_schema_without_migrations_then_accepts_it(new_schema: Callable[[], str]) -> None:
    schema = new_schema()
    app = App(POSTGRES_URL, performers=[SendMail], schema=schema)
    try:
        with pytest.raises(MigrationsMissing) as info:
            await app.enqueue(SendMail, Mail(to="a"))
        assert info.value.missing == [m.name for m in load_migrations("postgres")]
        assert await app.migrate() == info.value.missing
        job = await app.enqueue(SendMail, Mail(to="a"))
        assert (await app.get_job(job.id)).state == "queued"
    finally:
        await app.close()


async def test_two_processes_migrating_at_once_apply_each_migration_once(new_schema: Callable[[], str]) -> None:
    schema = new_schema()
    stores = [PostgresStore(POSTGRES_URL, schema=schema) for _ in range(4)]
    try:
        results = await asyncio.gather(*(s.migrate() for s in stores))
        names = [m.name for m in load_migrations("postgres")]
        assert sorted(n for r in results for n in r) == sorted(names)
        assert await stores[0].applied_migrations() == names
    finally:
        for s in stores:
            await s.close()


# -- schemas ------------------------------------------------------------------------------------------


async def test_two_apps_in_two_schemas_do_not_see_each_other(new_schema: Callable[[], str]) -> None:
    a_schema, b_schema = new_schema(), new_schema()
    a = App(POSTGRES_URL, performers=[SendMail], schema=a_schema, auto_migrate=True)
    b = App(POSTGRES_URL, performers=[SendMail], schema=b_schema, auto_migrate=True)
    try:
        ja = await a.enqueue(SendMail, Mail(to="a"))
        await b.enqueue(SendMail, Mail(to="b1"))
        await b.enqueue(SendMail, Mail(to="b2"))
        assert await a.counts() == {"SendMail": {"queued": 1}}
        assert await b.counts() == {"SendMail": {"queued": 2}}
        assert await a.drain() == 1
        assert (await a.get_job(ja.id)).result == "sent a"
        assert await b.counts() == {"SendMail": {"queued": 2}}
        with psycopg.connect(POSTGRES_URL) as conn:
            rows = conn.execute(
                "SELECT table_schema FROM information_schema.tables WHERE table_name = 'jobloom_jobs' "
                "AND table_schema = ANY(%s)", [[a_schema, b_schema]]
            ).fetchall()
        assert sorted(r[0] for r in rows) == sorted([a_schema, b_schema])
    finally:
        await a.close()
        await b.close()


async def test_notifications_stay_in_their_schema(new_schema: Callable[[], str]) -> None:
    a = PostgresStore(POSTGRES_URL, schema=new_schema())
    b = PostgresStore(POSTGRES_URL, schema=new_schema())
    wake = await b.wakeups()
    try:
        await a.notify()
        assert not await wake.wait(0.3)
        await b.notify()
        assert await wake.wait(5)
    finally:
        await wake.close()
        await a.close()
        await b.close()


# -- wake-ups -----------------------------------------------------------------------------------------


async def test_a_notify_from_another_connection_wakes_a_listener(postgres_url: str) -> None:
    channel = f"wake_{uuid.uuid4().hex[:12]}"  # a channel of its own: other tests' commits notify theirs
    listener, sender = PostgresStore(postgres_url, schema=channel), PostgresStore(postgres_url, schema=channel)
    wake = await listener.wakeups()
    try:
        assert not await wake.wait(0.05)
        await sender.notify()
        assert await wake.wait(30)  # a listener wakes by itself only after a reconnection
        assert not await wake.wait(0.05)  # signals were merged and consumed
    finally:
        await wake.close()
        await listener.close()
        await sender.close()


async def test_a_quiet_listener_is_probed_and_still_wakes(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between notifications the listener waits on its socket; a connection quiet for HEALTH_CHECK seconds
    is probed with a query, and the notifications sent around the probes still wake the subscribers."""
    from jobloom.store.postgres import listen

    monkeypatch.setattr(listen, "HEALTH_CHECK", 0.02)
    channel = f"wake_{uuid.uuid4().hex[:12]}"
    listener, sender = PostgresStore(postgres_url, schema=channel), PostgresStore(postgres_url, schema=channel)
    wake = await listener.wakeups()
    try:
        conn = wake.listener.conn  # type: ignore[attr-defined]
        for _ in range(20):  # each wait spans a probe or more; every notification is seen
            assert not await wake.wait(0.03)
            await sender.notify()
            assert await wake.wait(5)
        assert wake.listener.conn is conn  # type: ignore[attr-defined]  # probed, never reconnected
    finally:
        await wake.close()
        await listener.close()
        await sender.close()


async def test_subscribers_share_one_listening_connection(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    wakes = [await store.wakeups() for _ in range(20)]
    try:
        assert len({w.listener for w in wakes}) == 1  # type: ignore[attr-defined]
        await wakes[0].close()
        await store.notify()
        assert all(await asyncio.gather(*(w.wait(5) for w in wakes[1:])))
        assert not await wakes[0].wait(0.05)
    finally:
        for w in wakes:
            await w.close()
        await store.close()


async def test_a_lost_listen_connection_reconnects_and_signals(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    wake = await store.wakeups()
    try:
        listener = wake.listener  # type: ignore[attr-defined]
        conn = listener.conn
        assert conn is not None
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [conn.info.backend_pid])
        assert await wake.wait(10)  # the reconnect signals: notifications may have been missed
        deadline = time.monotonic() + 10
        while listener.conn is None or listener.conn is conn:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        await wake.wait(0)
        await store.notify()
        assert await wake.wait(5)
    finally:
        await wake.close()
        await store.close()


async def test_a_listener_survives_an_unexpected_error_while_reconnecting(postgres_url: str) -> None:
    """Not only a lost connection: whatever breaks the listening loop, it listens again (a listener that
    died silently would leave idle workers to their polling)."""
    store = PostgresStore(postgres_url)
    wake = await store.wakeups()
    try:
        listener = wake.listener  # type: ignore[attr-defined]
        conn = listener.conn
        assert conn is not None
        real_listen = listener._listen
        failures = []

        async def listen_failing_once() -> Any:
            if not failures:
                failures.append(1)
                raise RuntimeError("an unexpected error")
            return await real_listen()

        listener._listen = listen_failing_once
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [conn.info.backend_pid])
        deadline = time.monotonic() + 10
        while listener.conn is None or listener.conn is conn:
            assert time.monotonic() < deadline, "the listener did not listen again"
            assert listener._task is not None and not listener._task.done(), "the listener task died"
            await asyncio.sleep(0.02)
        assert failures == [1]
        await wake.wait(0)
        await store.notify()
        assert await wake.wait(5)
    finally:
        await wake.close()
        await store.close()


# -- transactions -------------------------------------------------------------------------------------


async def test_transact_survives_a_terminated_connection(store: PostgresStore) -> None:
    tries = 0

    async def work(tx: Tx) -> int:
        nonlocal tries
        tries += 1
        (ids,) = [await tx.insert_many("insert_job", [new_job().params(IDENTITY)])]
        if tries == 1:
            pid = tx.conn.info.backend_pid  # type: ignore[attr-defined]
            with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", [pid])
            await tx.fetch("get_job", {"id": ids[0]})
        return ids[0]

    job_id = await store.transact(work)
    assert tries == 2

    async def count(tx: Tx) -> Any:
        return await tx.fetch("count_by_state")

    assert await store.transact(count, exclusive=False) == [("SendMail", "queued", 1)]
    assert job_id > 0


async def test_single_statements_keep_one_connection_and_replace_it_once_terminated(store: PostgresStore) -> None:
    async def insert(tx: Tx) -> tuple[int, int]:
        (job_id,) = await tx.insert_many("insert_job", [new_job().params(IDENTITY)])
        return job_id, tx.conn.info.backend_pid  # type: ignore[attr-defined]

    _, first = await store.autocommit(insert)
    _, again = await store.autocommit(insert)
    assert again == first  # the held connection, not a fresh checkout each time
    # two at once: the second does not wait for the held one, it takes a pooled connection
    both = await asyncio.gather(store.autocommit(insert), store.autocommit(insert))
    assert len({pid for _, pid in both}) == 2
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [first])
    deadline = time.monotonic() + 5  # the server's goodbye reaches the idle connection's socket
    while not has_unread(store._held) and time.monotonic() < deadline:  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
    job_id, replaced = await store.autocommit(insert)  # noticed before sending: no CommitUnknown
    assert replaced != first

    async def count(tx: Tx) -> Any:
        return await tx.fetch("count_by_state")

    assert await store.transact(count, exclusive=False) == [("SendMail", "queued", 5)]
    assert job_id > 0


async def test_transact_retries_the_loser_of_a_deadlock(store: PostgresStore) -> None:
    ids = await store.transact(lambda tx: tx.insert_many("insert_job", [new_job().params(IDENTITY),
                                                                        new_job().params(IDENTITY)]))
    locked = [asyncio.Event(), asyncio.Event()]
    tries = [0, 0]

    def worker(me: int) -> Any:
        async def work(tx: Tx) -> None:
            tries[me] += 1
            if tries[me] > 1:
                # the retry takes the winner's row first, so it waits for the winner to commit: taking its
                # own row first again races the winner for it, which can deadlock a second time and make
                # the winner the loser (both retried: seen once on a loaded run)
                await tx.fetch("lock_job", {"id": ids[1 - me]})
                await tx.fetch("lock_job", {"id": ids[me]})
                return
            await tx.fetch("lock_job", {"id": ids[me]})
            locked[me].set()
            await locked[1 - me].wait()
            await tx.fetch("lock_job", {"id": ids[1 - me]})

        return work

    await asyncio.wait_for(asyncio.gather(store.transact(worker(0)), store.transact(worker(1))), 30)
    assert sorted(tries) == [1, 2]


async def test_two_batches_deleting_a_runs_last_jobs_at_once_delete_the_run(store: PostgresStore) -> None:
    """Retention: each batch deletes one of a finished run's two jobs, neither sees the other's delete
    before it commits; the run is still deleted (the second batch waits on the run's lock)."""
    now = time.time()
    jobs = [new_job() for _ in range(2)]
    for job in jobs:
        job.run_id, job.state = "r1", "succeeded"

    async def setup(tx: Tx) -> list[int]:
        await tx.execute("insert_run", {"id": "r1", "flow": "f", "input": "{}", "graph": "{}", "deadline": None,
                                        "deadline_seconds": None, "parent_job_id": None, "depth": 0, "now": now,
                                        "spec": None})
        await tx.execute("set_run_state", {"id": "r1", "state": "succeeded", "error": None, "finished_at": now})
        return await enqueue(tx, jobs, now)  # type: ignore[return-value]

    a, b = [job_id for job_id, _ in await store.transact(setup)]
    first_locked, first_done, second_done = asyncio.Event(), asyncio.Event(), asyncio.Event()
    second_pid: list[int] = []

    async def second_waits_or_is_done() -> None:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            deadline = time.monotonic() + 10
            while not second_done.is_set():
                row = admin.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                                    second_pid).fetchone() if second_pid else None
                if row is not None and row[0] == "Lock":
                    return
                assert time.monotonic() < deadline, "the second batch neither waited nor finished"
                await asyncio.sleep(0.01)

    async def first(tx: Tx) -> None:
        await tx.execute("prune_jobs", {"ids": [a]})
        await tx.fetch("lock_pruned_runs", {"ids": ["r1"]})
        first_locked.set()
        await second_waits_or_is_done()
        await tx.execute("prune_runs", {"ids": ["r1"]})  # sees b: the second batch has not committed
        first_done.set()

    async def second(tx: Tx) -> None:
        await first_locked.wait()
        second_pid.append(tx.conn.info.backend_pid)  # type: ignore[attr-defined]
        await tx.execute("prune_jobs", {"ids": [b]})
        await tx.fetch("lock_pruned_runs", {"ids": ["r1"]})
        await tx.execute("prune_runs", {"ids": ["r1"]})
        second_done.set()
        await first_done.wait()  # both have looked before either commits

    await asyncio.wait_for(asyncio.gather(store.transact(first), store.transact(second)), 30)
    assert await store.transact(lambda tx: tx.fetch("get_run", {"id": "r1"}), exclusive=False) == []


@pytest.mark.serial
async def test_binding_locks_taken_in_opposite_orders_do_not_deadlock(store: PostgresStore) -> None:
    locked = [asyncio.Event(), asyncio.Event()]
    tries = [0, 0]
    order = [["Alpha", "Beta"], ["Beta", "Alpha"]]

    def cycle(me: int) -> Any:
        async def work(tx: Tx) -> None:
            tries[me] += 1
            await tx.fetchone("lock_binding", {"binding": order[me][0]})
            locked[me].set()
            await locked[1 - me].wait()
            await tx.fetchone("lock_binding", {"binding": order[me][1]})

        return work

    for binding in ("Alpha", "Beta"):  # as workers do at start (creating a row cannot be tried NOWAIT)
        await store.transact(lambda tx, b=binding: tx.fetchone("lock_binding", {"binding": b}))
    started = time.monotonic()
    await asyncio.wait_for(asyncio.gather(store.transact(cycle(0)), store.transact(cycle(1))), 30)
    assert time.monotonic() - started < 0.9  # faster than PostgreSQL's deadlock detection (1 s)
    assert tries == [1, 2]  # the out-of-order lock failed at once; that transaction ran again


async def test_a_non_transient_error_propagates_and_rolls_back(store: PostgresStore) -> None:
    async def work(tx: Tx) -> None:
        await tx.insert_many("insert_job", [new_job().params(IDENTITY)])
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await store.transact(work)
    with pytest.raises(psycopg.errors.NotNullViolation):
        await store.transact(lambda tx: tx.insert_many("insert_job", [new_job().params(IDENTITY) | {"payload": None}]))
    assert await store.transact(lambda tx: tx.fetch("count_by_state")) == []


async def test_racing_enqueues_of_one_unique_key_make_one_job(postgres_url: str) -> None:
    stores = [PostgresStore(postgres_url, pool_max=4) for _ in range(6)]
    await stores[0].migrate()
    try:
        async def one(store: PostgresStore) -> int:
            result = await store.transact(lambda tx: enqueue(tx, [new_job(unique_key="k")], time.time()))
            return result[0][0]

        ids = await asyncio.gather(*(one(stores[i % len(stores)]) for i in range(40)))
        assert len(set(ids)) == 1
        rows = await stores[0].transact(lambda tx: tx.fetch("count_by_state"))
        assert rows == [("SendMail", "queued", 1)]
    finally:
        for s in stores:
            await s.close()


async def test_parallel_claims_never_take_a_job_twice(postgres_url: str) -> None:
    stores = [PostgresStore(postgres_url, pool_max=2) for _ in range(6)]
    await stores[0].migrate()
    await stores[0].transact(lambda tx: enqueue(tx, [new_job() for _ in range(300)], time.time()))
    claimed: list[int] = []
    try:
        async def claimer(store: PostgresStore, n: int) -> None:
            while True:
                got = await store.transact(
                    lambda tx: dispatch(tx, "SendMail", capacity=7, worker=f"w{n}", now=time.time(), lease=30)
                )
                if not got.claimed:
                    return
                claimed.extend(c.id for c in got.claimed)

        await asyncio.gather(*(claimer(s, i) for i, s in enumerate(stores)))
    finally:
        for s in stores:
            await s.close()
    assert len(claimed) == 300 and len(set(claimed)) == 300


async def test_a_concurrency_limit_holds_across_stores(postgres_url: str) -> None:
    stores = [PostgresStore(postgres_url, pool_max=2) for _ in range(5)]
    await stores[0].migrate()
    app = App(postgres_url, performers=[Limited])
    try:
        await app.register_bindings()
        await stores[0].transact(lambda tx: enqueue(tx, [new_job("Limited") for _ in range(20)], time.time()))

        async def claim(store: PostgresStore, n: int) -> int:
            got = await store.transact(
                lambda tx: dispatch(tx, "Limited", capacity=2, worker=f"w{n}", now=time.time(), lease=30)
            )
            return len(got.claimed)

        counts = await asyncio.gather(*(claim(s, i) for i, s in enumerate(stores) for _ in range(3)))
        assert sum(counts) == 3
    finally:
        await app.close()
        for s in stores:
            await s.close()


async def test_lock_binding_creates_a_missing_row(store: PostgresStore) -> None:
    row = await store.transact(lambda tx: tx.fetchone("lock_binding", {"binding": "Nobody"}))
    assert row is not None and row[0] is None and row[1] == 1
    row = await store.transact(lambda tx: tx.fetchone("lock_binding", {"binding": "Nobody"}))
    assert row is not None


# -- transactional enqueue ----------------------------------------------------------------------------


async def _count(store: PostgresStore) -> int:
    rows = await store.transact(lambda tx: tx.fetch("count_by_state"))
    return sum(r[2] for r in rows)


async def test_enqueue_in_the_callers_async_transaction(new_schema: Callable[[], str]) -> None:
    schema = new_schema()
    store = PostgresStore(POSTGRES_URL, schema=schema)
    await store.migrate()
    wake = await store.wakeups()
    try:
        async with await psycopg.AsyncConnection.connect(POSTGRES_URL) as conn:
            await conn.execute("SELECT 1")
            got = await store.transact_on(conn, lambda tx: enqueue(tx, [new_job()], time.time()))
            assert got[0][1] is True
            path = await (await conn.execute("SHOW search_path")).fetchone()
            assert path is not None and schema not in path[0]  # the caller's search_path is back
            assert await _count(store) == 0  # not committed yet
            assert not await wake.wait(0.2)  # NOTIFY waits for the commit too
            await conn.rollback()
            assert await _count(store) == 0
            assert not await wake.wait(0.2)

            await store.transact_on(conn, lambda tx: enqueue(tx, [new_job()], time.time()))
            await conn.commit()
            assert await _count(store) == 1
            assert await wake.wait(5)

            async def failing(tx: Tx) -> None:
                await enqueue(tx, [new_job()], time.time())
                await tx.fetch("get_job", {"id": "not a number"})

            with pytest.raises(psycopg.errors.InvalidTextRepresentation):
                await store.transact_on(conn, failing)
            await conn.execute("SELECT 1")  # the caller's transaction is still usable
            await conn.commit()
            assert await _count(store) == 1

        async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
            with pytest.raises(StoreError):
                await store.transact_on(conn, lambda tx: enqueue(tx, [new_job()], time.time()))
    finally:
        await wake.close()
        await store.close()


async def test_enqueue_in_the_callers_sync_transaction(postgres_url: str, store: PostgresStore) -> None:
    def sync_enqueue(commit: bool) -> list[tuple[int, bool]]:
        with psycopg.connect(postgres_url) as conn:
            got = store.transact_on_sync(conn, lambda tx: enqueue(tx, [new_job(unique_key="u")], time.time()))
            if commit:
                conn.commit()
            else:
                conn.rollback()
            return got

    await asyncio.to_thread(sync_enqueue, False)
    assert await _count(store) == 0
    first = await asyncio.to_thread(sync_enqueue, True)
    again = await asyncio.to_thread(sync_enqueue, True)
    assert first[0][1] is True and again == [(first[0][0], False)]
    assert await _count(store) == 1


def test_the_sync_variant_refuses_a_coroutine_that_suspends(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)

    async def suspends(tx: Tx) -> None:
        await asyncio.sleep(0)

    with psycopg.connect(postgres_url) as conn, pytest.raises(StoreError, match="awaited something"):
        store.transact_on_sync(conn, suspends)


# -- end to end ---------------------------------------------------------------------------------------


async def test_enqueue_drain_retry_unique_cancel_on_postgres(new_schema: Callable[[], str]) -> None:
    app = App(POSTGRES_URL, performers=[SendMail, Limited], schema=new_schema(), auto_migrate=True)
    try:
        job = await app.enqueue(SendMail, Mail(to="a"))
        await app.enqueue_many([(Limited, Mail(to=str(i))) for i in range(10)])
        assert await app.drain() == 11
        assert (await app.get_job(job.id)).result == "sent a"
        u1, u2 = await asyncio.gather(
            app.enqueue(SendMail, Mail(to="u"), unique_key="k"), app.enqueue(SendMail, Mail(to="u"), unique_key="k")
        )
        assert u1.id == u2.id
        later = await app.enqueue(SendMail, Mail(to="later"), delay=60)
        assert (await app.cancel(later.id)).state == "cancelled"
        assert (await app.retry(later.id)).state == "queued"
        assert await app.drain() == 2
        assert await app.counts(finished=True) == {"SendMail": {"succeeded": 3}, "Limited": {"succeeded": 10}}
    finally:
        await app.close()


# -- a server restart (a private server: never stop the shared one) ----------------------------------


@pytest.mark.slow
async def test_transactions_and_listen_survive_a_server_restart(private_server: PrivateServer) -> None:
    store = PostgresStore(private_server.url, retry_deadline=60)
    await store.migrate()
    wake = await store.wakeups()
    try:
        await asyncio.to_thread(private_server.stop)
        pending = asyncio.create_task(store.transact(lambda tx: enqueue(tx, [new_job()], time.time())))
        await asyncio.sleep(1.0)
        assert not pending.done()  # retrying with backoff while the server is down
        await asyncio.to_thread(private_server.start)
        (job_id, created), = await asyncio.wait_for(pending, 60)
        assert created
        assert await wake.wait(30)  # the LISTEN connection came back and said so
        await wake.wait(0)
        await store.notify()
        assert await wake.wait(10)
        row = await store.transact(lambda tx: tx.fetchone("get_job", {"id": job_id}))
        assert row is not None and row[2] == "queued"
    finally:
        await wake.close()
        await store.close()


@pytest.mark.slow
async def test_a_store_opened_while_the_server_is_down_waits_for_it(private_server: PrivateServer) -> None:
    await asyncio.to_thread(private_server.stop)
    store = PostgresStore(private_server.url, retry_deadline=60)
    opening = asyncio.create_task(store.migrate())
    try:
        await asyncio.sleep(1.0)
        assert not opening.done()
        await asyncio.to_thread(private_server.start)
        assert await asyncio.wait_for(opening, 60) == [m.name for m in load_migrations("postgres")]
    finally:
        opening.cancel()
        await store.close()


async def test_a_failing_notify_is_a_warning_once_per_run_of_failures(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A NOTIFY that fails (idle workers then notice the change at their next due moment) is said as a
    warning, once, not once per commit; a success starts over."""
    import logging

    caplog.set_level(logging.DEBUG, logger="jobloom.store.postgres")
    store = PostgresStore(postgres_url)
    await store.open()
    try:
        broken = store.channel
        store.channel = "x" * 100  # longer than any channel name: the server refuses the NOTIFY
        for _ in range(3):
            await store.notify()
            assert store._notifier is not None
            await store._notifier
        store.channel = broken
        warnings = [r for r in caplog.records if "NOTIFY failed" in r.getMessage()]
        assert [r.levelno for r in warnings] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
        await store.notify()
        await store._notifier
        assert not store._notify_failing
    finally:
        await store.close()
