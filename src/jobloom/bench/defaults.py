"""The ``defaults`` workload: what a user gets from ``jobloom worker APP`` with no flags at all.

The protocol compares jobloom with other job queues the way a user meets them:

- **drain**: 20,000 no-op jobs are enqueued first, then one ``jobloom worker APP`` is started with
  its defaults (no ``--concurrency``, no ``--processes``, the default log level); the rate is the
  store's own, N over first start to last finish;
- **latency**: an idle worker with its defaults, 300 jobs enqueued at a fixed rate by another process,
  one awaited call at a time; the time from enqueue to the start of ``perform``;
- **RSS**: the peak of the resident memory of *all* the worker's processes added up (with
  ``--processes 1``, the default, there is one; a supervisor counts too), sampled every 50 ms while it
  drains (from the first job's start to the last one's end);
- **enqueue, one at a time**: awaited ``enqueue`` calls one after the other, against the driver
  alone doing the least an enqueue must do (one awaited ``INSERT ... RETURNING`` per commit), the two
  alternating; the ratio floor / jobloom is the share of the driver's speed that jobloom keeps.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import time
from typing import Any

from jobloom.bench.model import Measurement
from jobloom.bench.performers import LATENCY_APP_REF, NOOP_APP_REF, Noop
from jobloom.bench.processes import BenchError, WorkerGroup
from jobloom.bench.sandbox import Sandbox
from jobloom.bench.workloads import Context, fill, percentile, start_delays, wait_finished
from jobloom.store.sqlite.store import sqlite_path

DRAIN_JOBS = 20_000
LATENCY_JOBS = 300  # at ``--rate`` per second (default 50)
ENQUEUE_CALLS = 2_000
ENQUEUE_ROUNDS = 3  # jobloom and the driver floor alternate this many times


async def defaults(ctx: Context) -> list[Measurement]:
    """Drain, latency, memory and one-at-a-time enqueue of a worker started with its defaults."""
    n = ctx.params.n(DRAIN_JOBS)
    small = ctx.params.jobs  # ``--jobs`` caps the latency and enqueue counts too (a quick run)
    latency_jobs = LATENCY_JOBS if small is None else min(LATENCY_JOBS, small)
    calls = ENQUEUE_CALLS if small is None else min(ENQUEUE_CALLS, small)
    drain, rss, pids, cpu = await _drain(ctx, n)
    delays = await _latency(ctx, latency_jobs)
    enq, floor = await _enqueue(ctx, calls)
    ratio = statistics.median(f / e for f, e in zip(floor, enq, strict=True))
    drain_details = {"jobs": n, "command": "jobloom worker APP", "processes_seen": pids,
                     "rss_mb": None if rss is None else round(rss, 1)}
    cpu_us = None if cpu is None else cpu / n * 1e6
    lat = {"jobs": len(delays), "rate": ctx.params.rate, "mean_ms": round(statistics.mean(delays), 3),
           "max_ms": round(max(delays), 3)}
    return [
        Measurement("defaults.drain", "defaults: drain, `jobloom worker APP`", drain, "jobs/s",
                    details=drain_details),
        Measurement("defaults.p50", "defaults: latency p50, enqueue to perform", percentile(delays, 50), "ms",
                    "lower", details=lat),
        Measurement("defaults.p99", "defaults: latency p99, enqueue to perform", percentile(delays, 99), "ms",
                    "lower", details=lat),
        Measurement("defaults.cpu", "defaults: worker CPU per job while draining", cpu_us, "µs", "lower",
                    details=drain_details),
        Measurement("defaults.rss", "defaults: RSS of all the worker's processes", rss, "MiB", "lower",
                    details=drain_details),
        Measurement("defaults.enqueue", "defaults: enqueue, one awaited call at a time", statistics.median(enq),
                    "jobs/s", details={"calls": calls, "rates": [round(r) for r in enq]}),
        Measurement("defaults.floor", "defaults: the driver alone, one awaited insert per commit",
                    statistics.median(floor), "jobs/s", details={"calls": calls, "rates": [round(r) for r in floor]}),
        Measurement("defaults.enqueue_ratio", "defaults: driver floor / enqueue (1 = the driver's speed)", ratio,
                    "ratio", "lower", details={"rounds": ENQUEUE_ROUNDS}),
    ]


async def _drain(ctx: Context, n: int) -> tuple[float, float | None, int, float | None]:
    box = await ctx.sandbox()
    try:
        ctx.progress.begin("defaults: queueing", n)
        after = box.last_id()
        await fill(box, n, Noop, ctx.progress.update)
        ctx.progress.end()
        group = WorkerGroup(box, processes=None, concurrency=None, app_ref=NOOP_APP_REF, flags=False,
                            launcher=ctx.launcher)
        group.start()
        try:
            await wait_finished(ctx, box, after, n, "defaults: drain", group.check, group.output)
        finally:
            group.stop()
        count, first, last = box.span(after)
        if count != n or first is None or last is None:
            raise BenchError(f"defaults: {count} of {n} jobs succeeded")
        return (n / max(float(last) - float(first), 1e-9), group.peak_total_between(float(first), float(last)),
                group.processes_between(float(first), float(last)), group.cpu_between(float(first), float(last)))
    finally:
        box.close()


async def _latency(ctx: Context, jobs: int) -> list[float]:
    box = await ctx.sandbox()
    group = WorkerGroup(box, processes=None, concurrency=None, app_ref=LATENCY_APP_REF, flags=False,
                        launcher=ctx.launcher)
    try:
        return await start_delays(ctx, box, group, jobs, ctx.params.rate, "defaults: latency")
    finally:
        group.stop()
        box.close()


async def _enqueue(ctx: Context, calls: int) -> tuple[list[float], list[float]]:
    """(jobloom's rates, the driver floor's rates), alternating on one private store."""
    box = await ctx.sandbox()
    enq: list[float] = []
    floor: list[float] = []
    app = box.app()
    try:
        await app.enqueue(Noop, {"i": -1})  # open the store: connecting is not measured
        ctx.progress.begin("defaults: enqueue one at a time, and the driver floor", 2 * ENQUEUE_ROUNDS)
        for k in range(ENQUEUE_ROUNDS):
            t0 = time.perf_counter()
            for i in range(calls):
                await app.enqueue(Noop, {"i": i})
            enq.append(calls / (time.perf_counter() - t0))
            floor.append(await _floor(box, calls))
            ctx.progress.update(2 * (k + 1))
        ctx.progress.end()
    finally:
        await app.close()
        box.close()
    return enq, floor


async def _floor(box: Sandbox, calls: int) -> float:
    """Awaited single-row ``INSERT ... RETURNING id`` per commit through the driver alone, per second."""
    sql = ("INSERT INTO bench_floor (binding, payload, run_at) VALUES ({p}, {p}, 0) RETURNING id")
    ddl = "CREATE TABLE IF NOT EXISTS bench_floor (id {pk}, binding text NOT NULL, payload text NOT NULL, run_at " \
          "double precision NOT NULL)"
    if box.dialect == "postgres":
        import psycopg

        options: dict[str, Any] = {}
        schema = box.options.get("schema")
        if schema:
            options["options"] = f"-c search_path={schema}"
        conn = await psycopg.AsyncConnection.connect(box.url, autocommit=True, **options)
        try:
            await conn.execute(ddl.format(pk="bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"))
            t0 = time.perf_counter()
            for i in range(calls):
                cur = await conn.execute(sql.format(p="%s"), ["Noop", f'{{"i": {i}}}'])
                await cur.fetchone()
            return calls / (time.perf_counter() - t0)
        finally:
            await conn.close()
    path = os.path.join(os.path.dirname(sqlite_path(box.url)), "floor.db")
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute(ddl.format(pk="INTEGER PRIMARY KEY"))
        t0 = time.perf_counter()
        for i in range(calls):
            db.execute("BEGIN IMMEDIATE")
            db.execute(sql.format(p="?"), ["Noop", f'{{"i": {i}}}']).fetchone()
            db.execute("COMMIT")
        return calls / (time.perf_counter() - t0)
    finally:
        db.close()
