"""The workloads of jobs linked at run time: the cost per job of a chain of dependencies, and of a
batch with a callback, each at two sizes, with the ratio of the larger to the smaller (a cost per
job that grows with the size shows as a ratio over 1). The rest: :mod:`jobloom.bench.workloads`."""

from __future__ import annotations

import time

from jobloom.bench.model import Measurement
from jobloom.bench.performers import Noop
from jobloom.bench.processes import BenchError, WorkerGroup
from jobloom.bench.sandbox import Sandbox
from jobloom.bench.workloads import Context, wait_finished

CHAIN_SIZES = (100, 1_000)
BATCH_SIZES = (1_000, 10_000)


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
    return out + await batches(ctx)


async def batches(ctx: Context) -> list[Measurement]:
    """Batches of no-op jobs with an ``on_complete`` callback (1,000 and 10,000 jobs; with ``--jobs N``:
    N / 10 and N): the time ``App.batch`` takes per job, and the time per job from the batch's first
    start to its callback's end, run by one ``jobloom worker`` process."""
    top = ctx.params.jobs
    sizes = BATCH_SIZES if top is None else (max(1, top // 10), max(2, top))
    box = await ctx.sandbox()
    runs: dict[int, tuple[float, float]] = {}
    try:
        for n in sizes:
            runs[n] = await _batch(ctx, box, n)
    finally:
        box.close()
    small, large = sizes
    out = []
    for k, n in (("small", small), ("large", large)):
        enqueue, run = runs[n]
        out.append(Measurement(f"deps.batch.{k}", f"batches: {n:,} jobs and a callback, per job", run * 1000, "ms",
                               better="lower", details={"jobs": n, "seconds": round(run * n, 4)}))
        out.append(Measurement(f"deps.batch.{k}.enqueue", f"batches: enqueueing {n:,} jobs, per job", enqueue * 1e6,
                               "µs", better="lower", details={"jobs": n, "seconds": round(enqueue * n, 4)}))
    out.append(Measurement("deps.batch.ratio", f"batches: per job, {large:,} / {small:,}",
                           runs[large][1] / runs[small][1], "ratio", better="lower", details={"sizes": list(sizes)}))
    return out


async def _batch(ctx: Context, box: Sandbox, n: int) -> tuple[float, float]:
    """Enqueue a batch of ``n`` jobs with a callback, run it with one worker process; seconds per job
    to enqueue it, and to run it to the callback's end."""
    after = box.last_id()
    app = box.app()
    try:
        began = time.perf_counter()
        await app.batch([(Noop, {"i": i}) for i in range(n)], on_complete=(Noop, {"i": -1}))
        enqueue = (time.perf_counter() - began) / n
    finally:
        await app.close()
    group = WorkerGroup(box, processes=1, concurrency=ctx.params.concurrency, bindings=["Noop"],
                        launcher=ctx.launcher)
    group.start()
    try:
        await wait_finished(ctx, box, after, n + 1, f"batches: {n:,} jobs and a callback", group.check,
                            group.output)
    finally:
        group.stop()
    count, first, last = box.span(after)
    if count != n + 1 or first is None or last is None:
        raise BenchError(f"batches: {count} of {n} jobs and the callback succeeded")
    return enqueue, max(float(last) - float(first), 1e-9) / n


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
    group = WorkerGroup(box, processes=1, concurrency=ctx.params.concurrency, bindings=["Noop"],
                        launcher=ctx.launcher)
    group.start()
    try:
        await wait_finished(ctx, box, after, n, f"dependencies: a chain of {n:,}", group.check, group.output)
    finally:
        group.stop()
    count, first, last = box.span(after)
    if count != n or first is None or last is None:
        raise BenchError(f"dependencies: {count} of {n} jobs of the chain succeeded")
    return max(float(last) - float(first), 1e-9) / n
