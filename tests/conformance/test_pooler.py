"""PostgreSQL behind PgBouncer in transaction pooling mode (``tests/pg_bouncer.py``): the store finds
the pooler, keeps no session state, says once that it polls without ``listen_url``, and with one is
woken through a direct connection; an enqueue inside the application's own transaction holds."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import psycopg
import pytest

import jobloom
from jobloom.store.postgres.listen import Subscription
from jobloom.store.postgres.pooler import POLL_INTERVAL, PollingWakeups
from jobloom.store.postgres.store import PostgresStore

pytestmark = pytest.mark.postgres


class Add(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        return int(payload["a"]) + int(payload["b"])


def _direct(pgbouncer: Any, url: str) -> str:
    """``url`` (through PgBouncer) straight to the server."""
    from tests.conftest import POSTGRES_URL

    return POSTGRES_URL + "?" + url.split("?", 1)[1]


async def test_through_pgbouncer_the_store_polls_and_says_so_once(
        pgbouncer_url: str, caplog: pytest.LogCaptureFixture) -> None:
    app = jobloom.App(pgbouncer_url, performers=[Add], auto_migrate=True)
    try:
        with caplog.at_level(logging.WARNING, logger="jobloom.store.postgres"):
            store = await app.store()
            assert isinstance(store, PostgresStore) and store.pooled
            job = await app.enqueue(Add, {"a": 1, "b": 2})
            worker = jobloom.Worker(app, concurrency=4)
            task = asyncio.create_task(worker.run())
            try:
                done = await app.wait(job.id, timeout=30)
                assert done.result == 3
            finally:
                worker.stop()
                await task
        said = [r.getMessage() for r in caplog.records if "connection pooler" in r.getMessage()]
        assert len(said) == 1 and f"every {POLL_INTERVAL:.0f} s" in said[0], said
        wake = await store.wakeups()
        assert isinstance(wake, PollingWakeups)
    finally:
        await app.close()


async def test_with_listen_url_a_worker_behind_pgbouncer_is_woken_by_notify(pgbouncer: Any,
                                                                          pgbouncer_url: str) -> None:
    app = jobloom.App(pgbouncer_url, performers=[Add], auto_migrate=True, listen_url=_direct(pgbouncer, pgbouncer_url))
    try:
        store = await app.store()
        wake = await store.wakeups()
        assert isinstance(wake, Subscription)
        try:
            await app.enqueue(Add, {"a": 2, "b": 2})  # its NOTIFY goes through the pooler to the server
            assert await wake.wait(30.0)
        finally:
            await wake.close()
    finally:
        await app.close()


async def test_enqueue_in_the_applications_own_transaction_through_pgbouncer(pgbouncer_url: str) -> None:
    app = jobloom.App(pgbouncer_url, performers=[Add], auto_migrate=True)
    try:
        await app.store()
        plain = pgbouncer_url.split("?", 1)[0]  # the application's own connection, through the pooler too
        async with await psycopg.AsyncConnection.connect(plain, prepare_threshold=None) as conn:
            async with conn.transaction():
                kept = await app.enqueue(Add, {"a": 1, "b": 1}, connection=conn)
            with pytest.raises(RuntimeError):
                async with conn.transaction():
                    await app.enqueue(Add, {"a": 5, "b": 5}, connection=conn)
                    raise RuntimeError("the application's transaction fails")
        assert (await app.get_job(kept.id)).state == "queued"
        assert [j.id for j in (await app.list_jobs(binding="Add")).jobs] == [kept.id]
        await app.drain()
        assert (await app.get_job(kept.id)).result == 2
    finally:
        await app.close()


async def test_jobloom_worker_listen_url_reaches_the_worker_process(pgbouncer: Any, pgbouncer_url: str,
                                                                      tmp_path: Any) -> None:
    """``jobloom worker APP --listen-url URL`` behind PgBouncer: the worker process listens on the direct
    URL (no word of polling), and runs what is enqueued through the pooler."""
    import os
    import subprocess
    import sys

    (tmp_path / "poolapp.py").write_text(
        "import os\nimport jobloom\n\n\nclass Add(jobloom.Performer[dict, int]):\n"
        "    async def perform(self, payload: dict) -> int:\n        return payload['a'] + payload['b']\n\n\n"
        "app = jobloom.App(os.environ['POOL_URL'], performers=[Add], auto_migrate=True)\n")
    app = jobloom.App(pgbouncer_url, performers=[Add], auto_migrate=True)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "POOL_URL": pgbouncer_url}
    log = tmp_path / "worker.log"
    proc = subprocess.Popen([sys.executable, "-m", "jobloom.cli", "worker", "poolapp:app", "--log-level", "warning",
                             "--listen-url", _direct(pgbouncer, pgbouncer_url)], cwd=tmp_path, env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        job = await app.enqueue(Add, {"a": 20, "b": 22})
        assert (await app.wait(job.id, timeout=60)).result == 42
        assert "connection pooler" not in log.read_text(), log.read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        await app.close()
