"""The workloads of jobs linked at run time: the cost per job of a chain of dependencies at two
lengths, and the ratio of the longer to the shorter (a cost per job that grows with the chain shows
as a ratio over 1). The rest: :mod:`jobloom.bench.workloads`."""

from __future__ import annotations

from jobloom.bench.model import Measurement
from jobloom.bench.performers import Noop
from jobloom.bench.processes import BenchError, WorkerGroup
from jobloom.bench.sandbox import Sandbox
from jobloom.bench.workloads import Context, wait_finished

CHAIN_SIZES = (100, 1_000)


async def dependencies(ctx: Context) -> list[Measurement]:
    """Chains of no-op jobs, each depending on the one before (100 and 1,000 long; with ``--jobs N``:
    N / 10 and N), enqueued with no worker running, then run by one ``jobloom worker`` process. Each
    chain is timed from its first job's start to its last job's end, as the store recorded them: one
    job runs at a time, so the cost per job is what it takes to end a job, release the next and run it.
    """
    top = ctx.params.jobs
    sizes = CHAIN_SIZES if top is None else (max(1, top // 10), max(2, top))
    box = await ctx.sandbox()
    per_job: dict[int, float] = {}
    try:
        for n in sizes:
            per_job[n] = await _chain(ctx, box, n)
    finally:
        box.close()
    small, large = sizes
    out = [Measurement(f"deps.chain.{k}", f"dependencies: a chain of {n:,}, per job", per_job[n] * 1000, "ms",
                       better="lower", details={"jobs": n, "seconds": round(per_job[n] * n, 4)})
           for k, n in (("small", small), ("large", large))]
    out.append(Measurement("deps.chain.ratio", f"dependencies: chain per job, {large:,} / {small:,}",
                           per_job[large] / per_job[small], "ratio", better="lower", details={"sizes": list(sizes)}))
    return out


async def _chain(ctx: Context, box: Sandbox, n: int) -> float:
    """Enqueue a chain of ``n`` jobs, run it with one worker process; seconds per job."""
    after = box.last_id()
    app = box.app()
    ctx.progress.begin(f"dependencies: enqueueing a chain of {n:,}", n)
    try:
        job = await app.enqueue(Noop, {"i": 0})
        for i in range(1, n):
            job = await app.enqueue(Noop, {"i": i}, depends_on=[job.id])
            ctx.progress.update(i + 1)
    finally:
        await app.close()
    ctx.progress.end()
    group = WorkerGroup(box, processes=1, concurrency=ctx.params.concurrency, bindings=["Noop"])
    group.start()
    try:
        await wait_finished(ctx, box, after, n, f"dependencies: a chain of {n:,}", group.check, group.output)
    finally:
        group.stop()
    count, first, last = box.span(after)
    if count != n or first is None or last is None:
        raise BenchError(f"dependencies: {count} of {n} jobs of the chain succeeded")
    return max(float(last) - float(first), 1e-9) / n
