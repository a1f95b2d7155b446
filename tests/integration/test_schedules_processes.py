"""Schedules, the projector and the worker's timer under real worker processes, on every store.

The app the workers run is written into the test's folder (``schedapp.py``); environment variables
choose its schedules. Every process a test starts is killed at its end, even when it fails.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil
import pytest

import jobloom
from jobloom.engine.jobs import event
from jobloom.store.base import Tx
from tests.helpers import eventually

from .conftest import Processes

pytestmark = pytest.mark.slow

APP_SOURCE = '''
import asyncio, os
from typing import Any
import jobloom
from jobloom.housekeeping.stats import Projector

STATE = os.environ["JOBLOOM_IT_DIR"]


class Beat(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Hold(jobloom.Performer[dict[str, Any], None]):
    """Runs until the test creates the file ``release``."""

    async def perform(self, payload: dict[str, Any]) -> None:
        while not os.path.exists(os.path.join(STATE, "release")):
            await asyncio.sleep(0.02)


def at(t):
    return {"at": t.isoformat()}


CHOICES = {
    "beat": lambda: jobloom.Schedule("beat", cron="* * * * * *", performer=Beat, payload=at, overlap="allow",
                                     catch_up="all"),
    "hold": lambda: jobloom.Schedule("hold", every=1, performer=Hold, payload={}),
    **{f"catch_{mode}": lambda mode=mode: jobloom.Schedule(f"catch_{mode}", every=1, performer=Beat, payload=at,
                                                           overlap="allow", catch_up=mode)
       for mode in ("latest", "all", "none")},
    "daily": lambda: jobloom.Schedule("daily", cron="0 3 * * *", performer=Beat, payload={},
                                      timezone="Europe/Berlin"),
}
app = jobloom.App(
    os.environ["JOBLOOM_IT_URL"], performers=[Beat, Hold], auto_migrate=True, lease=2.0,
    schedules=[CHOICES[name]() for name in os.environ.get("SCHEDULES", "").split(",") if name],
)
if os.environ.get("PROJECTOR_BATCH"):
    app.housekeepers[:] = [k for k in app.housekeepers if k.name != "projector"]
    app.housekeepers.append(Projector(batch=int(os.environ["PROJECTOR_BATCH"]), busy=0.0))
'''


class Workers:
    """Worker processes of ``schedapp`` (registered with ``procs``, which kills them at the end)."""

    def __init__(self, procs: Processes) -> None:
        self.procs = procs
        (procs.state_dir / "schedapp.py").write_text(APP_SOURCE)

    def start(self, **env: str) -> Any:
        return self.procs.spawn(["schedapp:app", "--concurrency", "8", "--grace", "2", "--log-level", "warning"],
                                {**self.procs.env, **env})

    @staticmethod
    def stop(proc: Any) -> None:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0


class Beat(jobloom.Performer[dict[str, Any], None]):
    """The same binding as the workers' ``Beat``: lets the test enqueue it."""

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture
async def app(procs: Processes) -> AsyncIterator[jobloom.App]:
    """The test's own view of the store: no schedules, and it runs no worker, so it fires nothing."""
    app = jobloom.App(procs.url, performers=[Beat], auto_migrate=True)
    await app.store()
    yield app
    await app.close()


@pytest.fixture
def workers(procs: Processes) -> Workers:
    return Workers(procs)


async def jobs_of(app: jobloom.App, name: str) -> list[jobloom.Job]:
    jobs = await app.list_jobs(limit=100_000)
    return sorted((j for j in jobs if (j.unique_key or "").startswith(f"schedule:{name}:")), key=lambda j: j.id)


def tick_of(job: jobloom.Job) -> int:
    stamp = (job.unique_key or "").rsplit(":", 3)[-3:]
    return int(datetime.strptime(":".join(stamp), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())


async def schedule(app: jobloom.App, name: str) -> Any:
    return next(i for i in await app.list_schedules() if i.name == name)


CONTENDED_TICKS = 6  # each one all three workers race for: as many as it takes to prove one job per tick


async def test_three_workers_make_exactly_one_job_per_tick_they_all_contend_for(
    app: jobloom.App, workers: Workers
) -> None:
    """Six ticks that all three workers contend for (counted from when the last one registered),
    each made into exactly one job; no time bound (a tick a busy machine delays is caught up)."""
    for _ in range(3):
        workers.start(SCHEDULES="beat")
    await eventually(lambda: _registered(app, 3), timeout=60, what="three workers registered")
    contended = int(time.time()) + 1
    first = tick_of((await eventually(lambda: jobs_of(app, "beat"), timeout=60, what="the first tick's job"))[0])

    async def contended_ticks() -> bool:
        return any(tick_of(j) >= contended + CONTENDED_TICKS for j in await jobs_of(app, "beat"))

    await eventually(contended_ticks, timeout=90, interval=0.2, what=f"{CONTENDED_TICKS} contended ticks")
    ticks = [tick_of(j) for j in await jobs_of(app, "beat")]
    assert len(ticks) == len(set(ticks)), "a tick made more than one job"
    assert sorted(ticks) == list(range(first, max(ticks) + 1)), "a tick made no job"
    assert (await schedule(app, "beat")).fired == len(ticks)


async def _registered(app: jobloom.App, n: int) -> bool:
    store = await app.store()

    async def work(tx: Tx) -> int:
        return len(await tx.fetch("list_workers"))

    return await store.transact(work, exclusive=False) >= n


async def test_pause_and_resume_with_running_workers(app: jobloom.App, workers: Workers) -> None:
    for _ in range(2):
        workers.start(SCHEDULES="beat")
    await eventually(lambda: _at_least(app, "beat", 2), timeout=60, what="two ticks' jobs")
    await app.pause_schedule("beat")
    paused_at = time.time()
    # a job delayed by three ticks, run by a worker: proof that the workers went on meanwhile
    marker = await app.enqueue(Beat, {}, delay=3.0)
    done = await app.wait(marker.id, timeout=30)
    assert done.state == "succeeded" and (done.finished_ts or 0) >= paused_at + 3.0
    assert all(j.created_ts <= paused_at for j in await jobs_of(app, "beat")), "a job was made while paused"
    await app.resume_schedule("beat")
    resumed_at = time.time()

    async def fired_again() -> bool:
        return any(j.created_ts > resumed_at for j in await jobs_of(app, "beat"))

    await eventually(fired_again, timeout=30, what="a job after resume")


async def _at_least(app: jobloom.App, name: str, n: int) -> bool:
    return len(await jobs_of(app, name)) >= n


CATCH_UPS = ("latest", "all", "none")
CATCHES = ",".join(f"catch_{mode}" for mode in CATCH_UPS)


async def test_catch_up_after_the_workers_were_stopped(app: jobloom.App, workers: Workers) -> None:
    """One schedule per ``catch_up``, every second, in one worker process: stopped, then started again
    once each schedule missed three ticks. Each mode's jobs after the restart are checked on their own."""
    worker = workers.start(SCHEDULES=CATCHES)
    for mode in CATCH_UPS:
        await eventually(lambda m=mode: _at_least(app, f"catch_{m}", 2), timeout=60, what=f"two {mode} ticks' jobs")
    workers.stop(worker)
    last = {mode: max(tick_of(j) for j in await jobs_of(app, f"catch_{mode}")) for mode in CATCH_UPS}

    async def three_ticks_missed() -> bool:
        infos = {i.name: i for i in await app.list_schedules()}
        due = [infos[f"catch_{mode}"].next_run for mode in CATCH_UPS]
        return all(d is not None and d.timestamp() <= time.time() - 3 for d in due)

    await eventually(three_ticks_missed, timeout=30, what="three ticks missed while no worker runs")
    restarted_at = time.time()
    workers.start(SCHEDULES=CATCHES)
    for mode in CATCH_UPS:
        await _check_catch_up(app, mode, last[mode], restarted_at)


async def _check_catch_up(app: jobloom.App, mode: str, last: int, restarted_at: float) -> None:
    """The jobs of schedule ``catch_{mode}`` after a restart at ``restarted_at``; its last tick before: ``last``."""
    name = f"catch_{mode}"

    async def new_jobs() -> list[int]:
        return sorted(tick_of(j) for j in await jobs_of(app, name) if tick_of(j) > last)

    fresh = await eventually(new_jobs, timeout=60, what=f"a {mode} job after the restart")
    missed = list(range(last + 1, int(restarted_at) + 1))
    assert len(missed) >= 3, mode
    if mode == "all":
        await eventually(lambda: _covers(app, name, last + 1, int(restarted_at) + 2), timeout=30, what="every tick")
        got = sorted(tick_of(j) for j in await jobs_of(app, name))
        assert len(got) == len(set(got)) and set(missed) <= set(got)
    elif mode == "latest":
        await eventually(lambda: _covers_after(app, name, int(restarted_at) + 2), timeout=30, what="the ticks go on")
        got = await new_jobs()
        in_gap = [t for t in got if t <= fresh[0]]
        assert in_gap == [fresh[0]] and fresh[0] >= restarted_at - 1  # one job for the missed ticks: the latest
        assert not set(missed[:-2]) & set(got)
    else:
        assert fresh[0] > restarted_at, "catch_up='none' made a job for a tick missed while stopped"


async def _covers(app: jobloom.App, name: str, lo: int, hi: int) -> bool:
    got = {tick_of(j) for j in await jobs_of(app, name)}
    return set(range(lo, hi + 1)) <= got


async def _covers_after(app: jobloom.App, name: str, tick: int) -> bool:
    return any(tick_of(j) >= tick for j in await jobs_of(app, name))


async def test_overlap_skip_makes_no_job_while_the_last_one_runs(app: jobloom.App, workers: Workers,
                                                                procs: Processes) -> None:
    for _ in range(2):
        workers.start(SCHEDULES="hold")
    [first] = await eventually(lambda: jobs_of(app, "hold"), timeout=60, what="the first job")
    await eventually(lambda: _state(app, first.id, "running"), timeout=30, what="the first job running")

    async def skipped_twice() -> bool:
        return (await schedule(app, "hold")).skipped >= 2

    await eventually(skipped_twice, timeout=30, what="two ticks skipped")
    assert [j.id for j in await jobs_of(app, "hold")] == [first.id]
    (procs.state_dir / "release").write_text("")
    assert (await app.wait(first.id, timeout=30)).state == "succeeded"
    await eventually(lambda: _at_least(app, "hold", 2), timeout=30, what="a job once the first finished")


async def _state(app: jobloom.App, job_id: int, state: str) -> bool:
    return (await app.get_job(job_id)).state == state


async def test_a_projector_killed_mid_run_counts_every_event_exactly_once(
    app: jobloom.App, workers: Workers
) -> None:
    rng = random.Random(11)
    now = time.time()
    rows, truth = [], {b: dict.fromkeys(("enqueued", "started", "succeeded", "failed"), 0) for b in "ABC"}
    for i in range(40_000):
        binding, kind = rng.choice("ABC"), rng.choice(("enqueued", "started", "succeeded", "failed"))
        truth[binding][kind] += 1
        rows.append(event(now - rng.uniform(0, 3000), i, binding, kind, 1,
                          rng.uniform(0.001, 2.0) if kind in ("succeeded", "failed") else None))
    store = await app.store()

    async def add(tx: Tx) -> None:
        await tx.executemany("insert_event", rows)

    await store.transact(add)
    victim = workers.start(PROJECTOR_BATCH="50")

    async def cursor() -> int:
        async def work(tx: Tx) -> int:
            row = await tx.fetchone("get_projector", {"name": "stats"})
            return int(row[0]) if row else 0

        return await store.transact(work, exclusive=False)

    await eventually(cursor, timeout=60, interval=0.01, what="the projector to start")
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    pending = (await app.stats()).pending_events
    assert 0 < pending < len(rows), "the kill did not land mid-run"
    workers.start(PROJECTOR_BATCH="500")

    async def caught_up() -> bool:
        return (await app.stats(since=timedelta(hours=2))).pending_events == 0

    await eventually(caught_up, timeout=120, interval=0.2, what="the projector to fold every event")
    stats = await app.stats(since=timedelta(hours=2))
    for binding, counts in truth.items():
        got = stats.bindings[binding]
        assert (got.enqueued, got.started, got.succeeded, got.failed) == (
            counts["enqueued"], counts["started"], counts["succeeded"], counts["failed"])
        assert got.runs == counts["succeeded"] + counts["failed"]


# Not `serial`: what is measured is the CPU time of the workers' own processes, which other tests' load
# does not add to (0.00 and 0.02 s in the window beside three busy loops on two cores, against 0.1 s)
async def test_an_idle_worker_uses_no_measurable_cpu(tmp_path: Path, migrated_sqlite_url: str,
                                                     postgres_url: str) -> None:
    """An idle worker on each store, both measured in one 10 s window: each below 1 % of a core."""
    async with contextlib.AsyncExitStack() as stack:
        idle: dict[str, Any] = {}
        for name, url in (("sqlite", migrated_sqlite_url), ("postgres", postgres_url)):
            (tmp_path / name).mkdir()
            procs = Processes(url, tmp_path / name)
            stack.callback(procs.cleanup)
            app = jobloom.App(url, performers=[Beat], auto_migrate=True)
            stack.push_async_callback(app.close)
            idle[name] = (Workers(procs).start(SCHEDULES="daily"), app)
        for name, (_, app) in idle.items():
            await eventually(lambda app=app: _settled(app), timeout=60,
                             what=f"the {name} worker to start and run its housekeeping once")
        used = cpu_seconds_during([worker.pid for worker, _ in idle.values()], window=10.0)
        for name, spent in zip(idle, used, strict=True):
            assert spent < 0.1, f"an idle {name} worker used {spent:.3f} s of CPU in 10 s (limit: 1 % of a core)"
        assert all(worker.poll() is None for worker, _ in idle.values())


async def _settled(app: jobloom.App) -> bool:
    rows = [i for i in await app.list_schedules() if i.name == "daily"]
    stats = await app.stats()
    return bool(rows) and stats.pending_events == 0 and await _cursor_exists(app)


async def _cursor_exists(app: jobloom.App) -> bool:
    store = await app.store()

    async def work(tx: Tx) -> bool:
        return await tx.fetchone("get_projector", {"name": "stats"}) is not None

    return await store.transact(work, exclusive=False)


def cpu_seconds_during(pids: list[int], *, window: float) -> list[float]:
    """CPU time (user + system) that each of processes ``pids`` uses during the next ``window`` seconds.

    Sleeping here is the measurement itself (a fixed window), not a wait for a condition.
    """
    procs = [psutil.Process(pid) for pid in pids]
    before = [p.cpu_times() for p in procs]
    time.sleep(window)
    after = [p.cpu_times() for p in procs]
    return [(a.user - b.user) + (a.system - b.system) for a, b in zip(after, before, strict=True)]
