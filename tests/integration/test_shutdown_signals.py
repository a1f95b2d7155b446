"""A worker's shutdown says what it does, and does what it says: real ``jobloom worker`` processes in a
session of their own, Ctrl-C delivered as a terminal delivers it (SIGINT to the whole process group).

The first Ctrl-C says at once how many jobs it finishes and for how long; a second one stops at once.
Every ``job_outcome`` line then matches the attempt the store holds, and the ``worker_stopped`` line's
counts match the jobs' states."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import jobloom
from tests.helpers import eventually

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # asserts that a stop comes long before the grace's end

GRACE = 120  # seconds: the second Ctrl-C must not wait for it
APP = '''
from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import jobloom

DIR = os.environ["JOBLOOM_IT_DIR"]


def mark(name: str) -> None:
    with open(os.path.join(DIR, "started"), "a") as f:
        f.write(name + "\\n")


class Hold(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        mark("Hold")
        await asyncio.sleep(3600)


class HoldOnce(jobloom.Performer[dict[str, Any], None]):
    delivery = "at_most_once"

    async def perform(self, payload: dict[str, Any]) -> None:
        mark("HoldOnce")
        await asyncio.sleep(3600)


class HoldSync(jobloom.Performer[dict[str, Any], None]):
    """A thread: it cannot be interrupted, and runs until the file ``gate`` exists."""

    def perform(self, payload: dict[str, Any]) -> None:
        mark("HoldSync")
        while not os.path.exists(os.path.join(DIR, "gate")):
            time.sleep(0.05)


app = jobloom.App(os.environ["JOBLOOM_IT_URL"], performers=[Hold, HoldOnce, HoldSync], auto_migrate=True,
                  lease=2.0)
'''
OUTCOME = re.compile(r"job_outcome job_id=(\d+) binding=\w+ attempt=(\d+) outcome=(\w+)")
STOPPED = re.compile(r"worker_stopped .* interrupted=(\d+) released=(\d+) left_running=(\d+) unreported=(\d+)")


@pytest.fixture
async def app(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[jobloom.App]:
    (tmp_path / "stopapp.py").write_text(APP)
    monkeypatch.setenv("JOBLOOM_IT_DIR", str(tmp_path))
    monkeypatch.setenv("JOBLOOM_IT_URL", store_url)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    import stopapp  # type: ignore[import-not-found]

    importlib.reload(stopapp)
    the_app: jobloom.App = stopapp.app
    await the_app.store()
    yield the_app
    await the_app.close()


def _start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / "worker.log"
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "jobloom.cli", "worker", "stopapp:app", "--grace", str(GRACE),
                             *args], cwd=tmp_path, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)  # a process group of its own, as a terminal's job is
    return proc, log


def _ctrl_c(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGINT)


def _started(tmp_path: Path) -> list[str]:
    path = tmp_path / "started"
    return path.read_text().split() if path.exists() else []


async def test_ctrl_c_says_what_it_does_a_second_stops_at_once_and_the_log_matches_the_store(
        app: jobloom.App, tmp_path: Path) -> None:
    jobs = await app.enqueue_many([("Hold", {}), ("Hold", {}), ("HoldOnce", {}), ("HoldSync", {})])
    proc, log = _start(tmp_path)
    try:
        await eventually(lambda: len(_started(tmp_path)) == 4, timeout=60, what="4 jobs running")
        _ctrl_c(proc)
        said = await eventually(lambda: "worker_stopping " in log.read_text() and log.read_text(), timeout=20,
                                what="the first Ctrl-C's message")
        assert f"finishing 4 running jobs, up to {GRACE} s; press Ctrl-C again to stop now" in said
        assert proc.poll() is None, "one Ctrl-C stops gracefully: the jobs go on within the grace period"
        assert all(j.state == "running" for j in [await app.get_job(j.id) for j in jobs])
        _ctrl_c(proc)
        proc.wait(timeout=GRACE / 4)  # at once, not at the end of the grace period
    finally:
        (tmp_path / "gate").touch()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = log.read_text()
    assert "worker_stopping_now" in text and "1 sync job(s) in threads cannot be interrupted" in text
    lines = OUTCOME.findall(text)
    assert len(lines) == 3, text
    for job_id, attempt, outcome in lines:
        recorded = await app.attempts(int(job_id))
        assert recorded[int(attempt) - 1].outcome == outcome == "lost", (job_id, recorded)
    states = {j.binding + str(i): (await app.get_job(j.id)).state for i, j in enumerate(jobs)}
    assert states == {"Hold0": "scheduled", "Hold1": "scheduled", "HoldOnce2": "stalled", "HoldSync3": "running"}
    stopped = STOPPED.search(text)
    assert stopped is not None, text
    assert tuple(int(x) for x in stopped.groups()) == (3, 0, 1, 0)
    assert str(jobs[3].id) not in {job_id for job_id, _, _ in lines}, "no outcome line for the job left running"


async def test_ctrl_c_under_the_supervisor_is_one_stop_and_twice_stops_every_process(
        app: jobloom.App, tmp_path: Path) -> None:
    """Ctrl-C reaches each process from the terminal (SIGINT) and from the supervisor (SIGTERM): that is
    one stop, not two; a second Ctrl-C stops every process at once."""
    await app.enqueue_many([("Hold", {}) for _ in range(4)])
    proc, log = _start(tmp_path, "--processes", "2", "--concurrency", "2")
    try:
        await eventually(lambda: len(_started(tmp_path)) == 4, timeout=60, what="4 jobs running")
        _ctrl_c(proc)
        await eventually(lambda: log.read_text().count("worker_stopping ") == 2
                         and "supervisor_stopping" in log.read_text(), timeout=20, what="the stop messages")
        assert "finishing 2 running jobs" in log.read_text()
        _ctrl_c(proc)
        proc.wait(timeout=GRACE / 4)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = log.read_text()
    assert re.findall(r"worker_stopping_now \S+ signal=(\w+)", text) == ["SIGINT", "SIGINT"], text
    lines = OUTCOME.findall(text)
    assert len(lines) == 4
    for job_id, attempt, outcome in lines:
        assert (await app.attempts(int(job_id)))[int(attempt) - 1].outcome == outcome == "lost"
