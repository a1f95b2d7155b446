"""PostgreSQL transactions (``store/pg_tx.py``): named SQL in psycopg's style, the plans of the hot
statements, deferred writes, set-based inserts, and single-statement transactions."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import jobloom
from jobloom.core.codecs import IDENTITY
from jobloom.core.errors import StoreError
from jobloom.store.base import Tx
from tests.helpers import eventually

from ..conftest import INSTALL_POSTGRES, POSTGRES_URL, require_module
from .pg_support import new_job, open_store

pytestmark = pytest.mark.postgres

psycopg = require_module("psycopg", INSTALL_POSTGRES)
from jobloom.store.postgres.store import PostgresStore  # noqa: E402
from jobloom.store.postgres.tx import to_psycopg  # noqa: E402


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[PostgresStore]:
    """A migrated store in the test's private schema."""
    async with open_store(postgres_url) as s:
        yield s


def test_named_parameters_become_psycopg_placeholders() -> None:
    q = to_psycopg("SELECT :a::text, 'x:y', \"q:z\", 5 % 2 -- it's :b\nFROM t WHERE c = ANY(:ids::bigint[])")
    assert q == "SELECT %(a)s::text, 'x:y', \"q:z\", 5 %% 2 \nFROM t WHERE c = ANY(%(ids)s::bigint[])"


@pytest.mark.parametrize("history", [0, 20_000], ids=["no-statistics", "statistics-of-finished-jobs"])
async def test_hot_statements_find_their_rows_by_their_index(store: PostgresStore, history: int) -> None:
    """The planner's estimate of queued jobs is often wrong: no statistics right after a burst of
    enqueues, or statistics taken when nearly every job was finished. Whatever it believes, the
    candidate queries must be served in their own index's order and finished attempts found by
    primary key, never sorting or scanning every queued or running job per cycle."""
    import json

    from jobloom.store.postgres.tx import _QUERIES

    if history:
        done = [{**new_job().params(IDENTITY), "state": "succeeded", "event": "succeeded"} for _ in range(history)]
        await store.autocommit(lambda tx: tx.insert_jobs(done, time.time()))
        await store.autocommit(lambda tx: tx.conn.execute("ANALYZE jobloom_jobs"))  # type: ignore[attr-defined]
    rows = [{**new_job().params(IDENTITY), "event": "enqueued"} for _ in range(3000)]
    ids = await store.autocommit(lambda tx: tx.insert_jobs(rows, time.time()))
    await store.transact(lambda tx: tx.fetch("claim", {"ids": ids[:1500], "worker": "w", "lease_expires": 1e10,
                                                       "now": time.time()}))


    async def plans(tx: Tx) -> dict[str, str]:
        conn = tx.conn  # type: ignore[attr-defined]
        finish = json.dumps([{"id": i, "attempt": 1, "worker": "w", "started_at": 0.0, "state": "succeeded",
                              "result": None, "error": None, "run_at": 0.0, "finished_at": 0.0, "refund": 0,
                              "payload": None} for i in ids[:100]])
        out = {}
        for name, params in (
            ("candidates_by_priority", {"binding": "SendMail", "full_keys": [], "limit": 116}),
            ("candidates_by_age", {"binding": "SendMail", "full_keys": [], "limit": 116}),
            ("finish_attempt__bulk", {"rows": finish}),
            ("claim", {"ids": ids[1500:1600], "worker": "w", "lease_expires": 1e10, "now": 0.0}),
        ):
            cur = await conn.execute("EXPLAIN " + _QUERIES[name], params)
            out[name] = "\n".join(r[0] for r in await cur.fetchall())
        return out

    found = await store.transact(plans)
    assert "jobloom_jobs_queued " in found["candidates_by_priority"] + " ", found["candidates_by_priority"]
    assert "Sort" not in found["candidates_by_priority"], found["candidates_by_priority"]
    assert "jobloom_jobs_queued_age" in found["candidates_by_age"], found["candidates_by_age"]
    assert "jobloom_jobs_pkey" in found["finish_attempt__bulk"], found["finish_attempt__bulk"]
    assert "Seq Scan" not in found["finish_attempt__bulk"], found["finish_attempt__bulk"]
    assert "jobloom_jobs_queued" not in found["claim"], found["claim"]  # never through every queued job
    if history:  # a large table: by primary key (a small one may be read whole, which is as cheap)
        assert "jobloom_jobs_pkey" in found["claim"], found["claim"]


async def test_a_deferred_write_that_fails_rolls_the_whole_transaction_back(store: PostgresStore) -> None:
    async def work(tx: Tx) -> None:
        await tx.insert_jobs([{**new_job().params(IDENTITY), "event": "enqueued"}], time.time())
        # a write nobody reads the result of goes out with COMMIT; its failure must still undo everything
        await tx.executemany("insert_event", [{"at": None, "job_id": 1, "binding": "b", "kind": "x",
                                               "attempt": 0, "duration": None}])

    with pytest.raises(psycopg.errors.NotNullViolation):
        await store.transact(work)

    async def count(tx: Tx) -> Any:
        return (await tx.fetch("count_by_state"), await tx.fetch("project_events", {"limit": 10}))

    assert await store.transact(count, exclusive=False) == ([], [])


async def test_insert_jobs_returns_ids_in_row_order_with_their_events_counted(store: PostgresStore) -> None:
    rows = [{**new_job(payload=f'{{"to": "{i}"}}').params(IDENTITY), "event": "enqueued"} for i in range(300)]
    ids = await store.autocommit(lambda tx: tx.insert_jobs(rows, 123.0))

    async def read(tx: Tx) -> Any:
        jobs = [await tx.fetchone("get_job", {"id": i}) for i in ids]
        return jobs, await tx.fetch("project_events", {"limit": 1000})

    jobs, events = await store.transact(read, exclusive=False)
    assert [json_to(j) for j in jobs] == [str(i) for i in range(300)]
    # one outbox row counting the 300 enqueues (seq, at, binding, kind, duration, n, top, bucket)
    assert [(e.at, e.kind, e.n, e.top, e.bucket) for e in events] == [(123.0, "enqueued", 300, None, None)]
    one = await store.autocommit(lambda tx: tx.insert_jobs(rows[:1], 124.0))

    async def read_one(tx: Tx) -> Any:
        return await tx.fetch("job_events", {"job_id": one[0]})

    assert [(e.at, e.kind, e.attempt) for e in await store.transact(read_one, exclusive=False)] == [
        (124.0, "enqueued", 0)
    ]  # an event alone names its job


def json_to(row: Any) -> str:
    import json

    return str(json.loads(next(v for v in row if isinstance(v, str) and v.startswith('{"to"')))["to"])


async def test_a_streamed_insert_cut_off_midway_is_retried_whole_once(store: PostgresStore) -> None:
    """The connection dies after the first chunks went out: the transaction runs again from the start,
    the chunks are built again, and every job exists exactly once."""
    from jobloom.engine import coordinator

    tries = 0

    async def work(tx: Tx) -> list[int]:
        nonlocal tries
        tries += 1

        def chunks() -> Iterator[list[Any]]:
            for c in range(4):
                if c == 2 and tries == 1:
                    _terminate(tx.conn.info.backend_pid)  # type: ignore[attr-defined]
                yield [new_job(payload=f'{{"to": "{c}-{i}"}}') for i in range(50)]

        return await coordinator.enqueue_streamed(tx, chunks(), time.time())

    ids = await store.transact(work)
    assert tries == 2

    async def read(tx: Tx) -> Any:
        return [await tx.fetchone("get_job", {"id": i}) for i in ids], await tx.fetch("count_by_state")

    jobs, counts = await store.transact(read, exclusive=False)
    assert [json_to(j) for j in jobs] == [f"{c}-{i}" for c in range(4) for i in range(50)]
    assert counts == [("SendMail", "queued", 200)]


def _terminate(pid: int) -> None:
    """End backend ``pid`` and wait until it is gone (``pg_terminate_backend`` only signals)."""
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        deadline = time.monotonic() + 10
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
            assert time.monotonic() < deadline, f"backend {pid} still there after 10 s"
            time.sleep(0.01)


async def test_autocommit_replaces_a_pooled_connection_the_server_closed(postgres_url: str) -> None:
    store = PostgresStore(postgres_url, pool_min=1, pool_max=1)
    try:
        await store.migrate()
        row = {**new_job().params(IDENTITY), "event": "enqueued"}
        await store.autocommit(lambda tx: tx.insert_jobs([row], time.time()))
        _terminate(await store.autocommit(_pid))
        # the idle connection is dead: it is noticed before the statement goes out, not reported as unknown
        ids = await store.autocommit(lambda tx: tx.insert_jobs([row], time.time()))
        assert len(ids) == 1
    finally:
        await store.close()


async def _pid(tx: Tx) -> int:
    return int(tx.conn.info.backend_pid)  # type: ignore[attr-defined]


async def test_insert_many_returns_ids_in_row_order(store: PostgresStore) -> None:
    rows = [new_job(payload=f'{{"to": "{i}"}}').params(IDENTITY) for i in range(50)]
    ids = await store.transact(lambda tx: tx.insert_many("insert_job", rows))
    assert len(set(ids)) == 50
    for i, job_id in enumerate(ids):
        row = await store.transact(lambda tx, job_id=job_id: tx.fetchone("get_job", {"id": job_id}))
        assert row is not None and row[3] == f'{{"to": "{i}"}}'


class _Quick(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class _RoundTrips:
    """Counts what goes to the server and waits for its answer: a pipeline's sync, or a statement
    outside a pipeline."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        self.on = False
        execute, pipeline = psycopg.AsyncConnection.execute, psycopg.AsyncConnection.pipeline
        trips = self

        async def counted_execute(conn: Any, *args: Any, **kwargs: Any) -> Any:
            if trips.on and conn.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF:
                trips.n += 1
            return await execute(conn, *args, **kwargs)

        @contextlib.asynccontextmanager
        async def counted_pipeline(conn: Any) -> AsyncIterator[Any]:
            outer = conn.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF
            async with pipeline(conn) as p:
                yield p
            if trips.on and outer:
                trips.n += 1

        monkeypatch.setattr(psycopg.AsyncConnection, "execute", counted_execute)
        monkeypatch.setattr(psycopg.AsyncConnection, "pipeline", counted_pipeline)


async def test_an_idle_worker_claims_a_job_in_two_round_trips(postgres_url: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Woken for a job, a worker's cycle sends its reads with the binding's candidates, then its claim
    with the started event and ``COMMIT``: the job starts after two round trips, not four."""
    trips = _RoundTrips(monkeypatch)
    app = jobloom.App(postgres_url, performers=[_Quick], auto_migrate=True)
    try:
        store = await app.store()
        worker = jobloom.Worker(app, concurrency=4)
        await worker.cycle.run(claim=True)  # reads the binding: unlimited, so read ahead from now on
        job = await app.enqueue(_Quick, {})
        trips.on = True
        claimed = (await worker.cycle.run(claim=True)).claimed
        trips.on = False
        assert [(c.id, c.attempt) for c in claimed] == [(job.id, 1)]
        assert trips.n == 2
        await eventually(lambda: worker.completer.outcomes, timeout=10, what="the job finished")
        events = await store.transact(lambda tx: tx.fetch("job_events", {"job_id": job.id}))
        assert [(e.kind, e.attempt) for e in events] == [("enqueued", 0), ("started", 1)]  # one start names its job
        await worker.cycle.run(claim=False)
        assert (await app.get_job(job.id)).state == "succeeded"
    finally:
        await app.close()


async def test_a_deferred_claim_goes_out_with_the_next_round_trip(store: PostgresStore) -> None:
    """``Tx.claim`` sends nothing by itself: its rows are there once the next round trip is over (a
    flush here; in a worker's cycle, the ``COMMIT``), and its started event with them."""
    ids = await store.autocommit(lambda tx: tx.insert_jobs([{**new_job().params(IDENTITY), "event": "enqueued"}] * 3,
                                                           time.time()))

    async def work(tx: Tx) -> list[tuple[int, int]]:
        later = await tx.claim({"ids": ids, "worker": "w", "lease_expires": time.time() + 60, "now": 5.0})
        with pytest.raises(StoreError, match="read before the statement was sent"):
            later.rows()
        await tx.flush()
        return sorted((r.id, r.attempt) for r in later.rows())

    assert await store.transact(work) == [(i, 1) for i in sorted(ids)]
    events = await store.transact(lambda tx: tx.fetch("project_events", {"limit": 10}), exclusive=False)
    assert [(e.kind, e.n, e.at) for e in events if e.kind == "started"] == [("started", 3, 5.0)]
