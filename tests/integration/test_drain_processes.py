"""``app.drain()`` is as safe as a worker, between real processes: it renews its attempts' leases (so
another process's drain never reaps a job it runs), an attempt whose lease it lost is stopped, and
``ctx.progress`` is visible while the job runs."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

import jobloom
from jobloom.engine import coordinator
from jobloom.store.base import Tx
from tests.helpers import eventually

from .conftest import Processes

pytestmark = pytest.mark.slow

APP = '''
from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import jobloom

DIR = os.environ["JOBLOOM_IT_DIR"]


def mark(line: str) -> None:
    with open(os.path.join(DIR, "marks"), "a") as f:
        f.write(line + "\\n")


class Held(jobloom.Performer[dict[str, Any], int]):
    """Attempt 1 runs until the file ``gate`` exists; later attempts end at once."""

    backoff = jobloom.Backoff.fixed(0.05)
    max_attempts = 3

    async def perform(self, payload: dict[str, Any]) -> int:
        mark(f"started {self.ctx.attempt} {os.getpid()} {time.time()!r}")
        if self.ctx.attempt > 1:
            return self.ctx.attempt
        await self.ctx.progress(0.5, "halfway")
        try:
            while not os.path.exists(os.path.join(DIR, "gate")):
                await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            mark(f"stopped {self.ctx.attempt}")
            raise
        mark(f"ended {self.ctx.attempt}")
        return self.ctx.attempt


def make(lease: float, url: str | None = None) -> jobloom.App:
    url = url or os.environ["JOBLOOM_IT_URL"]
    return jobloom.App(url, performers=[Held], auto_migrate=True, lease=lease)
'''

DRAIN = '''
import asyncio
import drainapp

async def main() -> None:
    app = drainapp.make(lease={lease})
    print(await app.drain(), flush=True)
    await app.close()

asyncio.run(main())
'''
LEASE = 2.0


@pytest.fixture
async def drainapp(procs: Processes, monkeypatch: pytest.MonkeyPatch) -> jobloom.App:
    (procs.state_dir / "drainapp.py").write_text(APP)
    import importlib.util

    spec = importlib.util.spec_from_file_location("drainapp_for_test", procs.state_dir / "drainapp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setenv("JOBLOOM_IT_DIR", str(procs.state_dir))
    spec.loader.exec_module(module)
    app: jobloom.App = module.make(LEASE, procs.url)
    await app.store()
    return app


def _marks(state: Path) -> list[str]:
    path = state / "marks"
    return path.read_text().splitlines() if path.exists() else []


def _drain(procs: Processes) -> subprocess.Popen[bytes]:
    return procs.python(DRAIN.format(lease=LEASE))


async def test_a_second_drain_never_reaps_a_job_another_drain_is_running(
        drainapp: jobloom.App, procs: Processes) -> None:
    """The issue's scenario: A drains a job longer than its lease; B drains once A's first lease is past."""
    app = drainapp
    try:
        job = await app.enqueue("Held", {})
        a = _drain(procs)
        started = await eventually(lambda: [m for m in _marks(procs.state_dir) if m.startswith("started 1 ")],
                                   timeout=60, what="A started attempt 1")
        began = float(started[0].split()[3])

        async def progress_seen() -> bool:
            got = await app.get_job(job.id)
            return got.state == "running" and got.progress is not None and got.progress.fraction == 0.5

        await eventually(progress_seen, timeout=15, what="A's progress visible while the job runs")
        # the lease A took at the claim is past (twice over): only A's renewals keep the job A's
        await eventually(lambda: time.time() > began + 2 * LEASE, timeout=3 * LEASE + 5, what="the first lease past")
        b = _drain(procs)
        out, _ = b.communicate(timeout=60)
        assert b.returncode == 0
        assert out.decode().split() == ["0"], "B's drain ran an attempt of a job A was running"
        held = await app.get_job(job.id)
        assert (held.state, held.attempt) == ("running", 1)
        (procs.state_dir / "gate").touch()
        out, _ = a.communicate(timeout=60)
        assert a.returncode == 0 and out.decode().split() == ["1"]
        done = await app.get_job(job.id)
        assert (done.state, done.attempt, done.result) == ("succeeded", 1, 1)
        assert [m.split()[:2] for m in _marks(procs.state_dir)] == [["started", "1"], ["ended", "1"]]
        assert [a.outcome for a in await app.attempts(job.id)] == ["succeeded"]
    finally:
        await app.close()


async def test_a_drain_stops_an_attempt_whose_lease_it_lost(drainapp: jobloom.App, procs: Processes) -> None:
    """Another process reaps A's job (its clock far ahead, as a reaper's would be once the lease is past):
    A's drain finds its lease gone at its next renewal and stops the attempt, as a worker does."""
    app = drainapp
    try:
        job = await app.enqueue("Held", {})
        a = _drain(procs)
        await eventually(lambda: any(m.startswith("started 1 ") for m in _marks(procs.state_dir)),
                         timeout=60, what="A started attempt 1")
        store = await app.store()

        async def reap(tx: Tx) -> list[int]:
            return await coordinator.reap(tx, time.time() + 3600, hooks=app.hooks)

        async def reaped() -> bool:
            # a reap skips a job whose row another transaction holds (A's progress write, a renewal), as
            # a worker's reap does: it is reaped by a later one
            return job.id in await store.transact(reap)

        await eventually(reaped, timeout=15, interval=0.05, what="A's job reaped")
        await eventually(lambda: "stopped 1" in _marks(procs.state_dir), timeout=4 * LEASE + 10,
                         what="A stopped the attempt whose lease it lost")
        a.communicate(timeout=60)
        assert a.returncode == 0
        lost = await app.get_job(job.id)
        assert (lost.state, lost.attempt) == ("scheduled", 1)  # its retry, at the reaper's clock
        assert [a.outcome for a in await app.attempts(job.id)] == ["lost"]
        assert "ended 1" not in _marks(procs.state_dir)
    finally:
        await app.close()
