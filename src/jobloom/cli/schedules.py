"""``jobloom schedules …``: list schedules with their next and last runs, pause, resume, trigger now.

``list``, ``pause`` and ``resume`` work with ``--url`` alone (the store holds every schedule's
state); ``trigger`` makes a job, so it needs the app (``--app``) that knows the performer.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from jobloom.cli.common import (
    WAIT,
    AppOption,
    JsonOption,
    SchemaOption,
    UrlOption,
    WaitOption,
    console,
    fmt_time,
    open_target,
    print_json,
    print_table,
    require_app,
    run,
)
from jobloom.cli.literal import literal
from jobloom.schedules.api import ScheduleInfo

schedules_cli = typer.Typer(
    name="schedules", help="Schedules: list them, pause, resume, or trigger one now.", no_args_is_help=True,
)

NameArgument = Annotated[str, typer.Argument(metavar="NAME", help="The schedule's name.")]


DEFINED = {"code": "in code", "runtime": "at run time"}
"""How ``schedules list`` says where a schedule was defined: declared with the app (``App(schedules=...)``)
or added at run time (``add_schedule``; only those can be removed). The same with ``--app`` and ``--url``."""


def schedules_table(rows: list[ScheduleInfo]) -> Table:
    """Schedules with where they were defined, their timing, target, next and last runs.

    Times are in the schedule's own time zone, named (``2026-03-01 03:00:00 Europe/Berlin``). ``--json``
    adds the counts of ticks fired and skipped (overlap), the policies and the last run id.
    """
    table = Table(header_style="bold")
    for name in ("schedule", "defined", "when", "target", "next run", "last run", "last job"):
        table.add_column(name)
    for r in rows:
        upcoming = Text("paused", style="yellow") if r.paused else Text(fmt_time(r.next_run, r.timezone))
        table.add_row(
            r.name, DEFINED.get(r.origin, r.origin), r.timing, r.target, upcoming,
            fmt_time(r.last_run, r.timezone), "-" if r.last_job_id is None else str(r.last_job_id),
        )
    return table


def _show(rows: list[ScheduleInfo], as_json: bool) -> None:
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print("no schedules", highlight=False)
        return
    print_table(schedules_table(rows))
    for r in rows:
        if r.last_error:
            when = fmt_time(r.last_error_at, r.timezone)
            console.print(Text(literal(f"{r.name}: last error at {when}: {r.last_error}"), style="red"))


@schedules_cli.command("list")
def list_command(
    ctx: typer.Context, app_ref: AppOption = None, url: UrlOption = None, schema: SchemaOption = None,
    as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """List every schedule: next run, last run, last job and last error."""
    app = open_target(ctx, app_ref, url, schema, wait)
    _show(run(app, lambda a: a.list_schedules()), as_json)


@schedules_cli.command("pause")
def pause_command(
    ctx: typer.Context, name: NameArgument, app_ref: AppOption = None, url: UrlOption = None,
    schema: SchemaOption = None, as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """Stop a schedule from firing (a job already made runs on)."""
    app = open_target(ctx, app_ref, url, schema, wait)
    _show([run(app, lambda a: a.pause_schedule(name))], as_json)


@schedules_cli.command("resume")
def resume_command(
    ctx: typer.Context, name: NameArgument, app_ref: AppOption = None, url: UrlOption = None,
    schema: SchemaOption = None, as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """Fire a paused schedule again, from its next tick."""
    app = open_target(ctx, app_ref, url, schema, wait)
    _show([run(app, lambda a: a.resume_schedule(name))], as_json)


@schedules_cli.command("trigger")
def trigger_command(
    ctx: typer.Context, name: NameArgument, app_ref: AppOption = None, as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """Run a schedule now (paused or not): enqueue its job, or start its flow."""
    app = require_app(ctx, app_ref, "schedules trigger", wait)
    made: Any = run(app, lambda a: a.trigger_schedule(name))
    if as_json:
        print_json(made)
    elif hasattr(made, "binding"):
        console.print(f"job {made.id} ({made.binding}) {made.state}", highlight=False)
    else:
        console.print(f"run {made.id} ({made.flow}) {made.state}", highlight=False)
