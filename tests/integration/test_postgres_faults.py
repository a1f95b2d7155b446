"""Faults between the workers and the store: the store restarts under running workers, a report's commit
acknowledgement is lost, workers back off while the server is down and start over once it is back.

Tests that stop or restart PostgreSQL run a private server of their own (``tests/pg_private.py``),
never the shared one. Every worker process a test starts is killed at its end, even when it fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import re
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import jobloom
from jobloom.store.base import Store, Tx
from tests.conftest import INSTALL_POSTGRES, require_module
from tests.helpers import eventually
from tests.pg_private import PrivateServer, private_server_fixture

from .conftest import Processes
from .itapp import LoggedAtLeastOnce, LoggedAtMostOnce

pytestmark = pytest.mark.slow
private_server = private_server_fixture


# -- worker processes on a private server ----------------------------------------------------------


class LoggedProcesses(Processes):
    """Worker processes of ``itapp`` whose stderr goes to ``worker-N.log`` in the test's folder."""

    def __init__(self, url: str, state_dir: Path) -> None:
        super().__init__(url, state_dir)
        self.logs: dict[int, Path] = {}

    def worker(self, *, concurrency: int = 16, grace: float = 5.0, lease: float = 1.0,
               log_level: str = "warning") -> Any:
        env = {**self.env, "JOBLOOM_IT_LEASE": str(lease)}
        log = self.state_dir / f"worker-{len(self.procs)}.log"
        proc = self.spawn(["itapp:app", "--concurrency", str(concurrency), "--grace", str(grace), "--log-level",
                           log_level], env, stderr=log)
        self.logs[proc.pid] = log
        return proc

    def log(self, proc: subprocess.Popen[bytes], since: int = 0) -> str:
        """The worker's stderr from byte offset ``since``."""
        with open(self.logs[proc.pid], "rb") as f:
            f.seek(since)
            return f.read().decode(errors="replace")

    def log_size(self, proc: subprocess.Popen[bytes]) -> int:
        """The current length of the worker's stderr log (an offset for :meth:`log`)."""
        return self.logs[proc.pid].stat().st_size

    def tail(self, proc: subprocess.Popen[bytes], lines: int = 40) -> str:
        """The last lines of the worker's stderr, for failure messages."""
        return "\n".join(self.log(proc).splitlines()[-lines:])


@pytest.fixture
def pg_procs(private_server: PrivateServer, tmp_path: Path) -> Iterator[LoggedProcesses]:
    """Worker processes on the test's private server, killed at the end of the test."""
    require_module("psycopg", INSTALL_POSTGRES)
    p = LoggedProcesses(private_server.url, tmp_path)
    try:
        yield p
    finally:
        p.cleanup()


@pytest.fixture
async def pg_app(private_server: PrivateServer) -> AsyncIterator[jobloom.App]:
    """The test's own client of the private server (it migrates the store before any worker starts)."""
    app = jobloom.App(private_server.url, performers=[LoggedAtLeastOnce, LoggedAtMostOnce], auto_migrate=True,
                      lease=2.0)
    await app.store()
    try:
        yield app
    finally:
        await app.close()


async def _jobs(app: jobloom.App, binding: str) -> dict[int, jobloom.Job]:
    """Every job of a binding, by id (read page by page)."""
    out: dict[int, jobloom.Job] = {}
    before: int | None = None
    while True:
        page = await app.list_jobs(binding=binding, limit=1000, before=before)
        if not page:
            return out
        out.update((j.id, j) for j in page)
        before = min(j.id for j in page)


async def _succeeded(app: jobloom.App) -> int:
    return sum(c.get("succeeded", 0) for c in (await app.counts(finished=True)).values())


def _starts(procs: Processes, name: str) -> Counter[int]:
    """How many times each job id was started, from a performer's start file (``job_id attempt pid``)."""
    return Counter(int(line.split()[0]) for line in procs.read(name))


# -- 1. a restart under four busy workers ------------------------------------------------------------


@pytest.mark.postgres
async def test_postgres_restart_under_four_workers(
    private_server: PrivateServer, pg_procs: LoggedProcesses, pg_app: jobloom.App
) -> None:
    first = await pg_app.enqueue_many([(LoggedAtLeastOnce, {"i": i}) for i in range(1500)])
    first += await pg_app.enqueue_many([(LoggedAtMostOnce, {"i": i}) for i in range(500)])
    workers = [pg_procs.worker(concurrency=16, lease=2.0) for _ in range(4)]

    async def at_least_300() -> bool:
        return await _succeeded(pg_app) >= 300

    await eventually(at_least_300, timeout=90, interval=0.05, what="300 jobs succeeded")

    # 200 more jobs from here, while the server goes down and comes back: an enqueue that fails is
    # tried again, and only the acknowledged ones count (a failed one may or may not have committed)
    acknowledged: list[int] = []
    errors: list[str] = []
    restarted = asyncio.Event()
    client = jobloom.App(private_server.url, performers=[LoggedAtLeastOnce, LoggedAtMostOnce], lease=2.0,
                         retry_deadline=1.0)

    async def enqueue_more() -> None:
        i = 0
        while len(acknowledged) < 200:
            performer = LoggedAtMostOnce if i % 4 == 0 else LoggedAtLeastOnce
            i += 1
            try:
                job = await client.enqueue(performer, {"more": i})
            except Exception as exc:  # the server is down: try again, a little later
                errors.append(f"{type(exc).__name__}: {exc}")
                assert len(errors) < 500, f"enqueue kept failing: {errors[-1]}"
                await asyncio.sleep(0.05)
                continue
            acknowledged.append(job.id)
            if len(acknowledged) == 100:
                await restarted.wait()  # the second half goes in once the server is back

    more: asyncio.Task[None] | None = None
    try:
        await client.store()
        more = asyncio.create_task(enqueue_more())
        await eventually(lambda: len(acknowledged) >= 20, timeout=30, what="enqueueing before the restart")
        await asyncio.to_thread(private_server.stop, "immediate")  # a crash: sessions die mid-transaction
        await eventually(lambda: all(_refused(pg_procs, w) >= 3 for w in workers), timeout=30,
                         what="every worker tried to reconnect and was refused")
        await asyncio.to_thread(private_server.start)
        restarted.set()
        await asyncio.wait_for(asyncio.shield(more), 120)
    finally:
        restarted.set()
        if more is not None and not more.done():
            more.cancel()
            with contextlib.suppress(BaseException):
                await more
        await client.close()

    expected = {j.id for j in first} | set(acknowledged)

    async def settled() -> bool:
        least = await _jobs(pg_app, "LoggedAtLeastOnce")
        most = await _jobs(pg_app, "LoggedAtMostOnce")
        return expected <= set(least) | set(most) and all(j.state == "succeeded" for j in least.values()) and all(
            j.state in ("succeeded", "stalled") for j in most.values()
        )

    try:
        await eventually(settled, timeout=180, interval=0.5, what="every job finished")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; counts: {await pg_app.counts(finished=True)}\n"
                             f"{_unfinished(private_server.url, pg_procs, workers)}") from None
    least = await _jobs(pg_app, "LoggedAtLeastOnce")
    most = await _jobs(pg_app, "LoggedAtMostOnce")
    missing = expected - set(least) - set(most)
    assert not missing, f"acknowledged jobs lost: {sorted(missing)[:20]} (enqueue errors: {errors[:3]})"
    assert all(j.state == "succeeded" for j in least.values())
    assert all(j.state in ("succeeded", "stalled") for j in most.values())
    started_least = _starts(pg_procs, "starts-least")
    assert set(least) <= set(started_least), "a succeeded at-least-once job has no recorded start"
    twice = {job_id: n for job_id, n in _starts(pg_procs, "starts-most").items() if n > 1}
    assert not twice, f"at-most-once jobs started more than once: {twice}"
    for w in workers:  # the same processes: they reconnected rather than crashed and were restarted
        assert w.poll() is None, f"worker {w.pid} exited with {w.returncode}:\n{pg_procs.tail(w)}"
    for w in workers:
        w.send_signal(signal.SIGTERM)
    for w in workers:
        assert w.wait(timeout=30) == 0, pg_procs.tail(w)


def _unfinished(url: str, procs: LoggedProcesses, workers: list[subprocess.Popen[bytes]]) -> str:
    """What a failure message needs to tell why jobs did not finish: the unfinished jobs' rows and
    attempts, the server's clock, its sessions, and each worker's last log lines."""
    import psycopg

    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        now = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        out.append(f"server clock: {now[0] if now else None}")
        for row in conn.execute(
                "SELECT id, binding, state, attempt, lease_owner, lease_expires, run_at FROM jobloom_jobs "
                "WHERE state NOT IN ('succeeded', 'stalled') ORDER BY id LIMIT 20").fetchall():
            out.append(f"job {row}")
            for a in conn.execute("SELECT attempt, worker, started_at, finished_at, outcome FROM jobloom_attempts "
                                  "WHERE job_id = %s ORDER BY attempt", [row[0]]).fetchall():
                out.append(f"  attempt {a}")
        for row in conn.execute("SELECT pid, state, xact_start, wait_event_type, wait_event, left(query, 120) "
                                "FROM pg_stat_activity WHERE datname = current_database()").fetchall():
            out.append(f"session {row}")
    for w in workers:
        out.append(f"-- worker {w.pid} (exit {w.poll()}):\n{procs.tail(w, 25)}")
    return "\n".join(out)


def _refused(procs: LoggedProcesses, proc: subprocess.Popen[bytes], since: int = 0) -> int:
    """How many connection attempts of a worker process found the server down."""
    return procs.log(proc, since).count("Connection refused")


# -- 2. a report whose commit acknowledgement was lost -----------------------------------------------


STARTS: Counter[tuple[int, int]] = Counter()  # (job id, attempt) -> starts, in this process


class Recorded(jobloom.Performer[dict[str, Any], int]):
    """Counts its starts in ``STARTS``."""

    async def perform(self, payload: dict[str, Any]) -> int:
        STARTS[(self.ctx.job_id, self.ctx.attempt)] += 1
        return self.ctx.attempt


def _transient_error(store: Store) -> Exception:
    """The error the store's driver raises when the connection breaks (or the disk fails) at commit."""
    if store.dialect == "postgres":
        import psycopg

        return psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly")
    return sqlite3.OperationalError("disk I/O error")


def _is_cycle_with_outcomes(fn: Callable[..., Any], worker: jobloom.Worker) -> bool:
    return "Cycle.run." in fn.__qualname__ and bool(worker.completer.outcomes)


async def _events(store: Store, job_id: int) -> list[str]:
    async def work(tx: Tx) -> list[tuple[Any, ...]]:
        return await tx.fetch("job_events", {"job_id": job_id})

    return [r[4] for r in await store.transact(work, exclusive=False)]


async def _run_two_jobs(app: jobloom.App, worker: jobloom.Worker) -> tuple[jobloom.Job, jobloom.Job]:
    """Job A (at least once), then job B (at most once): the cycle that reports A claims B."""
    STARTS.clear()
    a = await app.enqueue(Recorded, {"n": 1})
    b = await app.enqueue(Recorded, {"n": 2}, delivery="at_most_once")
    running = asyncio.create_task(worker.run())
    try:
        done_a = await app.wait(a.id, timeout=30)
        done_b = await app.wait(b.id, timeout=30)
    finally:
        worker.stop()
        await asyncio.wait_for(running, 30)
    return done_a, done_b


async def test_a_report_whose_commit_acknowledgement_was_lost_is_applied_once(
    store_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="jobloom.worker")
    app = jobloom.App(store_url, performers=[Recorded], auto_migrate=True, lease=5.0)
    app.housekeepers = [h for h in app.housekeepers if h.name != "projector"]  # the outbox keeps its events
    try:
        store = await app.store()
        worker = jobloom.Worker(app, concurrency=1)
        original = store.transact
        lost: list[str] = []

        async def transact(fn: Callable[[Tx], Awaitable[Any]], *, exclusive: bool = True) -> Any:
            carries = _is_cycle_with_outcomes(fn, worker)
            result = await original(fn, exclusive=exclusive)  # committed
            if carries and not lost:
                lost.append(repr(worker.completer.outcomes))
                raise _transient_error(store)  # ... but the worker never hears so
            return result

        monkeypatch.setattr(store, "transact", transact)
        a, b = await _run_two_jobs(app, worker)
        monkeypatch.undo()

        assert lost, "no transaction carrying an outcome was made to fail"
        messages = [r.getMessage() for r in caplog.records]
        assert any(m.startswith("jobloom cycle failed (OperationalError") for m in messages), messages
        # the report was retried: applied once, its duplicate neither applied again nor recorded as stale
        assert a.state == "succeeded" and a.attempt == 1 and a.result == 1
        attempts = await app.attempts(a.id)
        assert [(x.attempt, x.outcome, x.reported_outcome) for x in attempts] == [(1, "succeeded", None)]
        events = await _events(store, a.id)
        assert events.count("succeeded") == 1, events
        assert events == ["enqueued", "started", "succeeded"]
        # the job claimed by that same transaction was given back, then ran once
        assert any("released 1 job(s)" in m for m in messages), messages
        assert b.state == "succeeded" and b.attempt == 1
        assert STARTS[(b.id, 1)] == 1 and STARTS[(a.id, 1)] == 1
        assert await _events(store, b.id) == ["enqueued", "started", "released", "started", "succeeded"]
    finally:
        await app.close()


_IN_CYCLE: contextvars.ContextVar[bool] = contextvars.ContextVar("in_cycle", default=False)


@pytest.mark.postgres
async def test_a_commit_acknowledgement_lost_inside_the_postgres_store_orphans_no_claim(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    app = jobloom.App(postgres_url, performers=[Recorded], auto_migrate=True, lease=1.0)
    app.housekeepers = [h for h in app.housekeepers if h.name != "projector"]  # the outbox keeps its events
    try:
        store = await app.store()
        worker = jobloom.Worker(app, concurrency=1)
        original = store.transact
        from jobloom.store.postgres.tx import PostgresTx

        original_commit = PostgresTx.commit
        lost: list[int] = []

        async def transact(fn: Callable[[Tx], Awaitable[Any]], *, exclusive: bool = True) -> Any:
            token = _IN_CYCLE.set(_is_cycle_with_outcomes(fn, worker))
            try:
                return await original(fn, exclusive=exclusive)
            finally:
                _IN_CYCLE.reset(token)

        async def commit_then_lose_the_ack(self: PostgresTx) -> None:
            await original_commit(self)
            if _IN_CYCLE.get() and not lost:
                lost.append(1)  # COMMIT went through; the connection broke before its answer came
                raise psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly")

        monkeypatch.setattr(store, "transact", transact)
        monkeypatch.setattr(PostgresTx, "commit", commit_then_lose_the_ack)
        a, b = await _run_two_jobs(app, worker)
        monkeypatch.undo()

        assert lost
        assert a.state == "succeeded" and a.attempt == 1
        assert [(x.attempt, x.outcome, x.reported_outcome) for x in await app.attempts(a.id)] == [
            (1, "succeeded", None)
        ]
        assert (b.state, STARTS[(b.id, 1)]) == ("succeeded", 1), await _events(store, b.id)
    finally:
        await app.close()


# -- 3. backing off while the server is down, starting over once it is back ----------------------------


_LISTEN_RETRY = re.compile(r"LISTEN reconnect failed .*?; next try in ([0-9.]+) s", re.S)
_CYCLE_FAILED = re.compile(r"jobloom cycle failed \((\w+):")
_POOL_REFUSED = re.compile(
    r"^(\S+ \S+(?: [+-]\d{4})?) WARNING psycopg\.pool error connecting[^\n]*Connection refused", re.M)


def _listen_delays(text: str) -> list[float]:
    return [float(x) for x in _LISTEN_RETRY.findall(text)]


def _doubling(n: int, start: float = 0.05, cap: float = 5.0) -> list[float]:
    return [min(start * 2**k, cap) for k in range(n)]


@pytest.mark.postgres
async def test_workers_back_off_while_the_server_is_down(
    private_server: PrivateServer, pg_procs: LoggedProcesses, pg_app: jobloom.App
) -> None:
    worker = pg_procs.worker(concurrency=4, lease=2.0, log_level="debug")

    async def succeeded(n: int) -> bool:
        return await _succeeded(pg_app) >= n

    def log_since(at: int) -> str:
        return pg_procs.log(worker, at)

    total = 0
    for outage in (1, 2):
        # the server goes down under a busy worker, with jobs still queued
        await pg_app.enqueue_many([(LoggedAtLeastOnce, {"outage": outage}) for _ in range(300)])
        await eventually(partial(succeeded, total + 20), timeout=60, what="the worker is busy")
        total += 300
        since = pg_procs.log_size(worker)
        await asyncio.to_thread(private_server.stop, "fast")

        # down until the LISTEN reconnect delay has grown from 0.05 s to 3.2 s (some 3 s in all)
        seven = partial(lambda at: len(_listen_delays(log_since(at))) >= 7, since)
        await eventually(seven, timeout=30, what="seven failed reconnects")
        text = pg_procs.log(worker, since)
        delays = _listen_delays(text)
        # exponential, and from the smallest delay again after the last outage: reset by the success
        assert delays[:7] == _doubling(7), delays
        refused = _POOL_REFUSED.findall(text)  # the pool reconnects with its own backoff (1 s, doubling)
        assert 1 <= len(refused) <= 30, f"{len(refused)} connection attempts in ~3 s: not backing off"
        # the store waited for the server instead of failing cycles; the one failure an outage may cause is a
        # COMMIT in flight when the server went down, which nobody can decide (the worker then releases orphans)
        failed = _CYCLE_FAILED.findall(text)
        assert set(failed) <= {"CommitUnknown"} and len(failed) <= 1, failed

        await asyncio.to_thread(private_server.start)
        back = partial(lambda at: "LISTEN connection re-established" in log_since(at), since)
        await eventually(back, timeout=30, what="the LISTEN connection is back")
        await eventually(partial(succeeded, total), timeout=60, what=f"{total} jobs succeeded after the outage")
        assert worker.poll() is None, pg_procs.tail(worker)

    jobs = await _jobs(pg_app, "LoggedAtLeastOnce")
    assert len(jobs) == total and all(j.state == "succeeded" for j in jobs.values())
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, pg_procs.tail(worker)


async def test_a_failing_cycle_backs_off_exponentially_and_starts_over_after_a_success(
    store_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's own backoff (a cycle that fails: store unreachable) grows, and resets on success;
    each outage is one ``store_lost`` record and one ``store_back``."""
    caplog.set_level(logging.INFO, logger="jobloom.worker")
    app = jobloom.App(store_url, performers=[Recorded], auto_migrate=True, lease=5.0)
    client = jobloom.App(store_url, performers=[Recorded], auto_migrate=True, lease=5.0)
    try:
        store = await app.store()
        await client.store()
        down = False
        original = store.transact

        async def transact(fn: Callable[[Tx], Awaitable[Any]], *, exclusive: bool = True) -> Any:
            if down:
                raise _transient_error(store)
            return await original(fn, exclusive=exclusive)

        monkeypatch.setattr(store, "transact", transact)
        worker = jobloom.Worker(app, concurrency=4)
        running = asyncio.create_task(worker.run())

        def failures() -> list[float]:
            return [float(m.group(1)) for r in caplog.records
                    if (m := re.search(r"^jobloom cycle failed .*; retrying in ([0-9.]+) s$", r.getMessage()))]

        async def all_succeeded(n: int) -> bool:
            return await _succeeded(client) == n

        try:
            await client.enqueue_many([(Recorded, {}) for _ in range(5)])
            await eventually(lambda: all_succeeded(5), timeout=30, what="5 jobs succeeded")
            down = True
            await client.enqueue_many([(Recorded, {}) for _ in range(5)])  # wakes the worker up
            await eventually(lambda: len(failures()) >= 6, timeout=30, what="six failed cycles")
            down = False
            await eventually(lambda: all_succeeded(10), timeout=30, what="10 jobs succeeded")
            first = failures()
            assert first[:6] == _doubling(6), first
            events = [(r.event, r.levelname, getattr(r, "failed_cycles", None)) for r in caplog.records
                      if getattr(r, "event", None) in ("store_lost", "store_back")]
            assert events == [("store_lost", "WARNING", None), ("store_back", "INFO", len(first))], events
            assert all(r.worker == worker.name for r in caplog.records if getattr(r, "event", "").startswith("store"))

            caplog.clear()
            down = True
            await client.enqueue_many([(Recorded, {}) for _ in range(5)])
            await eventually(lambda: len(failures()) >= 3, timeout=30, what="three failed cycles")
            down = False
            await eventually(lambda: all_succeeded(15), timeout=30, what="15 jobs succeeded")
            assert failures()[:3] == _doubling(3), failures()  # from 0.05 s again: reset by the success
        finally:
            down = False
            worker.stop()
            await asyncio.wait_for(running, 30)
    finally:
        await client.close()
        await app.close()


@pytest.mark.postgres
@pytest.mark.serial
async def test_sigterm_stops_a_worker_within_its_grace_while_the_server_is_down(
    private_server: PrivateServer, pg_procs: LoggedProcesses, pg_app: jobloom.App
) -> None:
    """The store is failing (its server stopped): SIGTERM still ends the worker within its grace period
    and a small margin, whatever the store's own retries were doing."""
    job = await pg_app.enqueue(LoggedAtLeastOnce, {})
    worker = pg_procs.worker(grace=2.0)
    assert (await pg_app.wait(job.id, timeout=30)).state == "succeeded"
    await pg_app.close()
    await asyncio.to_thread(private_server.stop, "immediate")
    t0 = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    code = await asyncio.to_thread(worker.wait, 30)
    took = time.monotonic() - t0
    assert took < 2.0 + jobloom.engine.worker.ABANDON_MARGIN + 2.0, (took, pg_procs.tail(worker))
    assert code == 0, pg_procs.tail(worker)
