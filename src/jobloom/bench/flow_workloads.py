"""The flow workloads of the benchmark: diamond runs completed per second, and the cost per child of
fan-outs at three sizes (the rest: :mod:`jobloom.bench.workloads`)."""

from __future__ import annotations

import asyncio

from jobloom.bench.model import Measurement
from jobloom.bench.performers import DIAMOND, FLOW_APP_REF, MAP
from jobloom.bench.processes import BenchError, WorkerGroup
from jobloom.bench.workloads import Context, wait_for

FLOW_START_BATCH = 100
MAP_SIZES = (100, 1_000, 10_000)


async def flows(ctx: Context) -> list[Measurement]:
    """Diamond flows (4 no-op nodes: a, then b and c, then d) completed per second.

    N / 4 runs are started first (N jobs in all), then one ``jobloom worker`` process runs them;
    the rate is taken from the first node's start to the last run's finish. Then the cost per child
    of fan-outs (:func:`fan_outs`).
    """
    runs, c = max(1, ctx.params.n() // 4), ctx.params.concurrency
    box = await ctx.sandbox()
    try:
        app = box.app(flows=True)
        ctx.progress.begin("flows: starting runs", runs)
        try:
            for start in range(0, runs, FLOW_START_BATCH):
                end = min(runs, start + FLOW_START_BATCH)
                await asyncio.gather(*(app.start(DIAMOND, {"i": i}) for i in range(start, end)))
                ctx.progress.update(end)
        finally:
            await app.close()
        ctx.progress.end()
        group = WorkerGroup(box, processes=1, concurrency=c, app_ref=FLOW_APP_REF, launcher=ctx.launcher)
        group.start()
        try:
            await wait_for(ctx, box.runs_finished, runs, f"flows: {runs:,} diamond runs", group.check,
                           group.output, what="runs")
        finally:
            group.stop()
        count, first, last = box.run_span()
    finally:
        box.close()
    if count != runs or first is None or last is None:
        raise BenchError(f"flows: {count} of {runs} runs succeeded")
    seconds = max(float(last) - float(first), 1e-9)
    details = {"runs": runs, "jobs": runs * 4, "processes": 1, "concurrency": c, "seconds": round(seconds, 4),
               "jobs_per_s": round(runs * 4 / seconds), "peak_rss_mb": group.peak_rss_mb}
    return [Measurement("flows.rate", "flows: diamond (4 nodes) completed", runs / seconds, "flows/s",
                        details=details), *await fan_outs(ctx)]


async def fan_outs(ctx: Context) -> list[Measurement]:
    """The cost per child of a fan-out (one map node of no-op children) at three sizes, and the ratio
    of the largest to the smallest: a cost per child that grows with the fan-out shows as a ratio
    over 1. Each run is timed from its start to its end, as the store recorded them, by one worker
    process (once it runs). Sizes: 100, 1,000 and 10,000 children (with ``--jobs N``: N / 100, N / 10 and N).
    """
    top = ctx.params.jobs
    sizes = MAP_SIZES if top is None else tuple(sorted({max(1, top // 100), max(1, top // 10), top}))
    box = await ctx.sandbox()
    per_child: dict[int, float] = {}
    try:
        app = box.app(flows=True)
        group = WorkerGroup(box, processes=1, concurrency=ctx.params.concurrency, app_ref=FLOW_APP_REF,
                            launcher=ctx.launcher)
        group.start()
        try:
            for n in (1, *sizes):  # the first one, untimed, waits for the worker process to start
                run = await app.start(MAP, {"n": n})

                def ended(run_id: str = run.id) -> tuple[int, int]:
                    state = box.scalar(f"SELECT state FROM jobloom_runs WHERE id = '{run_id}'")
                    return (0, 0) if state == "running" else (1, 0 if state == "succeeded" else 1)

                await wait_for(ctx, ended, 1, f"flows: a fan-out of {n:,}", group.check, group.output,
                               what="runs")
                created, finished = box.rows(
                    f"SELECT created_at, finished_at FROM jobloom_runs WHERE id = '{run.id}'")[0]
                per_child[n] = (float(finished) - float(created)) / n
        finally:
            group.stop()
            await app.close()
    finally:
        box.close()
    out = [Measurement(f"flows.map.{k}", f"flows: fan-out of {n:,}, per child", per_child[n] * 1000, "ms",
                       better="lower", details={"children": n, "seconds": round(per_child[n] * n, 4)})
           for k, n in zip(("small", "medium", "large"), _three(sizes), strict=True)]
    small, large = _three(sizes)[0], _three(sizes)[2]
    out.append(Measurement("flows.map.ratio", f"flows: fan-out per child, {large:,} / {small:,}",
                           per_child[large] / per_child[small], "ratio", better="lower",
                           details={"sizes": list(sizes)}))
    return out


def _three(sizes: tuple[int, ...]) -> tuple[int, int, int]:
    """Three sizes (the middle one repeated when the sizes collapsed to fewer)."""
    return sizes[0], sizes[len(sizes) // 2], sizes[-1]
