"""Flows and durable steps under real worker processes and kill -9, on every store."""

from __future__ import annotations

import os
import signal

import pytest

import jobloom
from tests.helpers import eventually

from .conftest import Processes

pytestmark = pytest.mark.slow


async def test_fan_in_queues_the_downstream_node_exactly_once(app: jobloom.App, procs: Processes) -> None:
    flow = app.flows["fan-in"]
    runs = [await app.start(flow, {}, id=f"r{i}") for i in range(100)]
    for _ in range(3):  # no kill here: a lease no stall of a loaded host outlasts (the default 1 s did, once)
        procs.worker(concurrency=20, lease=30)

    async def all_done() -> bool:
        states = [(await app.get_run(r.id)).state for r in runs]
        return all(s != "running" for s in states)

    await eventually(all_done, timeout=120, interval=0.2, what="all runs finished")
    for run in runs:
        done = await app.get_run(run.id)
        assert done.state == "succeeded", (done.id, {n: s.state for n, s in done.nodes.items()})
        d = done.nodes["d"]
        assert d.result == 5 and d.attempt == 1
        assert [a.outcome for a in await app.attempts(d.job_id)] == ["succeeded"]


async def test_kill_9_after_three_steps_reruns_none_of_them(app: jobloom.App, procs: Processes) -> None:
    job = await app.enqueue("StepsThenHang", {})
    victim = procs.worker()
    await eventually(lambda: len(procs.read("hang")) >= 1, timeout=30, what="three steps done, then hanging")
    assert procs.read("steps") == ["one", "two", "three"]
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    procs.worker()
    done = await app.wait(job.id, timeout=30)
    assert done.state == "succeeded" and done.result == ["ONE", "TWO", "THREE"] and done.attempt == 2
    assert procs.read("steps") == ["one", "two", "three"], "no finished step may run again"


async def test_a_worker_restarted_on_a_changed_definition_keeps_the_run_on_its_graph(
        app: jobloom.App, procs: Processes) -> None:
    run = await app.start(app.flows["ship"], {"order": 7}, id="ship-1")  # the definition of deployment 1
    changed = procs.worker(env={"JOBLOOM_IT_SHIP": "2"})  # a worker of deployment 2: "label" is gone

    async def ended() -> bool:
        return (await app.get_run(run.id)).state != "running"

    await eventually(ended, timeout=60, interval=0.1, what="the run ended on the changed worker")
    changed.send_signal(signal.SIGTERM)
    changed.wait(timeout=30)
    done = await app.get_run(run.id)
    assert set(done.nodes) == {"pack", "label", "notify"} and done.state == "failed"
    assert done.nodes["pack"].result == 7 and done.nodes["notify"].result == 2  # the worker's code, the run's graph
    assert "flow 'ship' changed since run 'ship-1' started: node 'label' is no longer in it" in (
        done.nodes["label"].error or "")
    await app.resume_run(run.id)  # the way out: the old definition deployed again
    procs.worker()
    await eventually(ended, timeout=60, interval=0.1, what="the resumed run ended on the old definition")
    done = await app.get_run(run.id)
    assert done.state == "succeeded" and done.nodes["label"].result == 8
