"""Limits between concurrency keys across three worker processes: turns and a rate per key, measured
inside the jobs."""

from __future__ import annotations

from collections import defaultdict

import pytest

import jobloom
from tests.helpers import eventually
from tests.rate_windows import DATETIME_RESOLUTION, window_violations

from .conftest import Processes

pytestmark = pytest.mark.slow


async def _succeeded(app: jobloom.App, n: int) -> bool:
    return len(await app.list_jobs(binding="KeyRated", state="succeeded", limit=100)) == n


async def test_keys_take_turns_across_three_processes(app: jobloom.App, procs: Processes) -> None:
    await app.enqueue_many([("TurnTaking", {"k": k}) for k in ["A"] * 100 + ["B"] * 100 + ["C"] * 5])
    for _ in range(3):
        procs.worker(concurrency=4)
    await eventually(lambda: len(procs.read("turns")) >= 30, timeout=60, what="the first 30 starts")
    started = [line.split() for line in procs.read("turns")]
    keys = [k for k, _, _ in started]
    assert keys[:15] == ["A", "B", "C"] * 5, keys[:15]  # C's five jobs among the first 15 starts
    assert keys[15:30] == ["A", "B"] * 7 + ["A"]
    times = [float(t) for _, t, _ in started]
    assert times == sorted(times)  # one at a time: each started after the one before it


async def test_each_key_keeps_its_rate_across_three_processes(app: jobloom.App, procs: Processes) -> None:
    keys = ("k1", "k2", "k3")
    await app.enqueue_many([("KeyRated", {"k": k}) for _ in range(8) for k in keys])
    for _ in range(3):
        procs.worker(concurrency=4)
    await eventually(lambda: _succeeded(app, 24), timeout=60, what="24 jobs done")
    inside: dict[str, list[float]] = defaultdict(list)
    pids = set()
    for key, at, pid, _ in (line.split() for line in procs.read("keyrated")):  # a lost lease's retry too
        inside[key].append(float(at))
        pids.add(pid)
    assert len(pids) >= 2, "the starts did not come from more than one process"
    jobs = await app.list_jobs(binding="KeyRated", limit=100)
    dispatched: dict[str, list[float]] = defaultdict(list)
    for j in jobs:
        assert j.started_at is not None and j.concurrency_key is not None
        dispatched[j.concurrency_key].append(j.started_at.timestamp())
    for key in keys:
        # as dispatched (the moment of the transaction): every window holds at most 1 + 4 * W starts of a key
        assert window_violations(dispatched[key], 4.0, 1.0, resolution=DATETIME_RESOLUTION) == [], key
        # as measured inside the jobs, each some ms after its dispatch (up to a token period on a busy
        # machine): the same, give or take 0.25 s; without a rate per key, 4 of a key would start at once
        assert window_violations(inside[key], 4.0, 1.0, resolution=0.25) == [], (key, sorted(inside[key]))
        assert max(inside[key]) - min(inside[key]) >= 7 * 0.25 - 0.25
    # three keys run side by side: the eight starts of each took about 7 token periods (1.75 s), not 3 x 1.75 s
    first, last = min(min(v) for v in dispatched.values()), max(max(v) for v in dispatched.values())
    assert last - first < 3 * 1.75
