"""Every bench workload runs with tiny sizes and reports (how fast is not asserted here)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any

import pytest

from jobloom.bench import WORKLOADS, Params, run
from jobloom.bench.performers import Stamped
from jobloom.bench.sandbox import Target

from .forking import fork_launcher

pytestmark = pytest.mark.slow

# ``poll`` and ``idle``: the bench's waits are sized for 20,000 jobs; for these few, a count every 20 ms and a
# worker left idle 50 ms before the latency jobs come
TINY = Params(jobs=40, concurrency=20, processes=(1, 2), tasks=8, batch=16, rate=100.0, history_rows=2_000,
              pairs=1, timeout=60.0, poll=0.02, idle=0.05)
LATENCY = Params(jobs=10, concurrency=20, rate=100.0, timeout=60.0, poll=0.02, idle=0.05)
CHAINS = replace(TINY, jobs=20)  # chains (and batches) of 2 and 20: a chain runs one job at a time
EXPECTED = {
    "enqueue": ["enqueue.sequential", "enqueue.concurrent", "enqueue.many"],
    "drain": ["drain.p1", "drain.p1.rss", "drain.p2", "drain.p2.rss"],
    "latency": ["latency.p50", "latency.p99", "latency.max"],
    "limits": ["limits.none", "limits.limited", "limits.ratio", "limits.turns_no_keys", "limits.turns_keys",
               "limits.keys_ratio"],
    "history": ["history.empty", "history.full", "history.ratio"],
    "flows": ["flows.rate", "flows.map.small", "flows.map.medium", "flows.map.large", "flows.map.ratio"],
    "dependencies": ["deps.chain.small", "deps.chain.large", "deps.chain.ratio", "deps.batch.small",
                     "deps.batch.small.enqueue", "deps.batch.large", "deps.batch.large.enqueue", "deps.batch.ratio"],
    "codec": ["codec.cpu.identity", "codec.cpu.encrypted", "codec.job.identity", "codec.job.encrypted",
              "codec.job.ratio"],
    "middleware": ["middleware.chain", "middleware.enqueue.none", "middleware.enqueue.empty", "middleware.drain.none",
                   "middleware.drain.empty"],
    "defaults": ["defaults.drain", "defaults.p50", "defaults.p99", "defaults.cpu", "defaults.rss", "defaults.enqueue",
                 "defaults.floor", "defaults.enqueue_ratio"],
}


def test_every_workload_has_a_smoke_test() -> None:
    assert set(EXPECTED) == set(WORKLOADS)


@pytest.mark.parametrize("workload", list(EXPECTED))
def test_workload_runs_and_reports(workload: str, store_url: str) -> None:
    """Each workload through the bench's own code, its one-process workers and its producer forked from a
    Python that has imported jobloom (``forking.py``); `drain`'s two processes, and the tests below, start
    them as users do."""
    params = {"latency": LATENCY, "dependencies": CHAINS}.get(workload, TINY)
    report = run(workload, store_url, params, launcher=fork_launcher)
    assert [m.key for m in report.measurements] == EXPECTED[workload]
    assert report.dialect in ("sqlite", "postgres")
    for m in report.measurements:
        assert m.value is not None and m.value > 0, m
    json.dumps(report.as_dict())  # the --json form is serializable
    if workload == "drain":
        assert all(m.details["processes"] in (1, 2) for m in report.measurements)
    if workload == "defaults":  # `jobloom worker APP` with no flags: one process
        assert report.measurements[0].details["processes_seen"] == 1


async def test_latency_runs_to_the_moment_perform_begins(store_url: str) -> None:
    """The latency workload measures enqueue to the start of ``perform`` (what ``Stamped`` returns),
    which comes after the claim that ``started_at`` records."""
    target = Target(store_url)
    try:
        box = target.sandbox()
        await box.prepare()
        app = box.app(latency=True)
        try:
            job = await app.enqueue(Stamped, {"i": 0})
            assert await app.drain() == 1
            done = await app.get_job(job.id)
        finally:
            await app.close()
        assert done.started_at is not None and done.finished_at is not None
        assert done.started_at.timestamp() - 1e-6 <= done.result <= done.finished_at.timestamp() + 1e-6
        [delay] = box.start_delays(job.id - 1)
        assert delay == pytest.approx(done.result - done.created_at.timestamp(), abs=1e-6)
    finally:
        target.close()


def test_sqlite_sandboxes_are_removed(sqlite_url: str) -> None:
    folder = os.path.dirname(sqlite_url.removeprefix("sqlite://"))
    run("drain", sqlite_url, Params(jobs=10, concurrency=5, processes=(1,), timeout=60.0))
    assert os.listdir(folder) == []


def test_command_prints_json(sqlite_url: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "jobloom.bench", "enqueue", "-n", "20", "--url", sqlite_url,
         "--json", "--no-progress"],
        capture_output=True, text=True, timeout=120, check=True,
    )
    report = json.loads(out.stdout)
    assert report["workload"] == "enqueue"
    assert [m["key"] for m in report["measurements"]] == EXPECTED["enqueue"]
    assert report["environment"]["logical_cores"] >= 1


def test_command_prints_a_table(sqlite_url: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "jobloom.bench", "flows", "-n", "8", "--concurrency", "10", "--url", sqlite_url,
         "--no-progress"],
        capture_output=True, text=True, timeout=120, check=True, env={**os.environ, "COLUMNS": "120"},
    )
    assert "flows: diamond (4 nodes) completed" in out.stdout


@pytest.mark.postgres
def test_the_floor_script_runs_and_reports() -> None:
    from ..conftest import POSTGRES_URL, require_postgres

    require_postgres()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        [sys.executable, os.path.join(root, "benchmarks", "floor.py"), "-n", "200", "--postgres-url", POSTGRES_URL],
        capture_output=True, text=True, timeout=120, check=True,
    )
    lines = out.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["sqlite"] + ["postgres"] * 4, out.stdout
    assert all("/s" in line and "µs" in line for line in lines), out.stdout


def test_the_latency_steps_script_traces_each_job(store_url: str) -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        [sys.executable, os.path.join(root, "benchmarks", "latency_steps.py"), "--url", store_url, "-n", "12",
         "--rate", "40", "--stamped-only", "--idle", "0.05"],
        capture_output=True, text=True, timeout=180, check=True,
    )
    lines = out.stdout.splitlines()
    traced = next(line for line in lines if "jobs traced" in line)
    found, total = int(traced.split()[0]), int(traced.split()[2])
    # a job whose chain is ambiguous (its cycle overlapped another job's, as on a loaded host) is left out,
    # not guessed: how many are traced depends on the host's speed, so one is enough here
    assert total == 12 and found >= 1, out.stdout
    steps = {line[:52].strip() for line in lines}
    expected = {"the producer's store call (commit included)", "commit to the worker's wake-up", "the cycle",
                "its transaction", "WHOLE: enqueue to perform"}
    assert expected <= steps, out.stdout
    assert any(s.startswith(("statement claim", "round trip: COMMIT")) for s in steps), out.stdout


def test_cpu_is_counted_finer_than_a_clock_tick() -> None:
    """A short drain's CPU is read from the kernel's scheduler clock (nanoseconds), not ``cpu_times()``'s
    10 ms ticks: a few hundred microseconds of work already shows (a tick-counted 0.0 made
    ``defaults.cpu`` read nothing at 40 jobs)."""
    import psutil

    from jobloom.bench.processes import cpu_seconds

    me = psutil.Process()
    before = cpu_seconds(me)
    sum(i * i for i in range(20_000))
    after = cpu_seconds(me)
    assert after > before or sys.platform != "linux"  # elsewhere ticks: the same reading is possible


async def test_a_drain_that_opens_before_the_first_sample_still_has_its_cpu(sqlite_url: str) -> None:
    """A worker forked at once may run its first jobs before the sampler's first sample: the CPU its group
    used from the moment it was launched is still read (a window that opened before any sample gave
    ``None``, and ``defaults.cpu`` failed the smoke test now and then)."""
    from jobloom.bench.performers import NOOP_APP_REF
    from jobloom.bench.processes import WorkerGroup

    target = Target(sqlite_url)
    launched: list[float] = []

    def launcher(args: list[str], env: dict[str, str], output: Any) -> Any:
        launched.append(time.time())  # after the group's start, before its sampler's first sample
        return fork_launcher(args, env, output)

    try:
        box = target.sandbox()
        await box.prepare()
        group = WorkerGroup(box, processes=None, concurrency=None, app_ref=NOOP_APP_REF, flags=False,
                            launcher=launcher)
        group.start()
        try:
            deadline = time.monotonic() + 30
            while group.peak_total_rss_mb is None:  # sampled once, after the launch
                assert time.monotonic() < deadline, "the sampler took no sample"
                await asyncio.sleep(0.02)
            end = time.time()
        finally:
            group.stop()  # samples once more, after `end`
            box.close()
        used = group.cpu_between(launched[0], end)
    finally:
        target.close()
    assert used is not None and used >= 0, used
