"""Drain rate of two jobloom source trees, alternating, measured the same way for both.

    git worktree add --detach /tmp/before 3b8c9b2
    .venv/bin/python benchmarks/ab_drain.py /tmp/before/src src --store sqlite --pairs 3
    .venv/bin/python benchmarks/ab_drain.py src src --after-args "--metrics-port 0"   # metrics off, then on

``jobloom.bench`` is part of the package, so comparing two versions with it compares two harnesses
too. This script uses only what every version has: it enqueues N no-op jobs with ``enqueue_many``,
starts ``python -m jobloom.cli worker ab.noopapp:app --processes 1 --concurrency C`` from the source
tree under test, waits until every job succeeded, and reads the rate from the store:
N / (last finished_at - first started_at). Each run gets a fresh SQLite file or PostgreSQL schema.

With ``--defaults`` the worker is ``jobloom worker ab.noopapp:app`` with no flags at all (each
version's own defaults: concurrency, processes, log level; its output to a file). Each run also
reports the CPU per job of all the worker's processes over the drain window (first start to last
finish, sampled every 20 ms and interpolated), which a busy shared machine moves less than the rate,
and the peak RSS of all of them added up in that window.

    .venv/bin/python benchmarks/ab_drain.py /tmp/before/src src --defaults --pairs 3

``AB_NO_PROJECTOR=1`` in the environment leaves the read model's projector out of both trees' app
(``ab/noopapp.py``). Engines before ``2236ee7`` ran housekeeping only when a cycle left nothing to
do, so their projector folded the outbox after the drain window; without it, both trees do the same work.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
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


class Sampler:
    """CPU seconds and RSS of a process and its descendants, every 20 ms, in a thread."""

    def __init__(self, pid: int) -> None:
        import psutil  # type: ignore[import-untyped,unused-ignore]

        self.root = psutil.Process(pid)
        self.samples: list[tuple[float, float, int]] = []  # (epoch s, CPU s so far, RSS bytes)
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.running:
            cpu, rss = 0.0, 0
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except Exception:
                return
            for proc in procs:
                try:
                    t = proc.cpu_times()
                    cpu += t.user + t.system
                    rss += proc.memory_info().rss
                except Exception:
                    pass
            self.samples.append((time.time(), cpu, rss))
            time.sleep(0.02)

    def stop(self) -> None:
        self.running = False
        self.thread.join(5)

    def cpu_between(self, start: float, end: float) -> float | None:
        """CPU seconds from ``start`` to ``end``, interpolated between the samples around each."""
        def at(moment: float) -> float | None:
            for (t0, c0, _), (t1, c1, _) in zip(self.samples, self.samples[1:], strict=False):
                if t0 <= moment <= t1:
                    return c0 + (c1 - c0) * ((moment - t0) / (t1 - t0) if t1 > t0 else 0.0)
            return None

        a, b = at(start), at(end)
        return None if a is None or b is None else b - a

    def rss_between(self, start: float, end: float) -> int:
        """The peak RSS of all the processes in the window (widened by a sample on each side)."""
        return max((r for t, _, r in self.samples if start - 0.03 <= t <= end + 0.03), default=0)


def run_once(src: str, store: str, jobs: int, concurrency: int, defaults: bool = False,
             extra: list[str] | None = None) -> tuple[float, str]:
    """Drain ``jobs`` no-op jobs with the engine in ``src``; (jobs per second, CPU and memory as text)."""
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
        flags = [] if defaults else ["--processes", "1", "--concurrency", str(concurrency), "--log-level", "warning"]
        said = tempfile.TemporaryFile()  # noqa: SIM115 - closed below
        worker = subprocess.Popen(
            [sys.executable, "-m", "jobloom.cli", "worker", "ab.noopapp:app", *flags, *(extra or [])],
            env=env, stdout=said, stderr=subprocess.STDOUT)
        sampler = Sampler(worker.pid)
        try:
            deadline = time.monotonic() + 300
            while query(url, "SELECT count(*) FROM jobloom_jobs WHERE state = 'succeeded'")[0] < jobs:
                if time.monotonic() > deadline or worker.poll() is not None:
                    raise SystemExit(f"{src}: the drain did not finish")
                time.sleep(0.2)
            first, last = query(url, "SELECT min(started_at), max(finished_at) FROM jobloom_jobs")
            time.sleep(0.05)  # a sample after the last finish
            cpu = sampler.cpu_between(first, last)
            rss = sampler.rss_between(first, last) / 2**20
            return jobs / (last - first), (f"{cpu / jobs * 1e6:.1f} µs CPU/job" if cpu else "CPU n/a") + \
                f", RSS {rss:.1f} MB"
        finally:
            sampler.stop()
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
            said.close()
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
    parser.add_argument("--defaults", action="store_true", help="`jobloom worker APP` with no flags, each its own")
    args = parser.parse_args()
    runs = [(args.before, args.before_args.split()), (args.after, args.after_args.split())]
    names = [f"{src} {' '.join(extra)}".strip() for src, extra in runs]
    rates: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(args.pairs):
        for name, (src, extra) in zip(names, runs, strict=True):
            rate, usage = run_once(src, args.store, args.jobs, args.concurrency, args.defaults, extra)
            rates[name].append(rate)
            print(f"{name}: {rate:,.0f} jobs/s, {usage}", flush=True)
    for name, got in rates.items():
        how = "each version's defaults" if args.defaults else f"concurrency {args.concurrency}"
        print(f"median {name}: {sorted(got)[len(got) // 2]:,.0f} jobs/s ({args.store}, {args.jobs:,} jobs, {how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
