"""jobloom beside Huey, RQ, Procrastinate, BullMQ and graphile-worker, by one protocol, in one run: a table.

    ./dev bench peers                        # every system; writes results.json and the tables
    ./dev bench peers --systems huey,jobloom-postgres --no-write
    ./dev bench peers --systems bullmq,graphile-worker,huey --no-write

Huey, RQ and Procrastinate are installed into a virtualenv of their own, ``benchmarks/peers/.venv``
(made here on first use from ``requirements.txt``, pinned versions from PyPI; never into jobloom's
dependencies); jobloom runs from the interpreter running this script. BullMQ and graphile-worker are
npm packages run under Node (``node`` on the PATH, 20 or later): ``benchmarks/peers/node/`` pins them
in ``package.json`` and ``package-lock.json`` and this script installs them there with ``npm ci`` on
first use (``node_modules`` is not committed); their producer (``node/producer.mjs``) and workers are
Node scripts, driven by ``protocol.py`` through the same steps and stamps as the Python peers.

Huey and RQ use the local Redis (127.0.0.1:6379, db ``--redis-db``, flushed before and after: that db
only), BullMQ the same db under a key prefix of its own (``jobloom-peers-bullmq``, only those keys
deleted before and after); Procrastinate, graphile-worker and jobloom use the PostgreSQL at
``--postgres-url`` (Procrastinate and graphile-worker a database of their own, dropped after; jobloom a
fresh schema). Every worker runs with its defaults: graphile-worker's concurrency is 1 (``protocol.py
graphile-worker --graphile-jobs 24`` measures it at 24, outside the table). What each measurement is:
``protocol.py``.

The table is written to ``benchmarks/peers/results.md`` and between the ``peers`` markers of
``benchmarks/RESULTS.md`` (the one place for figures); raw figures to ``benchmarks/peers/results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
VENV = HERE / ".venv"
REQUIREMENTS = HERE / "requirements.txt"
NODE = HERE / "node"
NODE_SYSTEMS = {"bullmq", "graphile-worker"}
BEGIN, END = "<!-- peers:begin -->", "<!-- peers:end -->"
SYSTEMS = ["huey", "rq", "procrastinate", "bullmq", "graphile-worker", "jobloom-sqlite", "jobloom-postgres"]
LABELS = {
    "huey": "Huey {v} on Redis (`huey_consumer app.huey`)",
    "rq": "RQ {v} on Redis (`rq worker`)",
    "procrastinate": "Procrastinate {v} on PostgreSQL (`procrastinate worker`)",
    "bullmq": "BullMQ {v} on Redis, Node (`new Worker(queue, processor)`)",
    "graphile-worker": "graphile-worker {v} on PostgreSQL, Node (`graphile-worker`)",
    "jobloom-sqlite": "jobloom SQLite (`jobloom worker app`)",
    "jobloom-postgres": "jobloom PostgreSQL (`jobloom worker app`)",
}


def peers_python() -> Path:
    """The peers' interpreter: the virtualenv, made (or brought up to ``requirements.txt``) first."""
    python = VENV / "bin" / "python"
    stamp = VENV / ".installed"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    if not stamp.exists() or stamp.stat().st_mtime < REQUIREMENTS.stat().st_mtime:
        print("installing the peers into benchmarks/peers/.venv ...", file=sys.stderr, flush=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)], check=True)
        stamp.touch()
    return python


def node_peers() -> None:
    """The Node peers in ``node/node_modules``: ``npm ci`` first (again when ``package-lock.json`` changed)."""
    stamp = NODE / "node_modules" / ".installed"
    lock = NODE / "package-lock.json"
    if not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime:
        print("installing the Node peers into benchmarks/peers/node/node_modules ...", file=sys.stderr, flush=True)
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE, check=True)
        stamp.touch()


def cpu_loop_ms() -> float:
    """Milliseconds a fixed pure-Python loop takes now: the speed of a core at this moment."""
    t0 = time.perf_counter()
    x = 0
    for i in range(2_000_000):
        x += i
    return 1000 * (time.perf_counter() - t0)


def commit() -> str:
    """The checkout's commit (short), with ``+changes`` when the package has uncommitted edits."""
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "src"], capture_output=True,
                           text=True).stdout.strip()
    return out.stdout.strip() + (" plus uncommitted changes" if dirty else "")


def table(reports: list[dict[str, Any]]) -> list[str]:
    """The side-by-side Markdown table."""
    lines = ["| system | drain jobs/s | p50 ms | p99 ms | worker RSS MB | enqueue one/s |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in reports:
        label = LABELS[r["system"]].format(v=r.get("version", ""))
        if "error" in r:
            lines.append(f"| {label} | failed: {r['error']} | | | | |")
            continue
        jobs = "" if r["jobs"] == reports[0]["jobs"] else f" ({r['jobs']:,} jobs)"
        lines.append(f"| {label} | {r['drain_per_s']:,.0f}{jobs} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                     f"{r['rss_mb']:.0f} | {r['enqueue_per_s']:,.0f} |")
    return lines


def markdown(reports: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The generated block: how, where, when, then the table."""
    jobs = max(r.get("jobs", 0) for r in reports)
    loops = meta["cpu_loop_ms"]
    return "\n".join([
        BEGIN,
        f"Measured {meta['when']} by `./dev bench peers` (`benchmarks/peers/`) on jobloom commit `{meta['commit']}`; "
        f"machine: {meta['cores']} cores, shared with other work (load average "
        f"{meta['load'][0]:.1f}..{meta['load'][1]:.1f} while it ran; a fixed pure-Python loop took "
        f"{min(loops):.0f}..{max(loops):.0f} ms), so the numbers are noisy: "
        "compare the rows with each other, not with another run.",
        "",
        f"Protocol: {jobs:,} no-op jobs enqueued one call at a time (*enqueue one/s*), then one worker started with "
        "its defaults; *drain* is the steady rate from the first job's start to the last's; *p50/p99*: "
        f"{meta['latency_jobs']} jobs enqueued at {meta['rate']:g}/s to the idle worker, enqueue to the start of the "
        "job's body; *RSS*: all of the worker's processes together, peak.",
        "",
        *table(reports),
        END,
    ])


def replace_block(path: Path, text: str) -> None:
    """Replace the text between the peers markers of ``path`` (appended if the markers are missing)."""
    old = path.read_text() if path.exists() else ""
    if BEGIN in old and END in old:
        head, rest = old.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        path.write_text(head + text + tail)
    else:
        path.write_text(old + ("\n" if old and not old.endswith("\n") else "") + text + "\n")


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rq-jobs", type=int, default=2_000,
                        help="Jobs for RQ, whose worker forks a process per job (20,000 would take many minutes).")
    parser.add_argument("--latency-jobs", type=int, default=300)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--redis-db", type=int, default=13)
    parser.add_argument("--postgres-url", default=os.environ.get(
        "JOBLOOM_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--no-write", action="store_true", help="Print the table only.")
    args = parser.parse_args()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in LABELS]
    if unknown:
        parser.error(f"--systems: unknown {', '.join(unknown)} (known: {', '.join(SYSTEMS)})")
    peers = peers_python() if any(not s.startswith("jobloom") for s in systems) else None
    if NODE_SYSTEMS & set(systems):
        node_peers()
    reports: list[dict[str, Any]] = []
    loops: list[float] = []
    loads: list[float] = []
    for system in systems:
        python = sys.executable if system.startswith("jobloom") else str(peers)
        jobs = args.rq_jobs if system == "rq" else args.jobs
        cmd = [python, str(HERE / "protocol.py"), system, "--jobs", str(jobs), "--latency-jobs",
               str(args.latency_jobs), "--rate", str(args.rate), "--redis-db", str(args.redis_db),
               "--postgres-url", args.postgres_url]
        loops.append(cpu_loop_ms())
        loads.append(os.getloadavg()[0])
        print(f"[peers] {system} ...", end="", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        print(f" {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
        if out.returncode != 0:
            print(out.stderr[-3000:], file=sys.stderr)
            reports.append({"system": system, "jobs": jobs, "error": (out.stderr.strip().splitlines() or ["?"])[-1]})
            continue
        reports.append(json.loads(out.stdout.strip().splitlines()[-1]))
    loops.append(cpu_loop_ms())
    loads.append(os.getloadavg()[0])
    meta = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit(),
            "cores": os.cpu_count(), "machine": platform.platform(), "load": [min(loads), max(loads)],
            "cpu_loop_ms": loops, "latency_jobs": args.latency_jobs, "rate": args.rate}
    text = markdown(reports, meta)
    print(text)
    if not args.no_write:
        (HERE / "results.json").write_text(json.dumps({"meta": meta, "reports": reports}, indent=1) + "\n")
        (HERE / "results.md").write_text("# jobloom and its peers\n\n" + text + "\n")
        replace_block(ROOT / "benchmarks" / "RESULTS.md", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
