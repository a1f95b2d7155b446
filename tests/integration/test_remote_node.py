"""The Node.js reference worker (examples/remote-worker-node) against the pull protocol, on every store.

The HTTP layer is not part of this test: a stand-in server on a loopback port maps the protocol's three
POSTs onto ``App.remote_claim``, ``remote_heartbeat`` and ``remote_complete`` (as the real server does),
so that the worker's side of the protocol is exercised with real processes and real HTTP.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from typing import Any

import pytest

import jobloom
from tests.conftest import IN_CI
from tests.helpers import eventually
from tests.receiver import Answer, Receiver, Request

from .test_remote_processes import RemoteProcesses, client, rprocs  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow
WORKER = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "remote-worker-node", "worker.mjs")


def node() -> str:
    found = shutil.which("node")
    if found is None:
        message = "node is not installed: install Node.js 18 or newer to test the Node.js remote worker"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return found


def bridge(app: jobloom.App, itapp: Any) -> Any:
    """The worker protocol over HTTP, as a stand-in for jobloom's server; counts the jobs remote workers
    hold in itapp's gauge (after the claim commits, and before the completion does)."""

    async def handle(req: Request) -> Answer:
        body = json.loads(req.body)
        try:
            if req.path == "/v1/worker/claim":
                jobs = await app.remote_claim(body["worker"], body["bindings"], body["max"], body.get("wait"))
                for _ in jobs:
                    itapp.gauge(+1)
                return 200, {}, json.dumps({"jobs": [j.as_dict() for j in jobs]}).encode()
            if req.path == "/v1/worker/heartbeat":
                held = await app.remote_heartbeat(body["worker"], [(j["id"], j["attempt"]) for j in body["jobs"]])
                return 200, {}, json.dumps({"jobs": [{"id": i, "attempt": a} for i, a in held]}).encode()
            if req.path == "/v1/worker/complete":
                holds = (body["id"], body["attempt"]) in await app.remote_heartbeat(
                    body["worker"], [(body["id"], body["attempt"])])
                if holds:
                    itapp.gauge(-1)
                ok = await app.remote_complete(body["worker"], body["id"], body["attempt"], body["outcome"],
                                               body.get("result"), body.get("error"), body.get("retry_after"))
                return (200 if ok else 409), {}, b"{}"
        except jobloom.JobloomError as exc:
            return 400, {}, json.dumps({"error": {"type": type(exc).__name__, "message": str(exc)}}).encode()
        return 404, {}, b"{}"

    return handle


async def test_node_workers_and_a_python_worker_share_concurrency_2_and_a_killed_one_is_retried(
    client: tuple[jobloom.App, Any], rprocs: RemoteProcesses  # noqa: F811
) -> None:
    app, itapp = client
    exe = node()
    async with Receiver(bridge(app, itapp)) as server:
        base = server.url.rsplit("/", 1)[0]

        def start(name: str, concurrency: int = 2) -> subprocess.Popen[bytes]:
            env = {**os.environ, "JOBLOOM_URL": base, "JOBLOOM_BINDINGS": "Transcode", "JOBLOOM_WORKER": name,
                   "JOBLOOM_CONCURRENCY": str(concurrency), "JOBLOOM_WAIT": "1"}
            proc = subprocess.Popen([exe, WORKER], env=env, stdout=subprocess.DEVNULL)
            rprocs.procs.append(proc)
            return proc

        victim = start("node-victim", concurrency=1)  # full once it holds the long job: no claim under way
        stuck = await app.enqueue("Transcode", {"first_seconds": 60, "seconds": 0.05})
        await eventually(lambda: _attempt_of(app, stuck.id, 1), timeout=20, what="the long job claimed")
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=10)
        itapp.gauge(-1)  # the killed worker's job leaves the gauge (the store counts it until it is reaped)
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
        results = [j.result for j in await app.list_jobs(binding="Transcode", state="succeeded", limit=100)]
        assert len(results) == n + 1
        workers = {r["worker"] if isinstance(r, dict) else r for r in results}
        assert "python" in workers and workers & {"node-a", "node-b"}, workers
        now, peak = (int(x) for x in (rprocs.state_dir / "gauge").read_text().split())
        assert now == 0 and peak == 2, f"peak simultaneous runs was {peak}, the limit is 2"
        for proc in rprocs.procs:  # stop the workers before their server goes
            proc.terminate()


async def _attempt_of(app: jobloom.App, job_id: int, attempt: int) -> bool:
    job = await app.get_job(job_id)
    return job.state == "running" and job.attempt == attempt


async def _python_ran(app: jobloom.App) -> bool:
    return any(j.result == "python" for j in await app.list_jobs(binding="Transcode", state="succeeded"))


async def _finished(app: jobloom.App, n: int) -> bool:
    jobs = await app.list_jobs(binding="Transcode", limit=1000)
    return len(jobs) == n and all(j.finished for j in jobs)
