"""Pausing a binding across worker processes: nothing of it starts once the pause has committed."""

from __future__ import annotations

import pytest

import jobloom
from tests.helpers import eventually

from .conftest import Processes

pytestmark = pytest.mark.slow

BINDING = "LoggedAtLeastOnce"  # unlimited: its workers claim in parallel, without the binding's row lock


async def _counts(app: jobloom.App) -> dict[str, int]:
    return (await app.counts()).get(BINDING, {})


async def _started(app: jobloom.App) -> int:
    return len(await app.list_jobs(binding=BINDING, state="succeeded", limit=10_000)) + (await _counts(app)).get(
        "running", 0)


async def test_pause_holds_a_binding_in_every_worker_process(app: jobloom.App, procs: Processes) -> None:
    n = 400
    await app.enqueue_many([(BINDING, {}) for _ in range(n)])
    for _ in range(3):
        procs.worker(concurrency=4)
    await eventually(lambda: _started(app), what="jobs flowing", timeout=30)
    info = await app.pause_binding(BINDING)
    # what the store shows right after the pause committed: every later claim would take a queued job
    queued_at_pause = (await _counts(app)).get("queued", 0)
    assert info.paused and 0 < queued_at_pause < n
    # the jobs running at the pause finish; nothing else of the binding starts
    await eventually(_none_running(app), what="running jobs finished", timeout=20)
    # every worker keeps dispatching: each takes jobs of another binding, in cycles that also look at
    # the paused one (with room to spare); the registry shows the three of them serving it
    seen: set[str] = set()

    async def every_worker_cycled() -> bool:
        for job in await app.enqueue_many([("Noop", {}) for _ in range(6)]):
            done = await app.wait(job.id, timeout=10)
            seen.update(a.worker or "" for a in await app.attempts(done.id))
        return len(seen) == 3

    await eventually(every_worker_cycled, timeout=30, interval=0, what="each worker dispatched after the pause")
    paused = next(b for b in await app.list_bindings() if b.binding == BINDING)
    assert set(paused.workers) == seen
    assert paused.counts == {"queued": queued_at_pause}, "a job of the paused binding started after the pause"
    await app.resume_binding(BINDING)
    await eventually(lambda: _all_done(app, n), timeout=60, interval=0.1, what="all done after resume")


async def _all_done(app: jobloom.App, n: int) -> bool:
    return len(await app.list_jobs(binding=BINDING, state="succeeded", limit=10_000)) == n


def _none_running(app: jobloom.App):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return "running" not in await _counts(app)

    return check


async def test_a_batch_performer_with_concurrency_one_never_holds_two_batches(
    app: jobloom.App, procs: Processes
) -> None:
    n = 120
    for _ in range(3):
        procs.worker(concurrency=4)

    async def three_serving() -> bool:
        return len(next(b for b in await app.list_bindings() if b.binding == "Indexer").workers) == 3

    await eventually(three_serving, timeout=30, what="three workers serving Indexer")
    jobs = await app.enqueue_many([("Indexer", {"bad": i % 17 == 0}) for i in range(n)])

    async def finished() -> bool:
        counts = (await app.counts(finished=True)).get("Indexer", {})
        return counts.get("succeeded", 0) + counts.get("failed", 0) == n

    await eventually(finished, timeout=60, interval=0.1, what="every item finished")
    raw = (procs.state_dir / "gauge").read_text().split()
    assert int(raw[0]) == 0 and int(raw[1]) == 1, f"peak batches at once was {raw[1]}, the limit is 1"
    batches = [line.split() for line in procs.read("batches")]
    assert sum(int(size) for _, size in batches) == n and max(int(size) for _, size in batches) == 10
    for job in jobs:  # each item settled on its own
        got = await app.get_job(job.id)
        assert (got.state, got.attempt) == (("failed", 1) if got.payload["bad"] else ("succeeded", 1))
