"""Calls (``self.call``) under real worker processes and kill -9, on every store: a child is made once,
and its caller resumes with exactly the child's result."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

import jobloom
from tests.helpers import eventually

from .conftest import Processes

pytestmark = pytest.mark.slow


def _kill(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


async def _one_child(app: jobloom.App, caller: int) -> jobloom.Job:
    children = list(await app.list_jobs(binding="CallChild"))
    assert len(children) == 1, [(c.id, c.unique_key) for c in children]
    assert children[0].unique_key == f"call:{caller}:#1"
    return children[0]


@pytest.mark.parametrize("moment", ["made", "resumed"])
async def test_kill_9_of_the_callers_worker_makes_no_child_twice(app: jobloom.App, procs: Processes,
                                                                  moment: str) -> None:
    """Killed with the child made but the caller not suspended yet, or with the child's result in hand but
    not reported: the caller runs again, finds its child, and returns its result."""
    job = await app.enqueue("Calling", {"n": 4, "hang": moment})
    victim = procs.worker()
    await eventually(lambda: len(procs.read(f"hung-{moment}")) == 1, timeout=30, what=f"the caller hangs ({moment})")
    _kill(victim)
    procs.worker()
    done = await app.wait(job.id, timeout=30)
    assert done.state == "succeeded" and done.result == 40
    child = await _one_child(app, job.id)
    assert child.state == "succeeded" and child.result == 40
    # made once (it may run twice: a child whose worker died before reporting it is run again)
    assert {line.split()[0] for line in procs.read("child")} == {str(child.id)}
    assert [line.split()[1] for line in procs.read("caller")] == ["40"]
    outcomes = [a.outcome for a in await app.attempts(job.id)]
    assert outcomes.count("lost") == 1 and outcomes[-1] == "succeeded", outcomes


async def test_kill_9_of_the_childs_worker_resumes_the_caller_once_the_child_ends(app: jobloom.App,
                                                                                   procs: Processes) -> None:
    """The caller waits suspended while its child's worker dies; the child is retried, and only its end
    wakes the caller, which returns the result of the child's second attempt."""
    job = await app.enqueue("Calling", {"n": 7, "child_hang": True})
    victim = procs.worker()
    await eventually(lambda: len(procs.read("child-hang")) == 1, timeout=30, what="the child hangs")

    async def suspended() -> bool:
        return (await app.get_job(job.id)).state == "scheduled"  # holding no worker

    await eventually(suspended, timeout=30, what="the caller suspended")
    _kill(victim)
    procs.worker()
    done = await app.wait(job.id, timeout=30)
    assert done.state == "succeeded" and done.result == 70
    child = await _one_child(app, job.id)
    assert child.state == "succeeded" and child.attempt == 2
    assert [a.outcome for a in await app.attempts(job.id)] == ["suspended", "succeeded"]
    assert procs.read("caller") == ["2 70"]
