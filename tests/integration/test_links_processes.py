"""Dependencies (and batches) with several real worker processes, one of them killed with SIGKILL
again and again: no dependant starts before its dependencies succeeded, and none is lost."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter

import pytest

import jobloom
from tests.helpers import eventually

from .conftest import Processes

pytestmark = pytest.mark.slow


async def _kill_one_every(procs: Processes, workers: list, seconds: float, every: float) -> int:
    """SIGKILL one worker (round robin) every ``every`` seconds for ``seconds``, each replaced at once."""
    kills, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        await asyncio.sleep(every)
        victim = workers[kills % len(workers)]
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        workers[kills % len(workers)] = procs.worker(concurrency=8, lease=1.0)
        kills += 1
    return kills


async def _all_succeeded(app: jobloom.App, binding: str, ids: list[int]) -> bool:
    """Whether every job of ``ids`` (all of ``binding``) has succeeded: one read, not one per job, so the
    test's polling leaves the workers the host's cores."""
    done = await app.list_jobs(binding=binding, state="succeeded", limit=10 * len(ids))
    return set(ids) <= {j.id for j in done}


async def test_dependants_never_start_early_under_kills(app: jobloom.App, procs: Processes) -> None:
    groups = 60
    deps = [await app.enqueue_many([("LoggedAtLeastOnce", {})] * 3) for _ in range(groups)]
    dependants = [await app.enqueue("Dependant", {"n": 3}, depends_on=[j.id for j in group]) for group in deps]
    chain = [await app.enqueue("Dependant", {"n": 1}, depends_on=[dependants[0].id])]
    for _ in range(19):  # a chain of 20 behind the first group
        chain.append(await app.enqueue("Dependant", {"n": 1}, depends_on=[chain[-1].id]))
    workers = [procs.worker(concurrency=8, lease=1.0) for _ in range(3)]
    kills = await _kill_one_every(procs, workers, seconds=6.0, every=1.0)
    assert kills >= 4

    await eventually(lambda: _all_succeeded(app, "Dependant", [j.id for j in [*dependants, *chain]]), timeout=90,
                     interval=0.2, what="every dependant to succeed")
    lines = procs.read("dependants")
    assert lines and all(line.endswith(" ok") for line in lines), [x for x in lines if not x.endswith(" ok")]
    started = Counter(int(line.split()[0]) for line in lines)
    assert set(started) == {j.id for j in [*dependants, *chain]}  # every one ran (a killed attempt may run again)


async def test_batch_callbacks_are_neither_lost_nor_doubled_under_kills(app: jobloom.App, procs: Processes) -> None:
    batches = [await app.batch([("LoggedAtLeastOnce", {})] * 6, on_complete=("BatchDone", {"kind": "complete"}),
                               on_success=("BatchDone", {"kind": "success"})) for _ in range(40)]
    workers = [procs.worker(concurrency=8, lease=1.0) for _ in range(3)]
    kills = await _kill_one_every(procs, workers, seconds=6.0, every=1.0)
    assert kills >= 4

    callbacks = [cb for b in batches for cb in (b.on_complete, b.on_success) if cb is not None]
    await eventually(lambda: _all_succeeded(app, "BatchDone", callbacks), timeout=90, interval=0.2,
                     what="every callback to succeed")
    lines = [line.split() for line in procs.read("callbacks")]
    jobs_of: dict[tuple[str, int], set[int]] = {}
    for kind, batch, job, _attempt, total, succeeded in lines:
        assert (total, succeeded) == ("6", "6")
        jobs_of.setdefault((kind, int(batch)), set()).add(int(job))
    assert set(jobs_of) == {(k, b.id) for b in batches for k in ("complete", "success")}
    assert all(len(jobs) == 1 for jobs in jobs_of.values())  # one callback job per batch and kind
    for b in batches:
        got = await app.get_batch(b.id)
        assert (got.total, got.succeeded, got.pending) == (6, 6, 0)
