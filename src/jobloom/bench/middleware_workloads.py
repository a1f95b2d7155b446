"""The ``middleware`` workload: what an empty middleware chain costs per job.

An empty middleware (an ``enqueue`` and a ``perform`` that only call the next one) is timed three
ways: the chain alone, without a store (enqueue and perform, per job); and enqueue (one awaited call
at a time) and an in-process drain of the same jobs on a private store, without middleware and with
it, alternating ``pairs`` times (the medians are reported).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from jobloom.bench.model import Measurement
from jobloom.bench.performers import Noop, bench_app
from jobloom.bench.workloads import Context
from jobloom.core.types import JobContext
from jobloom.engine.enqueue import DEFAULT_OPTIONS
from jobloom.engine.middleware import EnqueueCall, Middlewares, PerformNext

DEFAULT_JOBS = 5_000
CHAIN_CALLS = 100_000


class Empty:
    """A middleware that only calls the next one: the cost of the chain itself."""

    async def enqueue(self, request: EnqueueCall, call_next: Any) -> EnqueueCall:
        """Hand the request on."""
        out: EnqueueCall = await call_next(request)
        return out

    async def perform(self, ctx: JobContext, payload: Any, call_next: PerformNext) -> Any:
        """Run the attempt."""
        return await call_next()


async def _chain_seconds(calls: int) -> float:
    """Seconds per job of the chain alone: one enqueue and one perform through one empty middleware."""
    chain = Middlewares([Empty()])
    ctx = JobContext(1, "Noop", 1, None, "bench", 1)

    async def inner() -> None:
        return None

    t0 = time.perf_counter()
    for i in range(calls):
        await chain.enqueue(EnqueueCall("Noop", i, DEFAULT_OPTIONS))
        await chain.perform(ctx, i, inner)
    return (time.perf_counter() - t0) / calls


async def _store_run(ctx: Context, n: int, middleware: list[object]) -> tuple[float, float]:
    """Seconds per job to enqueue ``n`` jobs one awaited call at a time, then to drain them in-process."""
    box = await ctx.sandbox()
    app = bench_app(box.url, box.options, auto_migrate=True, middleware=middleware)
    try:
        await app.enqueue(Noop, {"i": -1})  # warm-up, not timed
        await app.drain()
        t0 = time.perf_counter()
        for i in range(n):
            await app.enqueue(Noop, {"i": i})
        enqueued = time.perf_counter() - t0
        t0 = time.perf_counter()
        await app.drain(concurrency=ctx.params.concurrency)
        drained = time.perf_counter() - t0
    finally:
        await app.close()
        box.close()
    return enqueued / n, drained / n


async def middleware(ctx: Context) -> list[Measurement]:
    """The cost of an empty middleware chain per job: alone, at enqueue and in a drain, with and without."""
    n, pairs = ctx.params.n(DEFAULT_JOBS), max(1, ctx.params.pairs)
    chain = await _chain_seconds(CHAIN_CALLS if ctx.params.jobs is None else max(100, n * 10))
    runs: dict[str, list[tuple[float, float]]] = {"none": [], "empty": []}
    for _ in range(pairs):
        for name, chain_of in (("none", []), ("empty", [Empty()])):
            ctx.progress.begin(f"middleware: {name}", 1)
            runs[name].append(await _store_run(ctx, n, list(chain_of)))
            ctx.progress.end()
            await asyncio.sleep(0)
    out = [Measurement("middleware.chain", "an empty middleware chain alone (enqueue + perform)", chain * 1e6,
                       "µs/job", better="lower", details={"calls": CHAIN_CALLS})]
    for i, step in enumerate(("enqueue", "drain")):
        for name in ("none", "empty"):
            value = statistics.median(r[i] for r in runs[name]) * 1e6
            label = f"{step}, {'no middleware' if name == 'none' else 'one empty middleware'}"
            out.append(Measurement(f"middleware.{step}.{name}", label, value, "µs/job", better="lower",
                                   details={"jobs": n, "pairs": pairs}))
    return out


__all__ = ["Empty", "middleware"]
