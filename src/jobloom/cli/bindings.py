"""``jobloom bindings …``: list bindings (paused or not, limits, jobs by state, workers), pause, resume.

All three work with ``--url`` alone: the store holds each binding's state and the registry of workers.
The list leaves out jobloom's own bindings (``jobloom.map``, ``jobloom.subflow``) unless ``--internal``.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from jobloom.app.bindings import BindingInfo
from jobloom.cli.common import (
    WAIT,
    AppOption,
    InternalOption,
    JsonOption,
    SchemaOption,
    UrlOption,
    WaitOption,
    console,
    open_target,
    print_json,
    print_table,
    run,
)
from jobloom.cli.limits import fmt_rate
from jobloom.flows.flow import INTERNAL_BINDINGS

bindings_cli = typer.Typer(
    name="bindings", help="Bindings: list them with their state, limits, jobs and workers; pause, resume.",
    no_args_is_help=True,
)

BindingArgument = Annotated[str, typer.Argument(metavar="BINDING", help="The binding (performer name).")]
COUNTED = ("queued", "scheduled", "running", "waiting", "failed", "stalled", "cancelled")


def bindings_table(rows: list[BindingInfo]) -> Table:
    """Bindings: paused or active, limits in force, jobs by state (succeeded and skipped left out), workers."""
    table = Table(header_style="bold")
    for name in ("binding", "state", "concurrency", "rate", "jobs", "workers"):
        table.add_column(name, no_wrap=name != "jobs")
    for r in rows:
        p = r.policy
        state = Text("paused", style="yellow") if r.paused else Text("active", style="green")
        jobs = ", ".join(f"{r.counts[s]} {s}" for s in COUNTED if r.counts.get(s)) or "-"
        table.add_row(
            r.binding + ("" if r.registered else " (not registered yet)"), state,
            "unlimited" if p.concurrency is None else str(p.concurrency), fmt_rate(p), jobs, str(len(r.workers)),
        )
    return table


def _show(rows: list[BindingInfo], as_json: bool) -> None:
    if as_json:
        print_json([r.as_json() for r in rows])
    elif not rows:
        console.print("no bindings yet (a worker registers its bindings when it starts)", style="dim")
    else:
        print_table(bindings_table(rows))


@bindings_cli.command("list")
def list_command(
    ctx: typer.Context, internal: InternalOption = False, app_ref: AppOption = None, url: UrlOption = None,
    schema: SchemaOption = None, as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """List every binding: paused or not, limits, jobs by state, how many live workers serve it (jobloom's
    own bindings only with --internal)."""
    app = open_target(ctx, app_ref, url, schema, wait)
    rows = run(app, lambda a: a.list_bindings())
    _show([r for r in rows if internal or r.binding not in INTERNAL_BINDINGS], as_json)


@bindings_cli.command("pause")
def pause_command(
    ctx: typer.Context, binding: BindingArgument, app_ref: AppOption = None, url: UrlOption = None,
    schema: SchemaOption = None, as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """Pause a binding: no job of it starts from now on (running ones finish; enqueue goes on)."""
    app = open_target(ctx, app_ref, url, schema, wait)
    _show([run(app, lambda a: a.pause_binding(binding))], as_json)


@bindings_cli.command("resume")
def resume_command(
    ctx: typer.Context, binding: BindingArgument, app_ref: AppOption = None, url: UrlOption = None,
    schema: SchemaOption = None, as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """Resume a paused binding: its waiting jobs start at the workers' next dispatch."""
    app = open_target(ctx, app_ref, url, schema, wait)
    _show([run(app, lambda a: a.resume_binding(binding))], as_json)
