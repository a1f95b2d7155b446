"""Chaos: three worker processes under a supervisor, one of them killed with SIGKILL every second for
12 s, and on PostgreSQL the app's connections terminated twice. Every at-least-once job succeeds, no
at-most-once job starts twice, the concurrency limit is never exceeded (measured from inside the jobs),
and nothing is left running or queued."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import psutil
import pytest

import jobloom
from jobloom.core.states import ACTIVE_STATES
from tests.conftest import POSTGRES_URL
from tests.helpers import eventually

from .conftest import Processes

pytestmark = pytest.mark.slow

WINDOW = 12
"""Seconds of kills: one a second."""



def _peak(spans: list[str], deaths: dict[int, float]) -> int:
    """The most attempts really running at once: from start to end line, or to its process's death."""
    starts: dict[tuple[str, str], tuple[float, int]] = {}
    ends: dict[tuple[str, str], float] = {}
    for line in spans:
        kind, job, attempt, pid, at = line.split()
        if kind == "start":
            starts[(job, attempt)] = (float(at), int(pid))
        else:
            ends[(job, attempt)] = float(at)
    moments: list[tuple[float, int]] = []
    for key, (at, pid) in starts.items():
        end = ends.get(key, deaths.get(pid))
        assert end is not None, f"attempt {key} never ended and its process {pid} was not killed"
        moments += [(at, 1), (end, -1)]
    running = peak = 0
    for _, step in sorted(moments, key=lambda m: (m[0], m[1])):  # an end before a start at the same moment
        running += step
        peak = max(peak, running)
    return peak


async def test_chaos(app: jobloom.App, procs: Processes) -> None:
    tag = f"chaos-{uuid.uuid4().hex[:8]}"
    postgres = procs.url.startswith("postgres")
    if postgres:
        procs.env["JOBLOOM_IT_URL"] = procs.url + f"&application_name={tag}"
    rng = random.Random(7)

    def due(binding: str, n: int) -> list[tuple[str, dict[str, object], jobloom.EnqueueOptions]]:
        """``n`` jobs due over the kill window at the same density as ever (about 150 jobs a second in
        all), so that each kill still lands among running attempts of every kind."""
        return [(binding, {}, jobloom.EnqueueOptions(delay=rng.uniform(0, WINDOW - 2))) for _ in range(n)]

    least = await app.enqueue_many(due("LoggedAtLeastOnce", 1200))
    most = await app.enqueue_many(due("LoggedAtMostOnce", 240))
    gated = await app.enqueue_many(due("Spanned", 180))
    env = {**procs.env, "JOBLOOM_IT_LEASE": "1.0"}
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "jobloom.cli", "worker", "itapp:app", "--processes", "3", "--concurrency", "8",
         "--grace", "3", "--log-level", "error"], env=env, cwd=procs.state_dir, start_new_session=True)
    procs.procs.append(supervisor)
    deaths: dict[int, float] = {}
    try:
        sup = psutil.Process(supervisor.pid)
        await eventually(lambda: len(sup.children()) == 3, timeout=30, what="three worker processes")
        t0 = time.monotonic()
        terminated = 0
        while time.monotonic() - t0 < WINDOW:
            await asyncio.sleep(1.0)
            children = sup.children()
            if children:
                victim = rng.choice(children)
                deaths[victim.pid] = time.time()
                os.kill(victim.pid, signal.SIGKILL)
            if postgres and terminated < 2 and time.monotonic() - t0 > 4 * (terminated + 1):
                import psycopg

                with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
                    admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                  "WHERE application_name = %s", [tag])
                terminated += 1

        async def settled() -> bool:
            counts = await app.counts()
            return not any(by_state.get(s, 0) for by_state in counts.values() for s in ACTIVE_STATES)

        await eventually(settled, timeout=90, interval=0.5, what="no job left waiting, queued or running")
    finally:
        supervisor.send_signal(signal.SIGTERM)
        try:
            supervisor.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(supervisor.pid, signal.SIGKILL)
    assert len(deaths) >= WINDOW - 3, f"only {len(deaths)} processes were killed"
    if postgres:
        assert terminated == 2
    # the store is the test's own: every job of these bindings is one enqueued above
    counts = await app.counts(finished=True)
    assert counts.get("LoggedAtLeastOnce") == {"succeeded": len(least)}, counts
    assert counts.get("Spanned") == {"succeeded": len(gated)}, counts
    ended = counts.get("LoggedAtMostOnce", {})
    assert set(ended) <= {"succeeded", "stalled"} and sum(ended.values()) == len(most), counts
    starts = Counter(int(line.split()[0]) for line in procs.read("starts-most"))
    assert starts and max(starts.values()) == 1, "an at-most-once job started twice"
    assert _peak(procs.read("spans"), deaths) <= 3
