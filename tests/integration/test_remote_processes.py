"""Remote performers under real worker processes, on every store: push performers never exceed their
concurrency across processes, and a binding's limit is exact across a Python worker process and
remote workers claiming through the pull protocol."""

from __future__ import annotations

import asyncio
import importlib
import os
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import jobloom
from tests.helpers import eventually
from tests.receiver import Receiver, Request

from .conftest import HERE, Processes

pytestmark = pytest.mark.slow


class RemoteProcesses(Processes):
    """Worker processes of ``remoteapp``."""

    APP = "remoteapp:app"

    def __init__(self, url: str, state_dir: Path) -> None:
        super().__init__(url, state_dir)
        shutil.copy(HERE / "remoteapp.py", state_dir / "remoteapp.py")


@pytest.fixture
def rprocs(store_url: str, tmp_path: Path) -> Iterator[RemoteProcesses]:
    p = RemoteProcesses(store_url, tmp_path)
    try:
        yield p
    finally:
        p.cleanup()


@pytest.fixture
async def client(rprocs: RemoteProcesses) -> AsyncIterator[tuple[jobloom.App, Any]]:
    """An app on the workers' store that serves ``Transcode`` to remote workers (and runs no jobs itself),
    with itapp's gauge pointed at the test's folder."""
    sys.path.insert(0, str(rprocs.state_dir))
    os.environ["JOBLOOM_IT_DIR"] = str(rprocs.state_dir)
    try:
        import itapp  # type: ignore[import-not-found]
        import remoteapp  # type: ignore[import-not-found]

        importlib.reload(itapp)
        importlib.reload(remoteapp)
        shared = jobloom.RemoteBinding("Transcode", concurrency=2)
        app = jobloom.App(rprocs.url, performers=[remoteapp.PushGate, shared], auto_migrate=True, lease=1.0,
                          signing_secret=remoteapp.SECRET)
        await app.store()
        yield app, itapp
        await app.close()
    finally:
        sys.path.remove(str(rprocs.state_dir))


async def _succeeded(app: jobloom.App, binding: str) -> list[jobloom.Job]:
    return await app.list_jobs(binding=binding, state="succeeded", limit=1000)


async def test_push_concurrency_2_is_never_exceeded_across_processes(
    client: tuple[jobloom.App, Any], rprocs: RemoteProcesses
) -> None:
    app, _ = client

    async def hold(req: Request) -> tuple[int, dict[str, str], bytes]:
        await asyncio.sleep(0.1)
        return 200, {}, b'"done"'

    async with Receiver(hold) as rx:
        await app.enqueue_many([("PushGate", {"n": i}) for i in range(16)])
        for _ in range(2):
            # a lease far longer than a push: on a loaded host a 1 s lease can lapse, and the re-run that
            # at-least-once delivery then makes would be a second request
            rprocs.worker(concurrency=8, lease=30.0, env={"JOBLOOM_IT_PUSH_URL": rx.url})
        await eventually(lambda: _count(app, "PushGate", 16), timeout=60, interval=0.1, what="16 pushes succeeded")
        assert len(rx.requests) == 16
        assert rx.peak == 2, f"peak simultaneous requests was {rx.peak}, the limit is 2"


async def _count(app: jobloom.App, binding: str, n: int) -> bool:
    return len(await _succeeded(app, binding)) == n


async def test_concurrency_2_is_exact_across_a_python_worker_and_remote_claims(
    client: tuple[jobloom.App, Any], rprocs: RemoteProcesses
) -> None:
    app, itapp = client
    n = 40
    await app.enqueue_many([("Transcode", {"n": i}) for i in range(n)])
    # one job at a time in the Python worker: it reports and claims in one transaction, so with more it
    # could keep both slots of the binding to itself; the other slot is the remote workers' to share
    rprocs.worker(concurrency=1)

    async def python_started() -> bool:  # before any remote claim: every job taken so far is the worker's
        return len(await app.list_jobs(binding="Transcode", state=["running", "succeeded"], limit=1)) > 0

    await eventually(python_started, timeout=60, interval=0.05, what="the Python worker took a job")

    async def run(name: str, job: jobloom.RemoteJob) -> None:
        itapp.gauge(+1)
        try:
            await asyncio.sleep(0.05)
        finally:
            itapp.gauge(-1)
        assert await app.remote_complete(name, job.id, job.attempt, "succeeded", result="remote", claim=job.claim)

    async def remote_worker(name: str) -> None:  # runs what it claims at once, as a remote worker would
        while len(await _succeeded(app, "Transcode")) < n:
            jobs = await app.remote_claim(name, ["Transcode"], max=2, wait=0.5)
            await asyncio.gather(*(run(name, job) for job in jobs))

    await asyncio.wait_for(asyncio.gather(remote_worker("remote-a"), remote_worker("remote-b")), 90)
    results = [j.result for j in await _succeeded(app, "Transcode")]
    assert len(results) == n
    assert {"python", "remote"} <= set(results), "both the Python worker and the remote ones should take jobs"
    now, peak = (int(x) for x in (rprocs.state_dir / "gauge").read_text().split())
    assert now == 0
    assert peak == 2, f"peak simultaneous runs was {peak}, the limit is 2"
