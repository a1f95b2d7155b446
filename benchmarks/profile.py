"""Profile the drain and enqueue paths with py-spy, and say where the time goes per job.

    .venv/bin/pip install py-spy
    .venv/bin/python benchmarks/profile.py drain --url sqlite:////tmp/jb/p.db -n 100000
    .venv/bin/python benchmarks/profile.py enqueue-seq --url postgresql://postgres@127.0.0.1/test -n 5000

``drain`` queues N jobs in a private store, then runs one worker process
(``python -m jobloom.process``, concurrency 100) under ``py-spy record`` until they are all done.
``enqueue-seq``, ``enqueue-concurrent`` and ``enqueue-many`` run the bench's enqueue loops in a
process under py-spy. Each prints the functions with the most samples (self and inclusive), as a
share of the samples and in microseconds per job, and the CPU seconds that the profiled process
and PostgreSQL's backends used (to tell Python-bound from database-bound from waiting on round trips).
The collapsed stacks are kept (``--out``) for flame graphs.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped,unused-ignore]

from jobloom.bench.performers import APP_REF, PERFORMERS, Noop
from jobloom.bench.sandbox import Sandbox, Target
from jobloom.bench.workloads import fill

HERE = Path(__file__).resolve().parent
FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>[^()]*)\)$")


def short(frame: str) -> str:
    """``function (path/to/module.py)`` as ``module.py:function``."""
    m = FRAME.match(frame)
    if not m:
        return frame
    path = m.group("file")
    parts = Path(path).parts
    if "jobloom" in parts:
        path = "/".join(parts[parts.index("jobloom"):])
    elif "site-packages" in parts:
        path = "/".join(parts[parts.index("site-packages") + 1:])
    else:
        path = Path(path).name
    return f"{path}:{m.group('fn')}"


def summarize(raw: Path, jobs: int, rate: int, top: int = 25) -> str:
    """Top functions by self and by inclusive samples, with µs per job."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [short(f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        for f in set(frames):
            incl[f] += count
    per_job = 1e6 / rate / jobs
    out = [f"{total} samples at {rate}/s = {total / rate:.2f} s of active time = {total * per_job:.1f} µs per job",
           "", "self (top functions):"]
    for name, n in own.most_common(top):
        out.append(f"  {100 * n / total:5.1f}%  {n * per_job:7.1f} µs/job  {name}")
    out += ["", "inclusive (jobloom and drivers):"]
    shown = 0
    for name, n in incl.most_common():
        if shown >= top:
            break
        if name.startswith(("asyncio/", "runners.py", "base_events.py", "events.py", "<module>")):
            continue
        out.append(f"  {100 * n / total:5.1f}%  {n * per_job:7.1f} µs/job  {name}")
        shown += 1
    return "\n".join(out)


def postgres_cpu() -> dict[int, float]:
    """CPU seconds used so far by each PostgreSQL server process on this machine."""
    out: dict[int, float] = {}
    for p in psutil.process_iter(["name", "cpu_times"]):
        if p.info["name"] and p.info["name"].startswith("postgres") and p.info["cpu_times"]:
            out[p.pid] = p.info["cpu_times"].user + p.info["cpu_times"].system
    return out


def cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds used between two :func:`postgres_cpu` snapshots (new processes count from zero)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def schedstat(pid: int) -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for a CPU) of a process's main thread."""
    try:
        run_ns, wait_ns, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
    except (OSError, ValueError):
        return 0.0, 0.0
    return int(run_ns) / 1e9, int(wait_ns) / 1e9


class Window:
    """What the profiled process did between the first finished job and the last: on CPU, waiting for
    a CPU (other processes had it), or neither (blocked on I/O, a lock, or idle in the event loop)."""

    def __init__(self, postgres: bool = False) -> None:
        self.start: tuple[float, float, float] | None = None
        self.end: tuple[float, float, float] | None = None
        self.postgres = postgres
        self.pg_start: dict[int, float] = {}
        self.pg_end: dict[int, float] = {}

    def mark(self, pid: int, first: bool) -> None:
        run, wait = schedstat(pid)
        point = (time.monotonic(), run, wait)
        if first:
            self.start = point
            if self.postgres:
                self.pg_start = postgres_cpu()
        self.end = point

    def close(self) -> None:
        """Take the last PostgreSQL snapshot (while the worker's connections are still open)."""
        if self.postgres:
            self.pg_end = postgres_cpu()

    def describe(self, jobs: int) -> str:
        if self.start is None or self.end is None or self.end[0] <= self.start[0]:
            return "drain window not observed"
        wall = self.end[0] - self.start[0]
        run = self.end[1] - self.start[1]
        wait = self.end[2] - self.start[2]
        blocked = max(0.0, wall - run - wait)
        text = (f"drain window {wall:.2f} s: worker on CPU {run:.2f} s ({100 * run / wall:.0f}%), waiting for a "
                f"CPU {wait:.2f} s ({100 * wait / wall:.0f}%), blocked or idle {blocked:.2f} s "
                f"({100 * blocked / wall:.0f}%); {1e6 * run / jobs:.1f} µs of worker CPU per job")
        if self.postgres:
            pg = cpu_delta(self.pg_start, self.pg_end)
            text += (f"\nPostgreSQL server processes: {pg:.2f} s of CPU in the window ({100 * pg / wall:.0f}% of "
                     f"one core), {1e6 * pg / jobs:.1f} µs per job")
        return text


def record(cmd: list[str], env: dict[str, str], raw: Path, rate: int, progress: Any,
           window: Window | None = None) -> tuple[float, float]:
    """Run ``cmd`` under py-spy until ``progress()`` says done; SIGTERM it; return (its CPU s, wall s).

    ``progress()`` returns (started, done); the window is sampled from the first ``started``.
    """
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    wrapper = [spy, "record", "--format", "raw", "--nolineno", "--rate", str(rate), "--output", str(raw), "--"]
    said_file = tempfile.TemporaryFile()  # noqa: SIM115 - a worker at the info level writes a line per job
    proc = subprocess.Popen([*wrapper, *cmd] if rate > 0 else cmd, env=env, stdout=subprocess.DEVNULL,
                            stderr=said_file)
    t0 = time.monotonic()
    child: Any = None if rate > 0 else psutil.Process(proc.pid)
    cpu = 0.0
    seen_start = False
    try:
        while child is None and proc.poll() is None:
            kids = psutil.Process(proc.pid).children()
            child = kids[0] if kids else None
            time.sleep(0.01)
        while True:
            started, done = progress()
            if window is not None and child is not None and (started or done):
                window.mark(child.pid, first=not seen_start)
                seen_start = True
            if done:
                break
            if proc.poll() is not None:
                said_file.seek(0)
                said = said_file.read().decode(errors="replace")[-4000:]
                raise SystemExit(f"the profiled process ended early:\n{said}")
            time.sleep(0.02)
        wall = time.monotonic() - t0
        if window is not None:
            window.close()
        if child is not None and child.is_running():
            times = child.cpu_times()
            cpu = times.user + times.system
            child.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        said_file.close()
    return cpu, wall


def profile_drain(box: Sandbox, args: argparse.Namespace, raw: Path) -> str:
    """Queue N jobs, then profile one worker process draining them."""
    asyncio.run(box.prepare())
    after = box.last_id()
    performer = next(p for p in PERFORMERS if p.__name__ == args.performer)
    asyncio.run(fill(box, args.jobs, performer, extra={"no_key": True} if args.no_key else None))
    if args.analyze and box.dialect == "postgres":
        box.execute("ANALYZE jobloom_jobs")  # fresh planner statistics: what the claim plan looks like with them
    runner = [str(HERE / "querytimer.py")] if args.queries else ["-m", "jobloom.process"]
    only = [] if args.all_bindings else ["--bindings", args.performer]
    cmd = [sys.executable, *runner, APP_REF, "--concurrency", str(args.concurrency), *only, "--log-level",
           args.log_level]
    times = args.out / f"queries-{box.dialect}.json"
    times.unlink(missing_ok=True)
    env = {**box.env(), "JOBLOOM_QUERY_TIMES": str(times)}
    window = Window(postgres=box.dialect == "postgres")

    def progress() -> tuple[bool, bool]:
        finished = box.finished(after)[0]
        return finished > 0, finished >= args.jobs

    cpu, wall = record(cmd, env, raw, args.rate, progress, window)
    count, first, last = box.span(after)
    if last is None or first is None:
        raise SystemExit("no job finished")
    span = float(last) - float(first)
    head = (f"drain of {count:,} jobs, 1 process x {args.concurrency}: {span:.2f} s from first start to last "
            f"finish = {count / span:,.0f} jobs/s = {1e6 * span / count:.1f} µs per job\n"
            f"worker CPU {cpu:.2f} s ({1e6 * cpu / count:.1f} µs/job) in {wall:.2f} s wall (with start-up)\n"
            + window.describe(count))
    if args.queries:
        head += "\n\n" + query_table(times, count, span)
    return head + ("\n\n" + summarize(raw, count, args.rate) if args.rate else "")


def query_table(path: Path, jobs: int, span: float) -> str:
    """The query timer's figures: per named statement, wall time per job and share of the drain."""
    for _ in range(100):
        if path.exists():
            break
        time.sleep(0.05)
    stats = json.loads(path.read_text())
    lines = [f"{'statement':<44} {'calls':>7} {'rows':>8} {'ms/call':>8} {'µs/job':>7} {'% of span':>9}"]
    for name, (calls, rows, seconds) in sorted(stats.items(), key=lambda kv: -kv[1][2]):
        lines.append(f"{name:<44} {calls:>7.0f} {rows:>8.0f} {1e3 * seconds / calls:>8.3f} "
                     f"{1e6 * seconds / jobs:>7.1f} {100 * seconds / span:>8.1f}%")
    return "\n".join(lines)


async def _enqueue(kind: str, n: int, tasks: int, batch: int) -> None:
    from jobloom.bench.performers import worker_app

    app = worker_app()
    app.auto_migrate = True
    await app.enqueue(Noop, {"i": -1})
    if kind == "enqueue-seq":
        for i in range(n):
            await app.enqueue(Noop, {"i": i})
    elif kind == "enqueue-concurrent":
        async def one(first: int) -> None:
            for i in range(first, n, tasks):
                await app.enqueue(Noop, {"i": i})

        await asyncio.gather(*(one(k) for k in range(tasks)))
    else:
        for start in range(0, n, batch):
            await app.enqueue_many([(Noop, {"i": i}) for i in range(start, min(n, start + batch))])
    await app.close()


def profile_enqueue(box: Sandbox, args: argparse.Namespace, raw: Path) -> str:
    """Profile the bench's enqueue loop in a process of its own."""
    asyncio.run(box.prepare())
    cmd = [sys.executable, str(Path(__file__).resolve()), "_enqueue", args.kind, "-n", str(args.jobs)]
    marker = Path(str(raw) + ".done")
    env = {**box.env(), "JOBLOOM_PROFILE_DONE": str(marker)}
    pg0 = postgres_cpu()
    cpu, wall = record(cmd, env, raw, args.rate, lambda: (False, marker.exists()))
    pg = cpu_delta(pg0, postgres_cpu())
    marker.unlink(missing_ok=True)
    head = (f"{args.kind} of {args.jobs:,} jobs: process CPU {cpu:.2f} s ({1e6 * cpu / args.jobs:.1f} µs/job), "
            f"{wall:.2f} s wall (with start-up)"
            + (f"; PostgreSQL CPU {pg:.2f} s ({1e6 * pg / args.jobs:.1f} µs/job)" if box.dialect == "postgres" else ""))
    return head + ("\n\n" + summarize(raw, args.jobs, args.rate) if args.rate else "")


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["drain", "enqueue-seq", "enqueue-concurrent", "enqueue-many", "_enqueue"])
    parser.add_argument("sub", nargs="?")
    parser.add_argument("--url", default="sqlite:////tmp/jobloom-profile/p.db")
    parser.add_argument("-n", "--jobs", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--log-level", default="warning",
                        help="The worker's (info: a line per job, as `jobloom worker` logs by default).")
    parser.add_argument("--performer", default="Noop", help="drain: the bench performer whose jobs are queued")
    parser.add_argument("--no-key", action="store_true", help="drain: payloads without a key (Turns)")
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--rate", type=int, default=1000,
                        help="py-spy samples per second; 0 runs without py-spy (CPU and wait figures only)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/jobloom-profile"))
    parser.add_argument("--analyze", action="store_true",
                        help="drain on PostgreSQL: ANALYZE the jobs table after queueing (fresh planner statistics)")
    parser.add_argument("--all-bindings", action="store_true",
                        help="drain: the worker serves every bench binding (an empty limited one too), not only Noop")
    parser.add_argument("--queries", action="store_true",
                        help="drain: time every named statement in the worker (benchmarks/querytimer.py)")
    args = parser.parse_args()
    if args.kind == "_enqueue":  # the profiled child of profile_enqueue
        asyncio.run(_enqueue(args.sub, args.jobs, args.tasks, args.batch))
        Path(os.environ["JOBLOOM_PROFILE_DONE"]).touch()
        time.sleep(3600)  # stopped by the parent, so that py-spy's output ends with the work
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    target = Target(args.url)
    try:
        box = target.sandbox()
        raw = args.out / f"{args.kind}-{box.dialect}.txt"
        text = profile_drain(box, args, raw) if args.kind == "drain" else profile_enqueue(box, args, raw)
    finally:
        target.close()
    print(text)
    print(f"\ncollapsed stacks: {raw}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
