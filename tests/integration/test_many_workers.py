"""Many worker processes, few connections: 32 worker processes as ``jobloom worker --pool-max 2`` makes
them, against one PostgreSQL with ``max_connections`` as shipped (100), all connected, drain 1,000 jobs with a binding's
limit exact;
a worker whose connections do not fit the server's budget fails at start, saying so.

Both run on a private server (``tests/pg_private.py``): the shared test server's connections are other
tests' to use."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import jobloom
from jobloom.app.loading import POOL_MAX_ENV
from tests.helpers import eventually
from tests.pg_private import PrivateServer

from .conftest import Processes

pytestmark = pytest.mark.slow

PROCESSES = 32
POOL_MAX = 2
# enqueued once every worker is connected: all 32 contend for them; 400 runs of the limited binding,
# each 10 ms, keep the limit under contention for well over a second
NOOPS, GATED, LIMIT = 600, 400, 4
APP = '''
from __future__ import annotations

import asyncio
import fcntl
import os
from typing import Any

import jobloom

DIR = os.environ["JOBLOOM_MW_DIR"]


def gauge(delta: int) -> None:
    with open(os.path.join(DIR, "gauge"), "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        now, peak = (int(x) for x in (f.read().split() or ["0", "0"]))
        now += delta
        f.seek(0)
        f.truncate()
        f.write(f"{now} {max(peak, now)}")


class Noop(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        # a read of the store from the job: 20 at once in a process would take 20 of its connections
        # if its pool were not capped (the worker's own cycles alone never need more than two)
        await app.get_job(payload["i"] + 1)


class Gated(jobloom.Performer[dict[str, Any], None]):
    concurrency = 4

    async def perform(self, payload: dict[str, Any]) -> None:
        gauge(+1)
        try:
            await asyncio.sleep(0.01)
        finally:
            gauge(-1)


app = jobloom.App(os.environ["JOBLOOM_MW_URL"], performers=[Noop, Gated], auto_migrate=True)
'''


@pytest.fixture
def server() -> Iterator[PrivateServer]:
    s = PrivateServer()
    try:
        yield s
    finally:
        s.destroy()


def _env(folder: Path, url: str, name: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(folder), "JOBLOOM_MW_URL": url, "JOBLOOM_MW_DIR": str(folder),
            "PGAPPNAME": name}


def _worker(folder: Path, url: str, name: str, *args: str) -> subprocess.Popen[bytes]:
    """``jobloom worker mwapp:app ARGS``, the command itself."""
    return subprocess.Popen([sys.executable, "-m", "jobloom.cli", "worker", "mwapp:app", "--log-level", "warning",
                             *args], cwd=folder, env=_env(folder, url, name),
                            stdout=(folder / f"{name}.log").open("w"), stderr=subprocess.STDOUT)


def _forked_worker(spawner: Processes, url: str, name: str, pool_max: int, concurrency: int) -> Any:
    """The worker process ``jobloom worker mwapp:app --pool-max P`` becomes, started as the integration
    tests start theirs (:meth:`Processes.spawn`: forked from the test zygote unless the tests start every
    worker with ``exec``): the command passes ``--pool-max`` to its process in the environment, which the
    process applies itself. 32 commands started with ``exec`` spend most of this test's time importing
    jobloom twice each (the command, then the process); the command's own path is the next test's."""
    env = {**_env(spawner.state_dir, url, name), POOL_MAX_ENV: str(pool_max)}
    argv = ["mwapp:app", "--concurrency", str(concurrency), "--log-level", "warning"]
    return spawner.spawn(argv, env, stderr=spawner.state_dir / f"{name}.log")


async def _app(folder: Path, url: str) -> jobloom.App:
    """An app on ``url`` with the workers' performers (their module, written into ``folder``)."""
    (folder / "mwapp.py").write_text(APP)
    import importlib.util

    os.environ["JOBLOOM_MW_DIR"], os.environ["JOBLOOM_MW_URL"] = str(folder), url
    try:
        spec = importlib.util.spec_from_file_location("mwapp_for_test", folder / "mwapp.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        del os.environ["JOBLOOM_MW_DIR"], os.environ["JOBLOOM_MW_URL"]
    app = jobloom.App(url, auto_migrate=True, performers=[module.Noop, module.Gated])
    await app.migrate()
    return app


@pytest.mark.serial  # 32 processes on 2 cores: alone
async def test_32_worker_processes_with_capped_pools_drain_1000_jobs_with_exact_limits(
        server: PrivateServer, tmp_path: Path) -> None:
    app = await _app(tmp_path, server.url)
    procs: list[Any] = []  # tests.zygote.Forked, or subprocess.Popen
    peaks: dict[str, int] = {}
    total_peak = [0]
    sampling = threading.Event()

    def sample() -> None:  # the server's client connections, by worker process, every 50 ms
        with psycopg.connect(server.url, autocommit=True) as conn:
            while not sampling.is_set():
                rows = conn.execute("SELECT application_name, count(*) FROM pg_stat_activity "
                                    "WHERE backend_type = 'client backend' GROUP BY 1").fetchall()
                total_peak[0] = max(total_peak[0], sum(n for _, n in rows))
                for name, n in rows:
                    peaks[name] = max(peaks.get(name, 0), n)
                time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    try:
        sampler.start()
        launched = time.monotonic()
        spawner = Processes(server.url, tmp_path)
        procs = [_forked_worker(spawner, server.url, f"w{i}", POOL_MAX, 20) for i in range(PROCESSES)]
        await eventually(lambda: sum(name.startswith("w") for name in list(peaks)) == PROCESSES, timeout=120,
                         interval=0.2, what=f"all {PROCESSES} worker processes connected")
        started = time.monotonic()
        connected = started - launched
        await app.enqueue_many([("Noop", {"i": i}) for i in range(NOOPS)] + [("Gated", {"i": i}) for i in range(GATED)])

        async def drained() -> bool:
            counts = await app.counts(finished=True)
            done = sum(c.get("succeeded", 0) for c in counts.values())
            assert all(p.poll() is None for p in procs), "a worker process ended"
            return done == NOOPS + GATED

        await eventually(drained, timeout=900, interval=1.0, what=f"{NOOPS + GATED} jobs succeeded")
        took = time.monotonic() - started
    finally:
        sampling.set()
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=60)
        await app.close()
    counts = await _final_counts(server.url)
    assert counts == {"Noop": NOOPS, "Gated": GATED}
    now, peak = (int(x) for x in (tmp_path / "gauge").read_text().split())
    assert now == 0 and peak <= LIMIT, f"peak simultaneous Gated runs was {peak}, the limit is {LIMIT}"
    workers = {name: n for name, n in peaks.items() if name.startswith("w")}
    assert len(workers) == PROCESSES and max(workers.values()) <= POOL_MAX + 1, workers
    print(f"many workers: {PROCESSES} processes connected in {connected:.1f} s and drained {NOOPS + GATED} jobs in "
          f"{took:.1f} s; connections per "
          f"process at most {max(workers.values())}, the server's client connections at most {total_peak[0]}; "
          f"Gated peak {peak}")


async def _final_counts(url: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT binding, count(*) FROM jobloom_jobs WHERE state = 'succeeded' "
                            "GROUP BY 1").fetchall()
    return {b: int(n) for b, n in rows}


async def test_a_worker_whose_connections_do_not_fit_fails_at_start_naming_the_budget(tmp_path: Path) -> None:
    # two processes and no time bound (its waits only guard against a hang): it runs beside the others
    server = PrivateServer(settings=("max_connections=20",))
    try:
        app = await _app(tmp_path, server.url)
        await app.close()
        first = _worker(tmp_path, server.url, "first", "--pool-max", "10")  # 11 of 20
        await eventually(lambda: _connections(server.url, "first") == 11, timeout=60, what="the first worker's 11")
        second = _worker(tmp_path, server.url, "second", "--pool-max", "10")
        assert second.wait(timeout=60) == 1
        said = (tmp_path / "second.log").read_text()
        assert "not enough connections" in said and "max_connections=20" in said, said
        assert "needs 11 (10 pooled + 1 listening for wake-ups)" in said, said
        assert first.poll() is None
        first.terminate()
        first.wait(timeout=60)
    finally:
        server.destroy()


def _connections(url: str, name: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name]).fetchone()
    return int(row[0]) if row else 0
