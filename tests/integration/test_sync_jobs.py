"""Sync performers in real worker processes: a slot is freed only when the work has really stopped."""

from __future__ import annotations

import asyncio
import importlib
import os
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import jobloom
from tests.helpers import eventually

from .conftest import HERE, Processes

pytestmark = pytest.mark.slow


class SyncProcesses(Processes):
    """Worker processes of ``syncapp``."""

    APP = "syncapp:app"

    def __init__(self, url: str, state_dir: Path) -> None:
        super().__init__(url, state_dir)
        shutil.copy(HERE / "syncapp.py", state_dir / "syncapp.py")


@pytest.fixture
def sprocs(store_url: str, tmp_path: Path) -> Iterator[SyncProcesses]:
    p = SyncProcesses(store_url, tmp_path)
    try:
        yield p
    finally:
        p.cleanup()


@pytest.fixture
async def app(sprocs: SyncProcesses) -> AsyncIterator[jobloom.App]:
    """A client of the store the workers use (it runs no jobs itself)."""
    sys.path.insert(0, str(sprocs.state_dir))
    try:
        import syncapp  # type: ignore[import-not-found]

        importlib.reload(syncapp)
        app = jobloom.App(sprocs.url, performers=[s.cls for s in syncapp.app.specs.values()], auto_migrate=True,
                          lease=1.0)
        await app.store()
        yield app
        await app.close()
    finally:
        sys.path.remove(str(sprocs.state_dir))


def _lines(p: SyncProcesses, kind: str) -> dict[int, float]:
    """Job id -> time of its ``start`` or ``end`` line, as written inside the jobs."""
    out = {}
    for line in p.read("lines"):
        k, job_id, t = line.split()
        if k == kind:
            out[int(job_id)] = float(t)
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


async def test_hung_sync_jobs_hold_their_slots_until_their_threads_return(
    app: jobloom.App, sprocs: SyncProcesses
) -> None:
    hung = await app.enqueue_many([("SyncGate", {"hold": True}) for _ in range(3)])
    quick = await app.enqueue_many([("SyncGate", {}) for _ in range(6)])
    lease = 2.0  # a loaded machine may stall a worker's renewals for a second: past that, a lease is lost
    for _ in range(2):
        sprocs.worker(concurrency=3, lease=lease)
    starts = await eventually(lambda: len(_lines(sprocs, "start")) >= 3 and _lines(sprocs, "start"), timeout=30,
                              what="the three held jobs started")
    assert set(starts) == {j.id for j in hung}, "the held jobs came first and filled the binding"
    # past their timeout and past a whole lease: they stay running and keep their leases
    last = max(starts.values())
    await eventually(lambda: time.time() > last + 1.0 + lease + 0.5, timeout=10, what="timeout and a lease passed")
    for job in hung:
        now = await app.get_job(job.id)
        assert now.state == "running" and now.attempt == 1, now
    assert set(_lines(sprocs, "start")) == {j.id for j in hung}, "no job started while the 3 slots were held"
    (sprocs.state_dir / "release").touch()
    for job in hung:
        done = await app.wait(job.id, timeout=20)
        assert done.state == "failed", done
        assert done.error is not None and done.error.startswith("timed out after 1 s; the thread ran on for")
        ended = _lines(sprocs, "end")[job.id]
        assert done.finished_at is not None and done.finished_at.timestamp() >= ended, "reported before it ended"
    for job in quick:
        done = await app.wait(job.id, timeout=20)
        assert done.state == "succeeded" and done.attempt == 1, done
    now, peak = (int(x) for x in (sprocs.state_dir / "gauge").read_text().split())
    assert now == 0 and peak == 3, f"peak simultaneous runs {peak}, the limit is 3"


async def test_a_process_isolated_job_is_killed_at_its_timeout_and_retried(
    app: jobloom.App, sprocs: SyncProcesses
) -> None:
    spin = await app.enqueue("Spinner", {})
    echo = await app.enqueue("ProcessEcho", {"x": 1})
    sprocs.worker(concurrency=1)
    done = await app.wait(spin.id, timeout=30)
    assert done.state == "failed" and done.attempt == 2, done
    attempts = await app.attempts(spin.id)
    assert [a.outcome for a in attempts] == ["timeout", "timeout"]
    assert all(a.error == "timed out after 0.5 s; its child process was killed (SIGKILL)" for a in attempts)
    pids = {int(line.split()[1]) for line in sprocs.read("spin")}
    assert {line.split()[0] for line in sprocs.read("spin")} == {"1", "2"} and len(pids) == 2
    assert not any(_alive(pid) for pid in pids), "a timed-out child still runs"
    size = (sprocs.state_dir / "spin").stat().st_size
    await asyncio.sleep(0.2)  # four of its 50 ms writes would land here if it still ran
    assert (sprocs.state_dir / "spin").stat().st_size == size
    # the one slot was freed: the next job ran in a child of its own
    echoed = await app.wait(echo.id, timeout=30)
    assert echoed.state == "succeeded" and echoed.result["echo"] == {"x": 1}
    assert echoed.result["pid"] not in pids


async def test_cancel_kills_a_process_isolated_job(app: jobloom.App, sprocs: SyncProcesses) -> None:
    job = await app.enqueue("LongSpinner", {})
    sprocs.worker(concurrency=1)
    line = await eventually(lambda: sprocs.read("spin"), timeout=30, what="the spinner started")
    pid = int(line[0].split()[1])
    await app.cancel(job.id)
    done = await app.wait(job.id, timeout=20)
    assert done.state == "cancelled", done
    [attempt] = await app.attempts(job.id)
    assert attempt.outcome == "cancelled"
    assert attempt.error == "cancelled while running; its child process was killed (SIGKILL)"
    assert not _alive(pid)


async def test_shutdown_kills_a_process_job_and_leaves_a_hung_thread_to_the_reaper(
    app: jobloom.App, sprocs: SyncProcesses
) -> None:
    spin = await app.enqueue("LongSpinner", {})
    held = await app.enqueue("SyncGate", {"hold": True})
    worker = sprocs.worker(concurrency=2, grace=0.3)
    await eventually(lambda: sprocs.read("spin") and _lines(sprocs, "start"), timeout=30, what="both started")
    pid = int(sprocs.read("spin")[0].split()[1])
    worker.send_signal(signal.SIGTERM)
    await asyncio.to_thread(worker.wait, 20)
    assert worker.returncode == 0
    assert not _alive(pid)
    [interrupted] = await app.attempts(spin.id)
    assert interrupted.outcome == "lost"
    assert interrupted.error == "interrupted (shutdown); its child process was killed (SIGKILL)"
    # the held thread never ended and was not reported: its lease expires and the reaper retries it
    assert held.id not in _lines(sprocs, "end")
    assert (await app.get_job(held.id)).state == "running"
    (sprocs.state_dir / "release").touch()
    sprocs.worker(concurrency=2)
    await eventually(lambda: _attempt_outcomes(app, held.id), timeout=20, what="the held job reaped")
    assert await _attempt_outcomes(app, held.id) == ["lost"]


async def _attempt_outcomes(app: jobloom.App, job_id: int) -> list[str | None]:
    return [a.outcome for a in await app.attempts(job_id) if a.outcome is not None]


async def test_a_child_exits_when_its_worker_is_killed(app: jobloom.App, sprocs: SyncProcesses) -> None:
    job = await app.enqueue("LongSpinner", {})
    worker = sprocs.worker(concurrency=1)
    await eventually(lambda: sprocs.read("spin"), timeout=30, what="the spinner started")
    pid = int(sprocs.read("spin")[0].split()[1])
    os.kill(worker.pid, signal.SIGKILL)
    await asyncio.to_thread(worker.wait, 10)
    await eventually(lambda: not _alive(pid), timeout=5, what="the orphaned child gone")
    # its lease expires and the job runs again under a new worker, in a new child
    sprocs.worker(concurrency=1)
    await eventually(lambda: {line.split()[0] for line in sprocs.read("spin")} == {"1", "2"}, timeout=30,
                     what="the second attempt started")
    assert next(a.outcome for a in await app.attempts(job.id)) == "lost"
