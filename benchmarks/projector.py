"""The projector's cost per outbox event: fold a backlog of events into the read model, on each store.

    .venv/bin/python benchmarks/projector.py [--events 300000] [--store sqlite|postgres|both] [--repeat 3]

A private store gets ``--events`` outbox events as a drain leaves them (per job: ``enqueued``,
``started``, and ``succeeded`` with a run time of 0.1 to 20 ms; five bindings; over the last ten
minutes), inserted with one plain ``INSERT ... SELECT`` (set-up, not measured). Then
``project_once`` runs until the outbox is empty, as a worker's projector does with a backlog (batches
of 1,000, one transaction each). Printed: events per second, and the process CPU per event (on
PostgreSQL the server's part is not in it). Then the read model is checked against the events: every
event counted once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from jobloom.bench.sandbox import Target
from jobloom.housekeeping.stats import project_once, read_stats

PG_URL = os.environ.get("JOBLOOM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
KINDS = ("enqueued", "started", "succeeded")


def seed_sql(dialect: str, events: int, now: float) -> str:
    """One statement inserting ``events`` events (a third of each kind)."""
    if dialect == "sqlite":
        series = f"WITH RECURSIVE s(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM s WHERE x < {events - 1}) "
        source = "s"
        kind = "CASE x % 3 WHEN 0 THEN 'enqueued' WHEN 1 THEN 'started' ELSE 'succeeded' END"
        duration = "CASE x % 3 WHEN 2 THEN 0.0001 + (x % 997) * 0.00002 END"
        binding = "'B' || (x / 3 % 5)"
    else:
        series = ""
        source = f"generate_series(0, {events - 1}) AS x"
        kind = "CASE x % 3 WHEN 0 THEN 'enqueued' WHEN 1 THEN 'started' ELSE 'succeeded' END"
        duration = "CASE x % 3 WHEN 2 THEN 0.0001 + (x % 997) * 0.00002 END"
        binding = "'B' || (x / 3 % 5)"
    at = f"{now - 600:.3f} + x * {600.0 / events!r}"
    return (f"{series}INSERT INTO jobloom_events (at, job_id, binding, kind, attempt, duration) "
            f"SELECT {at}, x / 3 + 1, {binding}, {kind}, 1, {duration} FROM {source}")


async def one(url: str, events: int) -> tuple[float, float]:
    """Seed, fold, check: (events per second, CPU µs per event)."""
    target = Target(url)
    try:
        box = target.sandbox()
        await box.prepare()
        box.execute(seed_sql(box.dialect, events, time.time()))
        if box.dialect == "postgres":
            box.execute("ANALYZE jobloom_events")
        app = box.app()
        try:
            store = await app.store()
            wall, cpu = time.perf_counter(), time.process_time()
            folded = 0
            while n := await project_once(store):
                folded += n
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            stats = await read_stats(store, since=3600)
            expected = events // 3
            got = (stats.total.enqueued, stats.total.started, stats.total.succeeded, stats.total.runs)
            if folded != events or got != (expected,) * 4 or stats.pending_events:
                raise SystemExit(f"read model wrong: folded {folded} of {events}, counted {got}, "
                                 f"{stats.pending_events} left")
        finally:
            await app.close()
        return events / wall, cpu / events * 1e6
    finally:
        target.close()


async def main() -> None:
    """Parse the arguments, run each store ``--repeat`` times, print medians."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--store", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sqlite-dir", default="/tmp")
    args = parser.parse_args()
    urls = []
    if args.store in ("sqlite", "both"):
        urls.append(("sqlite", f"sqlite:///{args.sqlite_dir}/jlproj.db"))
    if args.store in ("postgres", "both"):
        urls.append(("postgres", PG_URL))
    for name, url in urls:
        runs = [await one(url, args.events) for _ in range(args.repeat)]
        rates = [r for r, _ in runs]
        cpus = [c for _, c in runs]
        print(f"{name:>8}: {statistics.median(rates):>9,.0f} events/s ({min(rates):,.0f}..{max(rates):,.0f}), "
              f"client CPU {statistics.median(cpus):.2f} µs/event ({min(cpus):.2f}..{max(cpus):.2f})", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
