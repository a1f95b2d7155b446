"""The Node.js reference worker (examples/remote-worker-node) against ``jobloom serve``, on every store.

Everything is a real process talking real HTTP on loopback ports: the server (``jobloom serve --app``,
with a token of scope ``worker``), two Node workers and one Python worker process sharing the remote
binding ``Transcode`` (concurrency 2). Each run is counted in itapp's cross-process gauge, inside the
slot it holds: by the Python performer, and by the Node workers' handler through a receiver here.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

import jobloom
from jobloom.engine import registry
from jobloom.http.tokens import create_token
from tests.conftest import require_executable
from tests.helpers import eventually
from tests.receiver import Answer, Receiver, Request

from .test_remote_processes import RemoteProcesses, client, rprocs  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent
WORKER = HERE.parent.parent / "examples" / "remote-worker-node" / "worker.mjs"
HANDLER = HERE / "node_gauge_handler.mjs"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def jobloom_serve(rprocs: RemoteProcesses) -> Iterator[str]:  # noqa: F811
    """``jobloom serve --app remoteapp:served`` on a free loopback port; yields its base URL."""
    port = free_port()
    log = (rprocs.state_dir / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobloom.cli", "serve", "--app", "remoteapp:served", "--port", str(port),
         "--log-level", "warning"],
        env=rprocs.env, cwd=rprocs.state_dir, stdout=log, stderr=subprocess.STDOUT)
    rprocs.procs.append(proc)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, (rprocs.state_dir / "serve.log").read_text()
        try:
            return httpx.get(f"{url}/v1/health", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        eventually_sync(up, 30, "jobloom serve answers")
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
        log.close()


def eventually_sync(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for: {what}"
        time.sleep(0.05)


async def test_node_workers_and_a_python_worker_share_concurrency_2_and_a_killed_one_is_retried(
    client: tuple[jobloom.App, Any], rprocs: RemoteProcesses  # noqa: F811
) -> None:
    app, itapp = client
    exe = require_executable("node", "install Node.js 18 or newer to test the Node.js remote worker")
    token, _ = await create_token(await app.store(), "workers", "worker")

    def count(req: Request) -> Answer:
        itapp.gauge(int(parse_qs(urlsplit(req.path).query)["d"][0]))
        return 200, {}, b"{}"

    async with Receiver(count) as gauge:
        with jobloom_serve(rprocs) as base:

            def start(name: str, concurrency: int = 2) -> subprocess.Popen[bytes]:
                env = {**os.environ, "JOBLOOM_URL": base, "JOBLOOM_TOKEN": token, "JOBLOOM_BINDINGS": "Transcode",
                       "JOBLOOM_WORKER": name, "JOBLOOM_CONCURRENCY": str(concurrency), "JOBLOOM_WAIT": "1",
                       "JOBLOOM_HANDLER": str(HANDLER), "JOBLOOM_IT_GAUGE_URL": gauge.url}
                proc = subprocess.Popen([exe, str(WORKER)], env=env, stdout=subprocess.DEVNULL)
                rprocs.procs.append(proc)
                return proc

            victim = start("node-victim", concurrency=1)  # full once it holds the long job: no claim under way
            stuck = await app.enqueue("Transcode", {"first_seconds": 60, "seconds": 0.05})
            await eventually(lambda: _attempt_of(app, stuck.id, 1), timeout=20, what="the long job claimed")
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait(timeout=10)
            n = 40
            rprocs.worker(concurrency=1)  # one slot: a worker that reports and claims in one cycle keeps its slot
            await app.enqueue_many([("Transcode", {"seconds": 0.1}) for _ in range(n)])
            await eventually(lambda: _python_ran(app), timeout=30, what="the Python worker took a job")
            start("node-a")
            start("node-b")
            await eventually(lambda: _finished(app, n + 1), timeout=60, interval=0.1, what="every job finished")
            retried = await app.get_job(stuck.id)
            assert retried.state == "succeeded" and retried.attempt == 2
            assert [a.outcome for a in await app.attempts(stuck.id)] == ["lost", "succeeded"]

            # the killed worker's report for its old attempt, arriving now: refused, and nothing changes
            async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:
                r = await http.post("/v1/worker/complete", json={
                    "worker": "node-victim", "id": stuck.id, "attempt": 1, "claim": "lost-with-the-worker",
                    "outcome": "failed", "error": "late"})
            assert r.status_code == 409 and r.json()["error"]["type"] == "StaleAttempt", r.text
            after = await app.get_job(stuck.id)
            assert (after.state, after.attempt, after.result, after.error) == (
                retried.state, retried.attempt, retried.result, retried.error)
            assert [a.outcome for a in await app.attempts(stuck.id)] == ["lost", "succeeded"]

            results = [j.result for j in await app.list_jobs(binding="Transcode", state="succeeded", limit=100)]
            assert len(results) == n + 1
            workers = {r["worker"] if isinstance(r, dict) else r for r in results}
            assert "python" in workers and workers & {"node-a", "node-b"}, workers
            now, peak = (int(x) for x in (rprocs.state_dir / "gauge").read_text().split())
            assert now == 0 and peak == 2, f"peak simultaneous runs was {peak}, the limit is 2"
            for proc in rprocs.procs[1:]:  # stop the workers before their server goes
                proc.terminate()


async def _started(path: Path, job_id: int) -> bool:
    return path.exists() and str(job_id) in path.read_text().split()


async def _attempt_of(app: jobloom.App, job_id: int, attempt: int) -> bool:
    job = await app.get_job(job_id)
    return job.state == "running" and job.attempt == attempt


async def _python_ran(app: jobloom.App) -> bool:
    return any(j.result == "python" for j in await app.list_jobs(binding="Transcode", state="succeeded"))


async def _finished(app: jobloom.App, n: int) -> bool:
    jobs = await app.list_jobs(binding="Transcode", limit=1000)
    return len(jobs) == n and all(j.finished for j in jobs)


async def test_node_worker_says_how_it_stops_an_idle_one_at_once_and_a_second_sigterm_stops_now(
    client: tuple[jobloom.App, Any], rprocs: RemoteProcesses  # noqa: F811
) -> None:
    """SIGTERM on an idle Node worker ends its long poll (30 s here) at once, and the server hands the
    aborted claim no job; on a busy one it says what it finishes, and SIGTERM again interrupts the job,
    reported as the log says."""
    app, _ = client
    exe = require_executable("node", "install Node.js 18 or newer to test the Node.js remote worker")
    token, _ = await create_token(await app.store(), "workers", "worker")
    started = rprocs.state_dir / "started.txt"
    with jobloom_serve(rprocs) as base:

        def start(name: str) -> tuple[subprocess.Popen[bytes], Path]:
            log = rprocs.state_dir / f"{name}.log"
            env = {**os.environ, "JOBLOOM_URL": base, "JOBLOOM_TOKEN": token, "JOBLOOM_BINDINGS": "Transcode",
                   "JOBLOOM_WORKER": name, "JOBLOOM_WAIT": "30", "JOBLOOM_GRACE": "120",
                   "JOBLOOM_HANDLER": str(HERE / "node_started_handler.mjs"), "JOBLOOM_IT_STARTED": str(started)}
            proc = subprocess.Popen([exe, str(WORKER)], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
            rprocs.procs.append(proc)
            return proc, log

        async def ran_by(job_id: int, name: str) -> bool:
            job = await app.get_job(job_id)
            return job.state == "succeeded" and isinstance(job.result, dict) and job.result["worker"] == name

        busy, busy_log = start("node-busy")
        long = await app.enqueue("Transcode", {"seconds": 600})
        # the job's handler has begun: the claim's reply reached the worker (the claim committing is not enough)
        await eventually(lambda: _started(started, long.id), timeout=30, what="the long job running in node-busy")
        busy.send_signal(signal.SIGTERM)
        await eventually(lambda: "finishing 1 running job(s), up to 120 s; send SIGTERM again to stop now"
                         in busy_log.read_text(), timeout=20, what="the first SIGTERM's message")
        assert busy.poll() is None and (await app.get_job(long.id)).state == "running"
        busy.send_signal(signal.SIGTERM)
        busy.wait(timeout=30)  # not the grace period's 120 s
        assert "stopping now" in busy_log.read_text() and "interrupting 1 running job(s)" in busy_log.read_text()
        [attempt] = await app.attempts(long.id)
        assert (attempt.outcome, attempt.error) == ("failed", "Error: worker stopping")
        await app.cancel(long.id)  # its retry (600 s) must not keep the idle worker below busy

        idle, idle_log = start("node-idle")

        async def polling(name: str) -> bool:  # its first claim registered it: that claim waits (30 s)
            store = await app.store()
            return name in {w.name for w in await store.transact(registry.workers, exclusive=False)}

        # not after a job it ran: a job's report commits before the worker counts the job as ended
        await eventually(lambda: polling("node-idle"), timeout=30, what="node-idle's claim reached the server")
        idle.send_signal(signal.SIGTERM)  # its claim is waiting (a long poll of 30 s)
        try:
            idle.wait(timeout=15)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the idle worker did not exit on SIGTERM:\n{idle_log.read_text()}") from None
        assert "SIGTERM: no running jobs; stopping" in idle_log.read_text()
        later = await app.enqueue("Transcode", {"seconds": 0.01})
        start("node-next")
        await eventually(lambda: ran_by(later.id, "node-next"), timeout=30, what="node-next ran the later job")
        assert (await app.get_job(later.id)).attempt == 1, "the aborted long poll claimed the later job"
        for proc in rprocs.procs[1:]:
            if proc.poll() is None:
                proc.terminate()
