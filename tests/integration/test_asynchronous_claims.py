"""``asynchronous_claims``: an at-least-once direct claim committed without its flush, lost in a real
server crash (PostgreSQL, a private server whose WAL writer waits 10 s, stopped with ``-m immediate``).

The job runs again, and the re-run's claim takes the lost claim's attempt number. Whenever the first
run reports (before the re-run is claimed, or while it runs), its report is stale: the job ends with the
re-run's outcome, and its history holds the re-run's row alone. An at-most-once claim stays durable."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

import jobloom
from tests.conftest import INSTALL_POSTGRES, require_module
from tests.helpers import eventually
from tests.pg_private import PrivateServer

pytestmark = pytest.mark.slow
psycopg = require_module("psycopg", INSTALL_POSTGRES)

GATES: dict[int, asyncio.Event] = {}
RAN: list[int] = []


class Gate(jobloom.Performer[dict[str, Any], str]):
    """Each run waits for its gate (``GATES[n]``, the n-th run) and returns ``"run n"``."""

    async def perform(self, payload: dict[str, Any]) -> str:
        RAN.append(len(RAN) + 1)
        n = len(RAN)
        await GATES.setdefault(n, asyncio.Event()).wait()
        return f"run {n}"


class Once(jobloom.Performer[dict[str, Any], str]):
    delivery = "at_most_once"

    async def perform(self, payload: dict[str, Any]) -> str:
        return "once"


@pytest.fixture
def server() -> Iterator[PrivateServer]:
    RAN.clear()
    GATES.clear()
    s = PrivateServer(settings=("wal_writer_delay=10000ms", "wal_writer_flush_after=0"))
    try:
        yield s
    finally:
        s.destroy()


def row(url: str, job_id: int) -> tuple[Any, ...]:
    """The job's state, attempt, lease owner and result, read on a connection of its own."""
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute("SELECT state, attempt, lease_owner, result FROM jobloom_jobs WHERE id = %s",
                             (job_id,)).fetchone()
        assert found is not None
        return tuple(found)


def history(url: str, job_id: int) -> list[tuple[Any, ...]]:
    """The job's attempt rows: attempt, worker, outcome."""
    with psycopg.connect(url, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(
            "SELECT attempt, worker, outcome FROM jobloom_attempts WHERE job_id = %s ORDER BY attempt",
            (job_id,)).fetchall()]


async def cycle(worker: jobloom.Worker, *, claim: bool) -> None:
    """One cycle, tried again while the pool still hands out connections the crash ended."""
    for _ in range(10):
        try:
            await worker.cycle.run(claim=claim)
            return
        except Exception:  # a pooled connection that the server's crash closed
            await asyncio.sleep(0.1)
    await worker.cycle.run(claim=claim)


async def finish(worker: jobloom.Worker, run: int, what: str, *, claim: bool = False) -> None:
    """Open the gate of the ``run``-th run, wait for its outcome on ``worker`` and report it in a cycle
    (which claims too if ``claim``)."""
    GATES[run].set()
    await eventually(lambda: len(worker.completer.outcomes) == 1, what=what)
    await cycle(worker, claim=claim)


def assert_the_re_run_won(url: str, job_id: int, worker: str) -> None:
    """The job ended with the re-run's result, and its history holds the re-run's row alone."""
    assert row(url, job_id) == ("succeeded", 1, None, '"run 2"')
    assert history(url, job_id) == [(1, worker, "succeeded")]


async def lost_claim(url: str, server: PrivateServer) -> tuple[jobloom.App, jobloom.Worker, int]:
    """An app with ``asynchronous_claims``, whose worker w1 claimed an at-least-once job directly and
    an at-most-once one too, and the server crashed after both claims; the at-least-once job's id."""
    app = jobloom.App(url, performers=[Gate, Once], auto_migrate=True, lease=60, asynchronous_claims=True)
    await app.register_bindings(["Gate", "Once"])
    w1 = jobloom.Worker(app, concurrency=4, bindings=["Gate", "Once"], name="w1")
    await w1.cycle.run(claim=True)
    once = await app.enqueue(Once, {})
    assert await w1.cycle.run_direct(once.id, "Once") is not None
    await eventually(lambda: len(w1.completer.outcomes) == 1, what="the at-most-once job ran")
    w1.completer.outcomes.clear()  # its report is never sent: its claim alone is what the test looks at
    job = await app.enqueue(Gate, {})
    assert await w1.cycle.run_direct(job.id, "Gate") is not None
    await eventually(lambda: len(RAN) == 1, what="the first run started")
    assert row(url, job.id)[:3] == ("running", 1, "w1")
    server.stop("immediate")
    server.start()
    assert row(url, once.id)[:3] == ("running", 1, "w1")  # the at-most-once claim was flushed
    assert row(url, job.id) == ("queued", 0, None, None)  # the at-least-once claim was lost
    return app, w1, job.id


async def test_the_first_runs_late_report_does_not_end_the_re_run(server: PrivateServer) -> None:
    url = server.url
    app, w1, job_id = await lost_claim(url, server)
    try:
        w2 = jobloom.Worker(app, concurrency=4, bindings=["Gate"], name="w2")
        await cycle(w2, claim=True)
        await eventually(lambda: len(RAN) == 2, what="the re-run started")
        assert row(url, job_id)[:3] == ("running", 1, "w2")  # the lost claim's attempt number again

        await finish(w1, 1, "the first run's outcome")  # the first run ends, and w1 reports it
        assert row(url, job_id) == ("running", 1, "w2", None)
        assert history(url, job_id) == []

        await finish(w2, 2, "the re-run's outcome")
        assert_the_re_run_won(url, job_id, "w2")
    finally:
        await app.close()


async def test_the_first_run_reporting_before_the_re_run_leaves_no_history(server: PrivateServer) -> None:
    url = server.url
    app, w1, job_id = await lost_claim(url, server)
    try:
        # the first run ends before any re-run (the job is queued, at attempt 0); the cycle sends its
        # report, stale, and the same worker claims the re-run
        await finish(w1, 1, "the first run's outcome", claim=True)
        assert history(url, job_id) == []
        await eventually(lambda: len(RAN) == 2, what="the re-run started")
        assert row(url, job_id)[:3] == ("running", 1, "w1")

        await finish(w1, 2, "the re-run's outcome")
        assert_the_re_run_won(url, job_id, "w1")
    finally:
        await app.close()
