"""Drain with 1, 2 and 4 worker processes on PostgreSQL, unlimited and with ``concurrency = 50``.

    ./dev bench processes                         # N = 20,000, --concurrency 100 per process, 1 repetition
    ./dev bench processes --repeat 2 --json processes.json

Each drain: N no-op jobs queued first on a fresh schema, then ``jobloom worker --processes P``
(``--concurrency`` jobs at once per process) serving either ``Noop`` (no limit) or ``Capped``
(``concurrency = 50``); the rate is from the store's timestamps (first start to last finish).

What bounds each drain is sampled while it runs, so the bend of the curve has its evidence:

- the server's sessions of this drain (``application_name`` set for the workers through PGAPPNAME),
  every 20 ms from ``pg_stat_activity``: the mean number per sample in each state and, when active,
  wait (``Lock/transactionid``, ``Lock/tuple``: a row lock another transaction holds;
  ``Client/ClientRead``: the server waits for the worker's next statement; ``IO/WALSync``: a commit's
  flush; ``running (no wait event)``: on a CPU, or waiting for one; ``idle in transaction``: the
  worker holds a transaction open between statements, i.e. the worker process is the one working);
- CPU: the machine's busy share over the drain (of all cores), and the shares taken by the worker
  processes and by the server backends of the drain's sessions; the rest is other work on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import threading
import time
import uuid
from typing import Any

import psutil

from jobloom.bench.performers import Capped, Noop
from jobloom.bench.processes import WorkerGroup
from jobloom.bench.sandbox import Sandbox, Target
from jobloom.bench.workloads import Context, Params, fill, wait_finished


class Waits:
    """Samples ``pg_stat_activity`` for the sessions named ``app`` every ``every`` seconds."""

    def __init__(self, url: str, app: str, every: float = 0.02) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.app = app
        self.every = every
        self.samples = 0
        self.active = 0
        self.events: collections.Counter[str] = collections.Counter()
        self.pids: set[int] = set()
        self._on = True
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while self._on:
            rows = self.conn.execute(
                "SELECT pid, state, wait_event_type, wait_event FROM pg_stat_activity WHERE application_name = %s",
                (self.app,)).fetchall()
            self.samples += 1
            for pid, state, kind, event in rows:
                self.pids.add(int(pid))
                if state == "active":
                    self.active += 1
                    self.events[f"{kind}/{event}" if kind else "running (no wait event)"] += 1
                else:
                    self.events[str(state)] += 1
            time.sleep(self.every)

    def backends(self) -> list[int]:
        """The server processes of the drain's sessions (seen so far)."""
        rows = self.conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                                 (self.app,)).fetchall()
        return sorted({int(r[0]) for r in rows} | self.pids)

    def stop(self) -> dict[str, Any]:
        """Stop; the mean number of the drain's sessions in each state or wait, per sample."""
        self._on = False
        self._thread.join(timeout=5)
        self.conn.close()
        n = max(1, self.samples)
        return {"samples": self.samples, "active_mean": round(self.active / n, 2),
                "sessions": {k: round(v / n, 2) for k, v in self.events.most_common(7)}}


def _cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


async def drain(target: Target, n: int, processes: int, concurrency: int, performer: type) -> dict[str, Any]:
    """One drain (module docstring) with its waits and CPU shares."""
    box: Sandbox = target.sandbox()
    await box.prepare()
    ctx = Context(target, Params(jobs=n, concurrency=concurrency))
    try:
        after = box.last_id()
        await fill(box, n, performer)
        app_name = f"jlproc-{uuid.uuid4().hex[:8]}"
        os.environ["PGAPPNAME"] = app_name
        try:
            group = WorkerGroup(box, processes=processes, concurrency=concurrency,
                                bindings=[performer.__name__])
            group.start()
        finally:
            del os.environ["PGAPPNAME"]
        waits: Waits | None = None
        try:
            # the drain starts when the first job does: sample from then on
            while box.finished(after)[0] == 0 and box.scalar(
                    f"SELECT count(*) FROM jobloom_jobs WHERE id > {after} AND state <> 'queued'") == 0:
                group.check()
                await asyncio.sleep(0.01)
            waits = Waits(box.url, app_name)
            pg = waits.backends()
            # all of the worker's processes: `--processes 1` is the worker itself, more are a supervisor's children
            root = psutil.Process(group._proc.proc.pid)  # type: ignore[union-attr]
            workers = [root.pid, *(c.pid for c in root.children(recursive=True))]
            cpu0 = psutil.cpu_times()
            w0, p0, t0 = _cpu(workers), _cpu(pg), time.monotonic()
            await wait_finished(ctx, box, after, n, "drain", group.check, group.output)
            wall = time.monotonic() - t0
            w1, p1 = _cpu(workers), _cpu(pg)
            cpu1 = psutil.cpu_times()
        finally:
            found = waits.stop() if waits is not None else {}
            group.stop()
        count, first, last = box.span(after)
        busy = (sum(cpu1) - cpu1.idle) - (sum(cpu0) - cpu0.idle)
        cores = os.cpu_count() or 1
        return {"processes": processes, "concurrency": concurrency, "binding": performer.__name__,
                "jobs": count, "rate": round(count / max(float(last) - float(first), 1e-9)),
                "machine_busy_pct": round(100 * busy / (wall * cores), 1),
                "workers_cpu_pct": round(100 * (w1 - w0) / (wall * cores), 1),
                "backends_cpu_pct": round(100 * (p1 - p0) / (wall * cores), 1), "backends": len(pg),
                "peak_rss_mb": group.peak_rss_mb, **found}
    finally:
        box.close()


def table(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of the runs (median rate when repeated)."""
    import statistics

    out = ["| binding | processes | drain jobs/s | machine CPU busy | workers CPU | their server backends' CPU | "
           "the drain's sessions, mean per sample: state or wait |", "|---|---:|---:|---:|---:|---:|---|"]
    keys = sorted({(r["binding"], r["processes"]) for r in rows}, key=lambda k: (k[0] != "Noop", k[1]))
    for binding, p in keys:
        runs = [r for r in rows if (r["binding"], r["processes"]) == (binding, p)]
        rate = statistics.median(r["rate"] for r in runs)
        spread = f" ({min(r['rate'] for r in runs):,}..{max(r['rate'] for r in runs):,})" if len(runs) > 1 else ""
        last = runs[-1]
        waits = ", ".join(f"{k} {v:.2f}" for k, v in last.get("sessions", {}).items())
        label = "unlimited" if binding == "Noop" else "`concurrency = 50`"
        out.append(f"| {label} | {p} | {rate:,.0f}{spread} | {last['machine_busy_pct']:.0f}% | "
                   f"{last['workers_cpu_pct']:.0f}% | {last['backends_cpu_pct']:.0f}% | {waits} |")
    return "\n".join(out)


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every configuration, ``repeat`` times, alternating."""
    target = Target(args.url)
    rows = []
    try:
        for _ in range(args.repeat):
            for performer in (Noop, Capped):
                for p in (int(x) for x in args.processes.split(",")):
                    row = await drain(target, args.jobs, p, args.concurrency, performer)
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    rows.append(row)
    finally:
        target.close()
    return rows


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("JOBLOOM_BENCH_POSTGRES_URL",
                                                        "postgresql://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--processes", default="1,2,4")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", default=None, help="Also write the rows to this file.")
    args = parser.parse_args()
    rows = asyncio.run(main_async(args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
