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


async def _one_child(app: jobloom.App, caller: int, callers: int = 1) -> jobloom.Job:
    """The one child ``caller`` made, among as many children as there are ``callers``."""
    children = list(await app.list_jobs(binding="CallChild"))
    assert len(children) == callers, [(c.id, c.unique_key) for c in children]
    mine = [c for c in children if (c.unique_key or "").startswith(f"call:{caller}:")]
    assert [c.unique_key for c in mine] == [f"call:{caller}:#1"], [(c.id, c.unique_key) for c in children]
    return mine[0]


async def test_kill_9_of_the_callers_worker_makes_no_child_twice(app: jobloom.App, procs: Processes) -> None:
    """One worker killed with one caller's child made but the caller not suspended yet, and another's
    child's result in hand but not reported: each caller runs again, finds its child, and returns its result."""
    jobs = {moment: await app.enqueue("Calling", {"n": n, "hang": moment})
            for moment, n in (("made", 4), ("resumed", 5))}
    victim = procs.worker()
    for moment in jobs:
        await eventually(lambda m=moment: len(procs.read(f"hung-{m}")) == 1, timeout=30,
                         what=f"the caller hangs ({moment})")
    _kill(victim)
    procs.worker()
    children = []
    for moment, job in jobs.items():
        done = await app.wait(job.id, timeout=30)
        result = job.payload["n"] * 10
        assert done.state == "succeeded" and done.result == result, (moment, done)
        child = await _one_child(app, job.id, callers=len(jobs))
        assert child.state == "succeeded" and child.result == result, (moment, child)
        children.append(child)
        outcomes = [a.outcome for a in await app.attempts(job.id)]
        assert outcomes.count("lost") == 1 and outcomes[-1] == "succeeded", (moment, outcomes)
    # each made once (it may run twice: a child whose worker died before reporting it is run again)
    assert {line.split()[0] for line in procs.read("child")} == {str(c.id) for c in children}
    assert sorted(line.split()[1] for line in procs.read("caller")) == ["40", "50"]  # each caller returned once


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
