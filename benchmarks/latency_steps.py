"""Where a job's time from enqueue to ``perform`` goes, step by step, on either store.

    .venv/bin/python benchmarks/latency_steps.py --url sqlite:////tmp/jb/l.db
    .venv/bin/python benchmarks/latency_steps.py --url postgresql://postgres@127.0.0.1/test -n 500 --rate 50

The latency protocol of ``jobloom bench defaults``: one ``jobloom worker APP`` with no flags, idle,
and ``n`` jobs enqueued one awaited call at a time at ``rate`` per second by another process; each
job's latency is from its ``created_at`` to the moment its ``perform`` began. Both processes run
with the stamps of ``latency_steps/sitecustomize.py``, and each job's way is cut at:

1. the producer's transaction (SQLite) or statement (PostgreSQL) that stores it: its start, its end;
2. the worker's wake-up callback (the socket datagram on SQLite, ``NOTIFY`` on PostgreSQL);
3. the worker's claiming cycle, or its direct claim of the job a wake-up named (``Cycle.run_direct``):
   its start, each round trip (PostgreSQL) or statement (SQLite), its end;
4. ``perform``.

It prints the median, 90th and 99th percentile of each step over the jobs whose chain was found,
and of the whole, and for the slowest 1 % of the jobs the step that took most of their time. The
stamps cost a few microseconds each: the whole is a little above an unstamped run's, which is
printed first for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from jobloom.bench.performers import LATENCY_APP_REF
from jobloom.bench.processes import WorkerGroup
from jobloom.bench.sandbox import Target
from jobloom.bench.workloads import Context, Params, stamped_jobs

HERE = Path(__file__).resolve().parent
SITE = HERE / "latency_steps"
Record = tuple[str, float, float, str, int]  # name, start, end, statement, the task that made the call


async def run(url: str, n: int, rate: float, out: str | None, params: Params) -> list[tuple[int, float, float]]:
    """One latency run; (id, created_at, perform began) per job. ``out``: stamp into this folder."""
    target = Target(url)
    box = target.sandbox()
    await box.prepare()
    if out is not None:
        base = box.env

        def env() -> dict[str, str]:
            e = base()
            e["PYTHONPATH"] = os.pathsep.join(p for p in (str(SITE), e.get("PYTHONPATH", "")) if p)
            e["JOBLOOM_STEPS_OUT"] = out
            return e

        box.env = env  # type: ignore[method-assign]
    group = WorkerGroup(box, processes=None, concurrency=None, app_ref=LATENCY_APP_REF, flags=False)
    try:
        after = await stamped_jobs(Context(target, params), box, group, n, rate, "latency steps")
        return [(int(i), float(c), float(json.loads(r))) for i, c, r in box.rows(
            f"SELECT id, created_at, result FROM jobloom_jobs WHERE id > {after} AND state = 'succeeded' ORDER BY id")]
    finally:
        group.stop()
        box.close()
        target.close()


def load(folder: str) -> tuple[list[Record], list[Record]]:
    """(the worker's records, the producer's records) from the stamp files."""
    worker: list[Record] = []
    producer: list[Record] = []
    for path in Path(folder).glob("*.tsv"):
        lines = path.read_text().splitlines()
        if not lines:  # a process killed before it wrote its stamps
            continue
        records = [(p[0], float(p[1]), float(p[2]), p[3], int(p[4]))
                   for p in (line.split("\t") for line in lines[1:])]
        if "producer" in lines[0]:
            producer += records
        elif "process.py" in lines[0] or "jobloom.process" in lines[0]:
            worker += records
    return sorted(worker, key=lambda r: r[1]), sorted(producer, key=lambda r: r[1])


def steps(jobs: list[tuple[int, float, float]], worker: list[Record], producer: list[Record]) -> dict[str, list[float]]:
    """Each job's steps in ms, for the jobs whose whole chain was found."""
    commits = [r for r in producer if r[0] in ("SQLiteStore.transact", "PostgresStore.autocommit")]
    commit_starts = [r[1] for r in commits]
    wakes = [r[1] for r in worker if r[0] in ("SocketWakeups._readable", "Listener._signal")]
    cycles = [r for r in worker if r[0] in ("Cycle.run", "Cycle.run_direct")]  # a direct claim is the job's cycle
    cycle_starts = [r[1] for r in cycles]
    inner_kinds = {"SQLiteStore._begin", "SQLiteTx._one", "SQLiteTx._many",
                   "PostgresTx.fetch_rows_batch", "PostgresTx._send", "PostgresTx.commit"}
    inner = [r for r in worker if r[0] in inner_kinds]
    inner_starts = [r[1] for r in inner]
    worker_starts = [r[1] for r in worker]
    out: dict[str, list[float]] = defaultdict(list)
    for _, created, began in jobs:
        i = bisect.bisect_left(commit_starts, created)
        if i >= len(commits):
            continue
        _, c_start, c_end, _, _ = commits[i]
        k = bisect.bisect_left(wakes, c_start)
        if k >= len(wakes):
            continue
        wake = wakes[k]
        m = bisect.bisect_left(cycle_starts, wake)
        if m >= len(cycles):
            continue
        _, y_start, y_end, _, y_task = cycles[m]
        if not (y_end <= began and began - y_end < 0.05):  # not the cycle that started this job
            continue
        ms = 1000.0
        out["enqueue call to its store call"].append((c_start - created) * ms)
        out["the producer's store call (commit included)"].append((c_end - c_start) * ms)
        out["commit to the worker's wake-up"].append((wake - c_end) * ms)
        out["wake-up to the cycle's start"].append((y_start - wake) * ms)
        out["the cycle"].append((y_end - y_start) * ms)
        tx = next((r for r in worker[bisect.bisect_left(worker_starts, y_start):]
                   if r[0] in ("SQLiteStore.transact", "PostgresStore.transact") and r[4] == y_task), None)
        if tx is None or tx[2] > y_end:
            continue
        _, t_start, t_end, _, _ = tx
        out["  before its transaction"].append((t_start - y_start) * ms)
        out["  its transaction"].append((t_end - t_start) * ms)
        lo, hi = bisect.bisect_left(inner_starts, t_start), bisect.bisect_right(inner_starts, t_end)
        calls = [r for r in inner[lo:hi] if r[4] == y_task]  # not another task's (housekeeping)
        spent = 0.0
        for label, s, e, what, _ in calls:
            name = {"SQLiteStore._begin": "BEGIN", "PostgresTx.commit": "round trip: COMMIT",
                    "PostgresTx.fetch_rows_batch": "round trip: a batch of reads"}.get(label)
            if name is None:
                name = f"statement {what}" if label.startswith("SQLite") else f"round trip: {what[:40]!r}"
            out[f"    {name}"].append((e - s) * ms)
            spent += e - s
        out["    together"].append(spent * ms)
        if calls and calls[-1][0].startswith("SQLite"):  # the COMMIT is the transaction's end
            out["    COMMIT (after the last statement)"].append((t_end - calls[-1][2]) * ms)
            spent += t_end - calls[-1][2]
        out["    Python in the transaction, between those"].append((t_end - t_start - spent) * ms)
        out["  after its transaction (the jobs' tasks made)"].append((y_end - t_end) * ms)
        out["the cycle's end to perform"].append((began - y_end) * ms)
        out["WHOLE: enqueue to perform"].append((began - created) * ms)
    return out


def report(table: dict[str, list[float]], total: int) -> None:
    """Median and p90 per step."""
    found = len(table.get("WHOLE: enqueue to perform", []))
    print(f"{found} of {total} jobs traced; ms")
    print(f"{'step':<52} {'n':>5} {'median':>8} {'p90':>8} {'p99':>8}")
    for name, values in table.items():
        v = sorted(values)
        print(f"{name:<52} {len(v):>5} {statistics.median(v):>8.3f} {v[int(len(v) * 0.9)]:>8.3f} "
              f"{v[int(len(v) * 0.99)]:>8.3f}")
    slow = sorted(range(found), key=lambda i: table["WHOLE: enqueue to perform"][i])[int(found * 0.99):]
    if slow:  # the slowest 1 %: which step took their time
        print(f"the slowest {len(slow)} jobs, their largest step:")
        for i in slow:
            parts = {k: v[i] for k, v in table.items() if len(v) == found and not k.startswith(("WHOLE", "  "))}
            name = max(parts, key=lambda k: parts[k])
            print(f"  {table['WHOLE: enqueue to perform'][i]:8.3f} ms: {name} {parts[name]:.3f} ms")


def main() -> int:
    """Run unstamped, then stamped, and print the steps."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="store URL (default: a temporary SQLite file)")
    parser.add_argument("-n", type=int, default=300)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--stamped-only", action="store_true",
                        help="skip the unstamped run printed first for comparison (a quick check of the tracing)")
    parser.add_argument("--idle", type=float, default=Params().idle,
                        help="seconds the worker is left idle after its warm-up job, before the timed jobs")
    args = parser.parse_args()
    params = Params(idle=args.idle)
    with tempfile.TemporaryDirectory(prefix="jobloom-steps-") as folder:
        url = args.url or f"sqlite:///{folder}/steps.db"
        if not args.stamped_only:
            plain = asyncio.run(run(url, args.n, args.rate, None, params))
            d = sorted((b - c) * 1000 for _, c, b in plain)
            print(f"unstamped: p50 {statistics.median(d):.3f} ms, p99 {d[int(len(d) * 0.99)]:.3f} ms ({len(d)} jobs)")
        stamps = os.path.join(folder, "stamps")
        os.makedirs(stamps)
        jobs = asyncio.run(run(url, args.n, args.rate, stamps, params))
        d = sorted((b - c) * 1000 for _, c, b in jobs)
        print(f"stamped:   p50 {statistics.median(d):.3f} ms, p99 {d[int(len(d) * 0.99)]:.3f} ms")
        worker, producer = load(stamps)
        if not worker or not producer:
            print("no stamps were written (is PYTHONPATH honoured?)", file=sys.stderr)
            return 1
        report(steps(jobs, worker, producer), len(jobs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
