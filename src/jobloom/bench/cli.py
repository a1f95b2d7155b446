"""``jobloom bench WORKLOAD``: run a workload against a store and print a table (or ``--json``).

The ``jobloom`` command registers :func:`bench` as its ``bench`` command; ``python -m
jobloom.bench`` runs the same command on its own.
"""

from __future__ import annotations

import enum
import json
import signal
import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from jobloom.bench import ALL, Measurement, Params, Report, Reporter, RichReporter, run
from jobloom.bench.workloads import DEFAULT_JOBS, DEFAULT_LATENCY_JOBS
from jobloom.core.errors import JobloomError


class WorkloadName(enum.StrEnum):
    """The workloads ``jobloom bench`` can run."""

    enqueue = "enqueue"
    drain = "drain"
    latency = "latency"
    limits = "limits"
    history = "history"
    flows = "flows"
    dependencies = "dependencies"
    codec = "codec"
    middleware = "middleware"
    defaults = "defaults"
    all = ALL


def format_value(m: Measurement) -> str:
    """A measurement's value as a person reads it."""
    if m.value is None:
        return m.note or "not measured"
    if m.unit in ("jobs/s", "flows/s"):
        return f"{m.value:,.0f}"
    if m.unit == "ratio":
        return f"{m.value:.3f}"
    if m.unit == "ms":
        return f"{m.value:.2f}"
    return f"{m.value:,.1f}"


def format_target(m: Measurement) -> str:
    """The target, with its direction (``>= 20,000``)."""
    if m.target is None:
        return ""
    sign = ">=" if m.better == "higher" else "<="
    value = f"{m.target:,.0f}" if m.target >= 100 else f"{m.target:g}"
    return f"{sign} {value}"


def render(report: Report, console: Console) -> None:
    """Print the report as a table, with the machine and parameters underneath."""
    env = report.environment
    table = Table(title=f"jobloom bench {report.workload} on {report.dialect} ({report.url})", title_justify="left")
    table.add_column("measurement")
    table.add_column("value", justify="right")
    table.add_column("unit")
    table.add_column("target", justify="right")
    table.add_column("")
    for m in report.measurements:
        mark = {True: "[green]met[/green]", False: "[red]missed[/red]", None: ""}[m.met]
        table.add_row(m.label, format_value(m), m.unit if m.value is not None else "", format_target(m), mark)
    console.print(table)
    p = report.params
    versions = f"SQLite {env['sqlite']}" + (f", PostgreSQL {env['postgres']}" if env.get("postgres") else "")
    console.print(
        f"[dim]{env['logical_cores']} cores ({env['cpu']}), {env['memory_gib']} GiB, Python {env['python']}, "
        f"{versions}, commit {env['commit'] or 'unknown'}; worker concurrency {p['concurrency']}, "
        f"{report.seconds:.1f} s[/dim]",
        highlight=False,
    )


def bench(
    workload: Annotated[WorkloadName, typer.Argument(help="What to measure ('all' runs every workload).")],
    url: Annotated[str, typer.Option(
        "--url",
        help="The store. SQLite: temporary files beside this path; PostgreSQL: a temporary schema.",
    )] = "sqlite:///jobloom-bench.db",
    jobs: Annotated[int | None, typer.Option(
        "--jobs", "-n", min=1,
        help=f"Jobs per measurement (default {DEFAULT_JOBS:,}; latency {DEFAULT_LATENCY_JOBS}).",
    )] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Jobs at once in each worker process.")] = 100,
    processes: Annotated[str, typer.Option(help="Worker process counts to drain with, comma-separated.")] = "1,2",
    tasks: Annotated[int, typer.Option(min=1, help="Concurrent enqueueing tasks (enqueue).")] = 100,
    batch: Annotated[int, typer.Option(min=1, help="Jobs per enqueue_many call (enqueue).")] = 1_000,
    rate: Annotated[float, typer.Option(min=0.1, help="Jobs per second from the producer (latency).")] = 50.0,
    history_rows: Annotated[int, typer.Option(min=0, help="Finished jobs already in the table (history).")]
        = 1_000_000,
    pairs: Annotated[int, typer.Option(min=1, help="Alternating drain pairs behind a ratio (limits, history).")]
        = 3,
    timeout: Annotated[float | None, typer.Option(min=1, help="Seconds to wait for a drain to finish.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar on stderr.")] = True,
) -> None:
    """Measure jobloom on a store: one workload, printed as a table (like pgbench)."""
    try:
        counts = tuple(int(x) for x in processes.split(",") if x.strip())
    except ValueError:
        raise typer.BadParameter(f"{processes!r} is not a comma-separated list of numbers",
                                 param_hint="--processes") from None
    if not counts or min(counts) < 1:
        raise typer.BadParameter("give at least one process count >= 1", param_hint="--processes")
    params = Params(jobs=jobs, concurrency=concurrency, processes=counts, tasks=tasks, batch=batch, rate=rate,
                    history_rows=history_rows, pairs=pairs, timeout=timeout)
    # SIGTERM ends the run like Ctrl-C: workers are stopped and private stores removed on the way out.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    reporter: Reporter = RichReporter() if progress else Reporter()
    report = run(workload.value, url, params, reporter)
    if as_json:
        sys.stdout.write(json.dumps(report.as_dict(), indent=2) + "\n")
    else:
        render(report, Console())


def main(argv: list[str] | None = None) -> None:
    """``python -m jobloom.bench``: the bench command on its own."""
    command = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False,
                          context_settings={"help_option_names": ["-h", "--help"]})
    command.command()(bench)
    try:
        command(args=argv, prog_name="python -m jobloom.bench")
    except JobloomError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}", highlight=False)
        sys.exit(1)
