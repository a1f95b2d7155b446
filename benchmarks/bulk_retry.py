"""Bulk retry of 100,000 failed jobs while a worker serves another binding: the latency of that binding.

    .venv/bin/python benchmarks/bulk_retry.py --store sqlite
    .venv/bin/python benchmarks/bulk_retry.py --store postgres --failed 100000

A worker process serves binding ``Fast``; a prober process enqueues a ``Fast`` job every 5 ms; this
process seeds the failed jobs of binding ``Bulk`` and calls ``App.retry_many``. The latency of a probe
is from its enqueue to its claim (``started_at - created_at``, both on the store's clock); it is
reported for the probes enqueued before the retry (baseline) and during it. Not part of ``run.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

import jobloom

PG_URL = os.environ.get("JOBLOOM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


class Fast(jobloom.Performer[dict[str, Any], None]):
    """The binding whose latency is measured."""

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


def _worker(url: str, stop: Any) -> None:
    async def go() -> None:
        app = jobloom.App(url, performers=[Fast], auto_migrate=True)
        worker = jobloom.Worker(app, bindings=["Fast"], concurrency=8, grace=2.0)
        task = asyncio.create_task(worker.run())
        while not stop.is_set():
            await asyncio.sleep(0.01)
        worker.stop()
        await task
        await app.close()

    asyncio.run(go())


def _prober(url: str, stop: Any) -> None:
    async def go() -> None:
        app = jobloom.App(url, performers=[Fast], auto_migrate=True)
        sent, start = 0, time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(max(0.0, start + sent * 0.005 - time.monotonic()))
            await app.enqueue(Fast, {})
            sent += 1
        await app.close()

    asyncio.run(go())


def _seed(url: str, n: int) -> None:
    now = time.time()
    sql = f"""
INSERT INTO jobloom_jobs (binding, state, payload, run_at, attempt, max_attempts, delivery, created_at, finished_at,
                          error)
SELECT 'Bulk', 'failed', '{{}}', 0, 1, 1, 'at_least_once', {now}, {now}, 'boom'
FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n}) SELECT i FROM n) s"""
    if url.startswith("sqlite:"):
        import sqlite3

        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.execute(sql)
            conn.execute("ANALYZE")
    else:
        import psycopg

        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute(sql)
            pg.execute("ANALYZE jobloom_jobs")


def _ms(values: list[float]) -> str:
    if not values:
        return "no probes"
    q = statistics.quantiles(values, n=100) if len(values) > 1 else values * 99
    return f"p50 {statistics.median(values) * 1000:.2f} ms, p99 {q[98] * 1000:.2f} ms ({len(values)} probes)"


async def measure(url: str, failed: int) -> None:
    app = jobloom.App(url, performers=[Fast], auto_migrate=True)
    await app.migrate()
    _seed(url, failed)
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    procs = [ctx.Process(target=_worker, args=(url, stop)), ctx.Process(target=_prober, args=(url, stop))]
    for p in procs:
        p.start()
    try:
        await asyncio.sleep(3.0)  # warm up, then the baseline
        base_from = app.now()
        await asyncio.sleep(3.0)
        start = app.now()
        t0 = time.monotonic()
        n = await app.retry_many(jobloom.JobFilter(binding="Bulk", state="failed"))
        took = time.monotonic() - t0
        end = app.now()
        await asyncio.sleep(1.0)
    finally:
        stop.set()
        for p in procs:
            p.join()
    jobs = [j async for j in _all(app, "Fast")]
    lat = [(j.started_ts - j.created_ts, j.created_ts) for j in jobs if j.started_ts is not None]
    baseline = [d for d, c in lat if base_from <= c < start]
    during = [d for d, c in lat if start <= c < end]
    print(f"{url.split(':')[0]}: retried {n} of {failed} failed jobs in {took:.2f} s ({n / took:,.0f} jobs/s)")
    print(f"  Fast before the retry: {_ms(baseline)}")
    print(f"  Fast during the retry: {_ms(during)}")
    await app.close()


async def _all(app: jobloom.App, binding: str) -> Any:
    cursor = None
    while True:
        page = await app.list_jobs(binding=binding, limit=1000, cursor=cursor)
        for job in page:
            yield job
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def main() -> None:
    """Run the measurement on a private store of the chosen kind."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--failed", type=int, default=100_000)
    args = parser.parse_args()
    if args.store == "sqlite":
        folder = tempfile.mkdtemp(prefix="jobloom-bulk-")
        asyncio.run(measure(f"sqlite:///{folder}/bench.db", args.failed))
        return
    import psycopg

    schema = f"jl_bulk_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_URL, autocommit=True) as pg:
        pg.execute(f'CREATE SCHEMA "{schema}"')
    try:
        sep = "&" if "?" in PG_URL else "?"
        asyncio.run(measure(f"{PG_URL}{sep}options=-csearch_path%3D{schema}", args.failed))
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as pg:
            pg.execute(f'DROP SCHEMA "{schema}" CASCADE')


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
