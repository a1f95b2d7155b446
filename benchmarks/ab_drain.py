"""Drain rate of two jobloom source trees, alternating, measured the same way for both.

    git worktree add --detach /tmp/before 3b8c9b2
    .venv/bin/python benchmarks/ab_drain.py /tmp/before/src src --store sqlite --pairs 3
    .venv/bin/python benchmarks/ab_drain.py src src --after-args "--metrics-port 0"   # metrics off, then on

``jobloom.bench`` is part of the package, so comparing two versions with it compares two harnesses
too. This script uses only what every version has: it enqueues N no-op jobs with ``enqueue_many``,
starts ``python -m jobloom.cli worker ab.noopapp:app --processes 1 --concurrency C`` from the source
tree under test, waits until every job succeeded, and reads the rate from the store:
N / (last finished_at - first started_at). Each run gets a fresh SQLite file or PostgreSQL schema.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PG = os.environ.get("JOBLOOM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")

PREPARE = """
import asyncio, sys
from ab import noopapp
async def main(n):
    await noopapp.app.migrate()
    for s in range(0, n, 5000):
        await noopapp.app.enqueue_many([(noopapp.Noop, i) for i in range(s, min(n, s + 5000))])
    await noopapp.app.close()
asyncio.run(main(int(sys.argv[1])))
"""


def query(url: str, sql: str) -> Any:
    """One row of ``sql`` on the store at ``url``."""
    if url.startswith("sqlite:"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            return conn.execute(sql).fetchone()
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchone()


def run_once(src: str, store: str, jobs: int, concurrency: int, extra: list[str] | None = None) -> float:
    """Drain ``jobs`` no-op jobs with the engine in ``src``; jobs per second."""
    schema = None
    if store == "sqlite":
        url = f"sqlite:///{tempfile.mkdtemp(prefix='jobloom-ab-')}/ab.db"
    else:
        import psycopg

        schema = "ab_" + uuid.uuid4().hex[:10]
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        url = f"{PG}{'&' if '?' in PG else '?'}options=-csearch_path%3D{schema}"
    env = dict(os.environ, AB_URL=url, PYTHONPATH=f"{Path(src).resolve()}:{HERE}")
    try:
        subprocess.run([sys.executable, "-c", PREPARE, str(jobs)], env=env, check=True)
        worker = subprocess.Popen(
            [sys.executable, "-m", "jobloom.cli", "worker", "ab.noopapp:app", "--processes", "1",
             "--concurrency", str(concurrency), "--log-level", "warning", *(extra or [])],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 300
            while query(url, "SELECT count(*) FROM jobloom_jobs WHERE state = 'succeeded'")[0] < jobs:
                if time.monotonic() > deadline or worker.poll() is not None:
                    raise SystemExit(f"{src}: the drain did not finish")
                time.sleep(0.2)
            first, last = query(url, "SELECT min(started_at), max(finished_at) FROM jobloom_jobs")
            return jobs / (last - first)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
    finally:
        if schema is not None:
            import psycopg

            with psycopg.connect(PG, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def main() -> int:
    """Alternate the two source trees ``--pairs`` times and print each rate and the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="the first source tree (a folder holding the jobloom package)")
    parser.add_argument("after", help="the second source tree")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--before-args", default="", help="extra worker options for the first tree")
    parser.add_argument("--after-args", default="", help="extra worker options for the second tree "
                        "(e.g. '--metrics-port 0' to measure metrics on against off)")
    args = parser.parse_args()
    runs = [(args.before, args.before_args.split()), (args.after, args.after_args.split())]
    names = [f"{src} {' '.join(extra)}".strip() for src, extra in runs]
    rates: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(args.pairs):
        for name, (src, extra) in zip(names, runs, strict=True):
            rate = run_once(src, args.store, args.jobs, args.concurrency, extra)
            rates[name].append(rate)
            print(f"{name}: {rate:,.0f} jobs/s", flush=True)
    for name, got in rates.items():
        print(f"median {name}: {sorted(got)[len(got) // 2]:,.0f} jobs/s ({args.store}, {args.jobs:,} jobs, "
              f"concurrency {args.concurrency})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
