"""Big histories: drain, enqueue and latency with 1,000,000 and 5,000,000 finished jobs in the store,
against an empty store, on SQLite and PostgreSQL; and retention deleting finished jobs past their
retention, against the 1,000 jobs per second a busy queue finishes.

    ./dev bench histories                                  # both stores, 0 / 1M / 5M, ~20 min
    ./dev bench histories --stores postgres --rows 0,1000000 --json out.json

Per store and history size, on a fresh store: the history is inserted first (``Sandbox.insert_history``:
succeeded jobs finished over the last 12 hours with their attempts, generated inside the database:
``INSERT ... SELECT`` from ``generate_series`` / a recursive CTE, then ``VACUUM ANALYZE`` on
PostgreSQL), then

- drain: ``--jobs`` queued no-op jobs of the history's own binding, then ``jobloom worker`` (1 process,
  ``--concurrency``) runs them; the rate from the store's timestamps;
- enqueue: ``--enqueue-jobs`` jobs, one awaited ``enqueue`` at a time (jobs/s), after the drain (they stay queued);
- latency: an idle worker, ``--latency-jobs`` jobs enqueued at ``--rate`` by a producer process;
  enqueue to the start of ``perform``, p50 and p99;
- retention: ``--prune-jobs`` succeeded jobs finished two days ago (past the default retention of a
  day) are added, then :func:`jobloom.housekeeping.retention.prune` runs round after round, as the
  retention housekeeper does while it is behind, until none is left: jobs deleted per second.

The empty store is measured first and again last, so drift of the shared machine shows.
``--latency-pairs K`` measures latency alone, on an empty store and on the full one alternately, K times.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from typing import Any

from jobloom.bench.performers import LATENCY_APP_REF, Noop, Stamped
from jobloom.bench.processes import WorkerGroup
from jobloom.bench.sandbox import Sandbox, Target
from jobloom.bench.workloads import Context, Params, drain_once, percentile, start_delays
from jobloom.housekeeping.retention import prune

TWO_DAYS = 2 * 86_400.0


async def enqueue_rate(box: Sandbox, n: int) -> float:
    """``n`` awaited enqueues, one at a time: jobs/s (one warm-up first, not timed)."""
    app = box.app()
    try:
        await app.enqueue(Noop, {"i": -1})
        t0 = time.perf_counter()
        for i in range(n):
            await app.enqueue(Noop, {"i": i})
        return n / (time.perf_counter() - t0)
    finally:
        await app.close()


async def latency(ctx: Context, box: Sandbox, n: int, rate: float) -> tuple[float, float]:
    """p50 and p99 (ms), enqueue to the start of ``perform``, of ``n`` jobs enqueued at ``rate``."""
    group = WorkerGroup(box, processes=1, concurrency=ctx.params.concurrency, app_ref=LATENCY_APP_REF,
                        bindings=[Stamped.__name__])
    try:
        delays = await start_delays(ctx, box, group, n, rate, "latency")
    finally:
        group.stop()
    return percentile(delays, 50), percentile(delays, 99)


async def retention(box: Sandbox, n: int) -> dict[str, Any]:
    """Add ``n`` jobs past retention; prune round after round until none is left: jobs deleted per second."""
    box.insert_history(n, age=TWO_DAYS)
    app = box.app()
    try:
        store = await app.store()
        deleted, rounds = 0, 0
        t0 = time.perf_counter()
        while True:
            got, more = await prune(store, app.specs, store.now())
            deleted += got
            rounds += 1
            if not more and got == 0:
                break
        seconds = time.perf_counter() - t0
    finally:
        await app.close()
    return {"deleted": deleted, "seconds": round(seconds, 2), "rounds": rounds, "per_s": round(deleted / seconds)}


async def one(target: Target, rows: int, args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement on a fresh store holding ``rows`` finished jobs."""
    ctx = Context(target, Params(jobs=args.jobs, concurrency=args.concurrency))
    box = target.sandbox()
    await box.prepare()
    try:
        t0 = time.perf_counter()
        await asyncio.to_thread(box.insert_history, rows)
        setup = time.perf_counter() - t0
        print(f"  {rows:,} finished jobs inserted in {setup:.0f} s", file=sys.stderr, flush=True)
        drained = await drain_once(ctx, box, args.jobs, processes=1, label="drain")
        enq = await enqueue_rate(box, args.enqueue_jobs)  # after the drain: these stay queued
        p50, p99 = await latency(ctx, box, args.latency_jobs, args.rate)
        pruned = await retention(box, args.prune_jobs)
    finally:
        box.close()
    return {"store": target.dialect, "history": rows, "setup_seconds": round(setup, 1),
            "enqueue_per_s": round(enq), "drain_per_s": round(drained.rate), "p50_ms": round(p50, 3),
            "p99_ms": round(p99, 3), "retention": pruned}


async def latency_pairs(target: Target, rows: int, pairs: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Latency alone, alternating: a fresh empty store, then the store holding ``rows`` finished jobs,
    ``pairs`` times (the full store is filled once); each pair ran back to back on the same machine."""
    ctx = Context(target, Params(jobs=args.jobs, concurrency=args.concurrency))
    full = target.sandbox()
    await full.prepare()
    out = []
    try:
        await asyncio.to_thread(full.insert_history, rows)
        for k in range(pairs):
            empty = target.sandbox()
            await empty.prepare()
            try:
                e50, e99 = await latency(ctx, empty, args.latency_jobs, args.rate)
            finally:
                empty.close()
            f50, f99 = await latency(ctx, full, args.latency_jobs, args.rate)
            row = {"store": target.dialect, "history": rows, "pair": k + 1, "empty_p50_ms": round(e50, 3),
                   "empty_p99_ms": round(e99, 3), "full_p50_ms": round(f50, 3), "full_p99_ms": round(f99, 3)}
            print("  " + json.dumps(row), file=sys.stderr, flush=True)
            out.append(row)
    finally:
        full.close()
    return out


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one row per store and history size, with the ratio to the empty store's median."""
    out = ["| store | finished jobs in the store | enqueue one/s | drain jobs/s | p50 ms | p99 ms | "
           "retention: deleted/s | drain / empty | enqueue / empty |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for store in dict.fromkeys(r["store"] for r in rows):
        mine = [r for r in rows if r["store"] == store]
        empty = [r for r in mine if r["history"] == 0]
        drain0 = statistics.median(r["drain_per_s"] for r in empty) if empty else None
        enq0 = statistics.median(r["enqueue_per_s"] for r in empty) if empty else None
        for r in mine:
            ratio = f"{r['drain_per_s'] / drain0:.2f}" if drain0 else ""
            eratio = f"{r['enqueue_per_s'] / enq0:.2f}" if enq0 else ""
            name = "SQLite" if store == "sqlite" else "PostgreSQL"
            out.append(f"| {name} | {r['history']:,} | {r['enqueue_per_s']:,} | {r['drain_per_s']:,} | "
                       f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['retention']['per_s']:,} | {ratio} | {eratio} |")
    return "\n".join(out)


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every store, every size (the empty store first and last)."""
    results = []
    urls = {"sqlite": args.sqlite_url, "postgres": args.postgres_url}
    sizes = [int(x) for x in args.rows.split(",")]
    order = sizes + ([0] if 0 in sizes and len(sizes) > 1 else [])
    for store in args.stores.split(","):
        target = Target(urls[store])
        try:
            for rows in order:
                print(f"[{store}] history {rows:,} ...", file=sys.stderr, flush=True)
                row = await one(target, rows, args)
                print("  " + json.dumps(row), file=sys.stderr, flush=True)
                results.append(row)
        finally:
            target.close()
    return results


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--rows", default="0,1000000,5000000")
    parser.add_argument("--sqlite-url", default=f"sqlite:///{tempfile.gettempdir()}/jobloom-bench/histories.db")
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--enqueue-jobs", type=int, default=5_000)
    parser.add_argument("--latency-jobs", type=int, default=300)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--prune-jobs", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--json", default=None, help="Also write the rows to this file.")
    parser.add_argument("--latency-pairs", type=int, default=0,
                        help="Instead: latency only, empty and full (the largest --rows) alternating this many times.")
    args = parser.parse_args()
    if args.latency_pairs:
        urls = {"sqlite": args.sqlite_url, "postgres": args.postgres_url}
        rows = max(int(x) for x in args.rows.split(","))
        pairs: list[dict[str, Any]] = []
        for store in args.stores.split(","):
            target = Target(urls[store])
            try:
                pairs += asyncio.run(latency_pairs(target, rows, args.latency_pairs, args))
            finally:
                target.close()
        if args.json:
            with open(args.json, "w") as f:
                json.dump(pairs, f, indent=1)
        print("| store | finished jobs | pair | empty p50 ms | full p50 ms | empty p99 ms | full p99 ms |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for r in pairs:
            print(f"| {r['store']} | {r['history']:,} | {r['pair']} | {r['empty_p50_ms']:.2f} | {r['full_p50_ms']:.2f} "
                  f"| {r['empty_p99_ms']:.2f} | {r['full_p99_ms']:.2f} |")
        return 0
    results = asyncio.run(main_async(args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
