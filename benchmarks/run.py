"""Run the whole bench suite on SQLite and PostgreSQL and record the results.

    .venv/bin/python benchmarks/run.py                      # everything, 3 repetitions, writes RESULTS.md
    .venv/bin/python benchmarks/run.py --stores sqlite --workloads drain,latency --repeat 1 --no-write
    ./dev bench peers | processes | hosts | histories     # the suites of their own (benchmarks/peers/run.py, ...)
    ./dev bench defaults                                    # `jobloom worker APP` with no flags: one row per store

Fixed sizes: N = 20,000 jobs per measurement (latency: 1,000 jobs at 50/s; history: 1,000,000
finished jobs already in the table), worker concurrency 100, and the median of 3 repetitions. Each
repetition is a fresh ``python -m jobloom.bench WORKLOAD --json`` process on fresh private stores.
The table between the markers in RESULTS.md is rewritten; the rest of the file (the analysis) is kept.
Raw reports of every repetition go to ``benchmarks/results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE / "RESULTS.md"
RESULTS_JSON = HERE / "results.json"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
WORKLOADS = ["enqueue", "drain", "latency", "limits", "history", "flows"]
STORE_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


def wait_for_quiet(limit: float, busy_max: float) -> float:
    """Wait (up to ``limit`` seconds) until the machine's CPUs are mostly idle; return the last busy %.

    Other processes on a small machine (test suites, builds) would be measured too: a repetition
    starts only when less than ``busy_max`` percent of the CPU time is in use, or after ``limit`` s.
    """
    import psutil  # type: ignore[import-untyped,unused-ignore]

    deadline = time.monotonic() + limit
    while True:
        busy = float(psutil.cpu_percent(interval=1.0))
        if busy <= busy_max or time.monotonic() > deadline:
            return busy


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (all cores), from boot."""
    import psutil  # type: ignore[import-untyped,unused-ignore]

    t = psutil.cpu_times()
    return float(sum(t) - t.idle - getattr(t, "iowait", 0.0))


def children_seconds() -> float:
    """CPU seconds of this script's finished child processes (and theirs)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu_loop_ms() -> float:
    """Milliseconds a fixed pure-Python loop takes now: the speed of a core at this moment.

    On a shared virtual machine this moves by more than half with no load visible inside it
    (neighbours on the host); recorded before and after each repetition to read the spread by.
    """
    t0 = time.perf_counter()
    x = 0
    for i in range(2_000_000):
        x += i
    return 1000 * (time.perf_counter() - t0)


def bench(workload: str, url: str, args: argparse.Namespace) -> dict[str, Any]:
    """One repetition of one workload, in a process of its own; its JSON report.

    Also records how much CPU the rest of the machine used meanwhile (``others_cpu_pct``, in % of
    all cores): the busy time of every core minus the bench's own processes. On PostgreSQL runs
    that includes the server working for the bench.
    """
    jobs = args.latency_jobs if workload == "latency" else args.jobs
    cmd = [sys.executable, "-m", "jobloom.bench", workload, "--url", url, "--json", "--no-progress",
           "-n", str(jobs), "--concurrency", str(args.concurrency), "--processes", args.processes,
           "--history-rows", str(args.history_rows), "--rate", str(args.rate), "--pairs", str(args.pairs)]
    before = cpu_loop_ms()
    busy0, ours0, t0 = busy_seconds(), children_seconds(), time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    others = max(0.0, busy_seconds() - busy0 - (children_seconds() - ours0))
    after = cpu_loop_ms()
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-4000:]}")
    report: dict[str, Any] = json.loads(out.stdout)
    report["others_cpu_pct"] = round(100 * others / (wall * (os.cpu_count() or 1)), 1)
    report["cpu_loop_ms"] = [round(before), round(after)]
    return report


def median_rows(reports: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per measurement key: the median over repetitions, the spread, and the first report's fields."""
    rows: dict[str, dict[str, Any]] = {}
    for rep in reports:
        for m in rep["measurements"]:
            row = rows.setdefault(m["key"], {**m, "values": []})
            if m["value"] is not None:
                row["values"].append(m["value"])
    for row in rows.values():
        values = row["values"]
        row["value"] = statistics.median(values) if values else None
        if row["value"] is not None and row["target"] is not None:
            good = row["value"] >= row["target"] if row["better"] == "higher" else row["value"] <= row["target"]
            row["met"] = good
        else:
            row["met"] = None
    return rows


def fmt(value: float | None, unit: str) -> str:
    """A value as the table shows it."""
    if value is None:
        return "n/a"
    if unit in ("jobs/s", "flows/s"):
        return f"{value:,.0f}"
    if unit == "ratio":
        return f"{value:.2f}"
    if unit == "ms":
        return f"{value:.2f}"
    return f"{value:.1f}"


def cell(row: dict[str, Any] | None) -> tuple[str, str]:
    """(value with spread, target with verdict) for one store."""
    if row is None:
        return "not run", ""
    if row["value"] is None:
        return row.get("note") or "n/a", ""
    unit = row["unit"]
    values = row["values"]
    text = fmt(row["value"], unit)
    if len(values) > 1:
        text += f" ({fmt(min(values), unit)}..{fmt(max(values), unit)})"
    target = ""
    if row["target"] is not None:
        sign = "≥" if row["better"] == "higher" else "≤"
        target = f"{sign} {fmt(row['target'], unit)}" + (" met" if row["met"] else " **missed**")
    return text, target


def table(by_store: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """The Markdown table: one row per measurement, one column pair per store."""
    stores = list(by_store)
    head = "| measurement | unit | " + " | ".join(f"{STORE_NAMES[s]} | target" for s in stores) + " |"
    lines = [head, "|" + "---|" * (2 + 2 * len(stores))]
    keys: list[str] = []
    labels: dict[str, tuple[str, str]] = {}
    for rows in by_store.values():
        for key, row in rows.items():
            if key not in labels:
                keys.append(key)
                labels[key] = (row["label"], row["unit"])
    for key in keys:
        label, unit = labels[key]
        cells: list[str] = []
        for s in stores:
            cells += cell(by_store[s].get(key))
        lines.append(f"| {label} | {unit} | " + " | ".join(cells) + " |")
    return lines


def markdown(by_store: dict[str, dict[str, dict[str, Any]]], reports: dict[str, list[dict[str, Any]]],
             args: argparse.Namespace, when: str) -> str:
    """The generated part of RESULTS.md."""
    first = next(iter(reports.values()))[0]
    env = first["environment"]
    pg = next((r[0]["environment"]["postgres"] for r in reports.values() if r[0]["environment"]["postgres"]), None)
    changed = env.get("uncommitted_changes") or []
    checkouts = sorted({(r["environment"]["commit"], tuple(r["environment"].get("uncommitted_changes") or []))
                        for reps in reports.values() for r in reps}, key=str)
    moved = ""
    if len(checkouts) > 1:
        commits = sorted({c for c, _ in checkouts if c})
        engine = engine_changes(commits) if len({files for _, files in checkouts}) == 1 else None
        moved = (f"- the checkout changed while the suite ran (commits {', '.join(f'`{c}`' for c in commits)}): "
                 + ("only in `src/jobloom/bench/`, so the engine measured is the same" if engine == [] else
                    "**rows were measured on different engine code**" + (f" ({', '.join(engine)})" if engine else "")))
        where: dict[str, list[str]] = {}
        for key, reps in reports.items():
            for c in sorted({r["environment"]["commit"] for r in reps}):
                where.setdefault(c, []).append(key.replace(":", " "))
        if engine != []:
            moved += "; " + "; ".join(f"`{c}`: {', '.join(keys)}" for c, keys in sorted(where.items()))
    noise = []
    for store in by_store:
        shares: list[float] = [float(r["others_cpu_pct"]) for k, reps in reports.items()
                               if k.startswith(store + ":") for r in reps if r.get("others_cpu_pct") is not None]
        if shares:
            noise.append(f"{STORE_NAMES[store]} runs {min(shares):.0f}..{max(shares):.0f}% (median "
                         f"{statistics.median(shares):.0f}%)")
    loops = [ms for reps in reports.values() for r in reps for ms in r.get("cpu_loop_ms", [])]
    speed = (f"- core speed: a fixed pure-Python loop took {min(loops):.0f}..{max(loops):.0f} ms (median "
             f"{statistics.median(loops):.0f} ms) around the repetitions: the spread the numbers carry"
             if loops else "")
    lines = [
        BEGIN,
        f"Measured {when} by `benchmarks/run.py` (median of {args.repeat}; min..max over the repetitions in "
        "parentheses).",
        "",
        f"- machine: {env['logical_cores']} cores ({env['cpu']}), {env['memory_gib']} GiB memory, {env['os']}",
        f"- software: Python {env['python']}, SQLite {env['sqlite']}, PostgreSQL {pg or 'not measured'}",
        f"- jobloom commit: `{env['commit']}`"
        + (f" plus uncommitted changes in {len(changed)} file(s) of the package (the checkout as it was)"
           if changed else ""),
        f"- sizes: N = {args.jobs:,} jobs per measurement; latency {args.latency_jobs:,} jobs at {args.rate:g}/s; "
        f"history {args.history_rows:,} finished jobs; no-op async jobs",
        f"- workers: `jobloom worker --concurrency {args.concurrency}` (jobs at once per process: a setting a user "
        f"would pick for I/O-bound async jobs), drain with `--processes` {args.processes.replace(',', ' and ')}; "
        f"limits, history and latency use 1 process; every worker serves only the binding measured; limits and history "
        f"run their two drains back to back {args.pairs} times per repetition, the ratio being the median of the "
        "pairs' ratios",
        "- the machine is shared: other processes used " + "; ".join(noise) + " of its CPU while the repetitions "
        "ran (on PostgreSQL runs this includes the server itself)",
        *([speed] if speed else []),
        *([moved] if moved else []),
        "",
        *table(by_store),
        END,
    ]
    return "\n".join(lines)


def engine_changes(commits: list[str]) -> list[str] | None:
    """Files outside the bench that differ between any two of ``commits`` (None: unknown)."""
    changed: set[str] = set()
    for other in commits[1:]:
        out = subprocess.run(
            ["git", "-C", str(HERE), "diff", "--name-only", commits[0], other, "--", "../src/jobloom",
             ":(exclude)../src/jobloom/bench"],
            capture_output=True, text=True, check=False,
        )
        if out.returncode != 0:
            return None
        changed.update(out.stdout.split())
    return sorted(changed)


def write_results(text: str) -> None:
    """Replace the generated part of RESULTS.md (or create the file with it)."""
    if RESULTS_MD.exists():
        old = RESULTS_MD.read_text()
        if BEGIN in old and END in old:
            head, rest = old.split(BEGIN, 1)
            _, tail = rest.split(END, 1)
            RESULTS_MD.write_text(head + text + tail)
            return
    RESULTS_MD.write_text("# jobloom benchmark results\n\n" + text + "\n")


SUITES = {"peers": "peers/run.py", "processes": "processes.py", "hosts": "hosts.py", "histories": "histories.py"}
"""``./dev bench NAME ...``: the benchmarks that are scripts of their own (each with ``--help``)."""


DEFAULTS_COLUMNS = (("defaults.drain", "drain jobs/s"), ("defaults.p50", "p50 ms"), ("defaults.p99", "p99 ms"),
                    ("defaults.rss", "worker RSS MB"), ("defaults.cpu", "worker CPU µs/job"),
                    ("defaults.enqueue", "enqueue one/s"), ("defaults.floor", "driver floor one/s"),
                    ("defaults.enqueue_ratio", "floor / enqueue"))


def defaults_table(by_store: dict[str, dict[str, dict[str, Any]]], repeat: int) -> str:
    """The issue's table: one row per store for ``jobloom worker APP`` with no flags (medians of ``repeat``)."""
    head = "| store | " + " | ".join(label for _, label in DEFAULTS_COLUMNS) + " |"
    lines = [head, "|---|" + "---:|" * len(DEFAULTS_COLUMNS)]
    for store, rows in by_store.items():
        cells = []
        for key, _ in DEFAULTS_COLUMNS:
            row = rows.get(key)
            if row is None or row["value"] is None:
                cells.append("n/a")
                continue
            text = fmt(row["value"], row["unit"]) if row["unit"] != "µs" else f"{row['value']:.1f}"
            if row.get("met") is False:
                text += " (**missed**)"
            cells.append(text)
        lines.append(f"| jobloom {STORE_NAMES[store]}, `jobloom worker APP` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + f"\n\n(median of {repeat}; targets in `jobloom/bench/model.py`)"


def main() -> int:
    """Entry point."""
    if len(sys.argv) > 1 and sys.argv[1] in SUITES:
        script = str(HERE / SUITES[sys.argv[1]])
        os.execv(sys.executable, [sys.executable, script, *sys.argv[2:]])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", nargs="?", choices=["defaults"],
                        help="defaults: only the defaults workload, printed as one row per store (nothing written)")
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--sqlite-url", default=f"sqlite:///{tempfile.gettempdir()}/jobloom-bench/bench.db")
    parser.add_argument("--postgres-url", default=os.environ.get(
        "JOBLOOM_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--latency-jobs", type=int, default=1_000)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--history-rows", type=int, default=1_000_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--processes", default="1,2")
    parser.add_argument("--pairs", type=int, default=3, help="Alternating drain pairs per limits/history ratio.")
    parser.add_argument("--quiet-wait", type=float, default=120.0,
                        help="Seconds to wait for an idle machine before each repetition.")
    parser.add_argument("--quiet-busy", type=float, default=20.0, help="CPU busy %% that counts as idle.")
    parser.add_argument("--render", action="store_true",
                        help="Run nothing: rewrite the table in RESULTS.md from results.json.")
    parser.add_argument("--merge", action="store_true",
                        help="Keep the other workloads' reports from results.json and replace only those run now.")
    parser.add_argument("--no-write", action="store_true",
                        help="Print the table; leave RESULTS.md and results.json alone.")
    parser.add_argument("--raw", type=Path, default=None,
                        help="Where the raw reports go (default: results.json here, unless --no-write).")
    args = parser.parse_args()
    if args.mode == "defaults":
        args.workloads, args.no_write = "defaults", True
        if args.repeat == 3 and "--repeat" not in sys.argv:
            args.repeat = 1
    urls = {"sqlite": args.sqlite_url, "postgres": args.postgres_url}
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    if args.sqlite_url.startswith("sqlite:///"):
        os.makedirs(os.path.dirname(args.sqlite_url.removeprefix("sqlite://")) or ".", exist_ok=True)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    reports: dict[str, list[dict[str, Any]]] = {}
    if args.render:
        stores, workloads = [], []
    if (args.merge or args.render) and RESULTS_JSON.exists():
        old = json.loads(RESULTS_JSON.read_text())
        reports.update(old["reports"])
        when = old["measured"] if args.render else f"{old['measured']} ({', '.join(workloads)} again {when})"
    for store in stores:
        for workload in workloads:
            reps = []
            for i in range(args.repeat):
                t0 = time.monotonic()
                busy = wait_for_quiet(args.quiet_wait, args.quiet_busy)
                print(f"[{store}] {workload} {i + 1}/{args.repeat} (cpu busy {busy:.0f}% before) ...", end="",
                      file=sys.stderr, flush=True)
                report = bench(workload, urls[store], args)
                report["cpu_busy_before"] = busy
                reps.append(report)
                print(f" {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
                if all(m["value"] is None for m in reps[-1]["measurements"]):
                    break  # not available: nothing to repeat
            reports[f"{store}:{workload}"] = reps
    by_store: dict[str, dict[str, dict[str, Any]]] = {}
    for key, reps in reports.items():
        store = key.split(":", 1)[0]
        by_store.setdefault(store, {}).update(median_rows(reps))
    if args.mode == "defaults":
        env = next(iter(reports.values()))[0]["environment"]
        loops = [ms for reps in reports.values() for r in reps for ms in r.get("cpu_loop_ms", [])]
        print(f"Measured {when}, commit {env['commit']}, {env['logical_cores']} cores ({env['cpu']}); core-speed "
              f"probe {min(loops):.0f}..{max(loops):.0f} ms (42 ms on a quiet machine)\n")
        print(defaults_table(by_store, args.repeat))
        return 0
    text = markdown(by_store, reports, args, when)
    print(text)
    raw = args.raw or (None if args.no_write or args.render else RESULTS_JSON)
    if raw is not None:
        raw.write_text(json.dumps({"measured": when, "reports": reports}, indent=1) + "\n")
    if not args.no_write:
        write_results(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
