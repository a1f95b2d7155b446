"""Guarantees under real worker processes and real faults, on every store."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest

import jobloom
from tests.helpers import eventually
from tests.rate_windows import DATETIME_RESOLUTION, window_violations

from .conftest import Processes

pytestmark = pytest.mark.slow
HOLD = 0.2  # seconds a Rated job runs


async def _count(app: jobloom.App, binding: str, state: str) -> int:
    return sum(1 for j in await app.list_jobs(binding=binding, state=state, limit=10_000))


async def _all_succeeded(app: jobloom.App, binding: str, n: int) -> bool:
    return await _count(app, binding, "succeeded") == n


async def test_three_processes_never_exceed_concurrency_three(app: jobloom.App, procs: Processes) -> None:
    await app.enqueue_many([("Gate", {}) for _ in range(150)])
    for _ in range(3):
        procs.worker(concurrency=10)
    await eventually(lambda: _count(app, "Gate", "succeeded"), timeout=60, what="first job")
    await eventually(
        lambda: _all(app, "Gate", 150), timeout=90, interval=0.1, what="all 150 gate jobs succeeded"
    )
    raw = (procs.state_dir / "gauge").read_text().split()
    now, peak = int(raw[0]), int(raw[1])
    assert now == 0
    assert peak == 3, f"peak simultaneous runs was {peak}, the limit is 3"


async def test_kill_9_mid_job(app: jobloom.App, procs: Processes) -> None:
    least = await app.enqueue("Crashy", {})
    most = await app.enqueue("CrashyOnce", {})
    others = await app.enqueue_many([("Plain", {"n": i}) for i in range(50)])
    victim = procs.worker()
    await eventually(lambda: _lines(procs, "crashy", 1) and _lines(procs, "once", 1), timeout=30,
                     what="both jobs started")
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    procs.worker()
    done = await app.wait(least.id, timeout=30)
    assert done.state == "succeeded" and done.result == "recovered" and done.attempt == 2
    stalled = await app.wait(most.id, timeout=30)
    assert stalled.state == "stalled" and stalled.attempt == 1
    assert len(procs.read("once")) == 1, "an at-most-once job must never start twice"
    outcomes = [a.outcome for a in await app.attempts(least.id)]
    assert outcomes == ["lost", "succeeded"]
    for job in others:
        assert (await app.wait(job.id, timeout=30)).state == "succeeded"


@pytest.mark.serial
async def test_rate_limit_holds_in_every_window_across_four_processes(
    app: jobloom.App, procs: Processes
) -> None:
    # "20/s burst 5": a burst after an idle period, the rate, an idle gap, then a burst again. Each job
    # holds one of its worker's 2 slots for 0.2 s, so one process starts at most 10 a second: the rate
    # takes more than one of the 4 (whichever process is quickest to take each token otherwise may
    # take them all, and then the limit would not be shared)
    await app.enqueue_many([("Rated", {"hold": HOLD}) for _ in range(60)])
    for _ in range(4):  # a lease far longer than a job: one lapsed on a busy host would re-run a job
        procs.worker(concurrency=2, lease=10.0)
    await eventually(lambda: len(procs.read("rated")) >= 60, timeout=20, what="the first 60 rated starts")
    await asyncio.sleep(0.5)  # idle: the bucket fills up to its burst again
    await app.enqueue_many([("Rated", {"hold": HOLD}) for _ in range(40)])
    await eventually(lambda: _all_succeeded(app, "Rated", 100), timeout=20, what="all rated jobs done")
    performed = [line.split() for line in procs.read("rated")]
    assert len({job for job, _, _ in performed}) == len(performed) == 100  # each started once
    assert len({pid for _, _, pid in performed}) >= 2, "the starts did not come from more than one process"
    jobs = await app.list_jobs(binding="Rated", limit=1000)
    dispatched = {j.id: j.started_at.timestamp() for j in jobs if j.started_at is not None}
    starts = sorted(dispatched.values())
    # A start is the moment of the transaction that dispatched it (what perform sees a few ms later):
    # no window of any length, anywhere, holds more than 5 + 20 * W of them.
    assert window_violations(starts, 20.0, 5.0, resolution=DATETIME_RESOLUTION) == []
    # ... and the rate is delivered: once every worker runs, the second wave's starts after its burst
    # came at 20/s (the first wave's pace includes the workers' start-up on a busy machine). At least
    # 80 %: a pause of the shared machine loses the tokens it spans (a CI run measured 86 %), while a
    # limit one process kept to itself would deliver at most 10/s (2 slots of 0.2 s)
    wave = starts[60:]
    delivered = (len(wave) - 5) / (wave[-1] - wave[0])
    assert delivered >= 0.8 * 20, (delivered, wave)
    lags = sorted(float(t) - dispatched[int(job)] for job, t, _ in performed)
    assert lags[len(lags) // 2] < 0.1, lags  # perform began soon after its dispatch (median)


async def test_unique_key_race_from_four_processes(app: jobloom.App, procs: Processes) -> None:
    code = (
        "import os, time, itapp\n"
        "while not os.path.exists('go'): time.sleep(0.005)\n"
        "ids = [itapp.app.enqueue_sync('Plain', {'n': 1}, unique_key='the-one').id for _ in range(5)]\n"
        "print(' '.join(map(str, ids)))\n"
        "itapp.app.close_sync()\n"
    )
    racers = [procs.python(code) for _ in range(4)]
    await app.list_jobs()  # the store exists before the racers start
    (procs.state_dir / "go").write_text("")
    ids = set()
    for r in racers:
        out, _ = r.communicate(timeout=60)
        assert r.returncode == 0
        ids |= {int(x) for x in out.split()}
    assert len(ids) == 1
    jobs = [j for j in await app.list_jobs(binding="Plain", limit=1000) if j.unique_key == "the-one"]
    assert len(jobs) == 1


async def test_cpu_bound_sync_job_longer_than_twice_the_lease_is_not_reaped(
    app: jobloom.App, procs: Processes
) -> None:
    job = await app.enqueue("CpuBound", {"seconds": 2.5})  # lease is 1 s
    procs.worker()
    done = await app.wait(job.id, timeout=30)
    assert done.state == "succeeded" and done.attempt == 1 and done.result == 1
    assert [a.outcome for a in await app.attempts(job.id)] == ["succeeded"]


async def test_sigterm_drains_gracefully(app: jobloom.App, procs: Processes) -> None:
    job = await app.enqueue("CpuBound", {"seconds": 1.0})
    w = procs.worker(grace=10)
    await eventually(lambda: _state(app, job.id, "running"), timeout=30, what="running")
    w.send_signal(signal.SIGTERM)
    assert w.wait(timeout=20) == 0
    done = await app.get_job(job.id)
    assert done.state == "succeeded" and done.attempt == 1


async def _all(app: jobloom.App, binding: str, n: int) -> bool:
    return await _count(app, binding, "succeeded") == n


async def _state(app: jobloom.App, job_id: int, state: str) -> bool:
    return (await app.get_job(job_id)).state == state


def _lines(procs: Processes, name: str, n: int) -> Any:
    return len(procs.read(name)) >= n
