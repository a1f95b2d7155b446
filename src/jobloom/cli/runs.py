"""``jobloom runs …``: list the runs of flows, show one with its nodes, cancel and resume runs.

What the HTTP API (``/v1/runs``) and the dashboard's runs pages show, through the same
:class:`~jobloom.App` calls; ``--json`` prints the API's own representation of a run (and, for
``runs list``, of a page of runs: ``{"runs": [...], "next_cursor": ...}``). Everything works with
``--url`` alone: a run keeps its graph in the store, so no flow code is needed to read, cancel or
resume it.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Annotated, Any, Literal

import typer
from rich.table import Table
from rich.text import Text

from jobloom.app.facade import App
from jobloom.cli.common import (
    WAIT,
    AppOption,
    JsonOption,
    SchemaOption,
    UrlOption,
    WaitOption,
    console,
    fmt_duration,
    fmt_time,
    fmt_value,
    note,
    open_target,
    print_table,
    run,
)
from jobloom.cli.jobs import STATE_STYLES
from jobloom.cli.literal import literal
from jobloom.core.text import MAX_KEY_BYTES, MAX_NAME_BYTES, check_name
from jobloom.core.types import NodeState, Run
from jobloom.flows.runs import top_node
from jobloom.http.encode import dumps, run_dict

runs_cli = typer.Typer(
    name="runs",
    help="Runs of flows: list them, show one with its nodes, cancel, resume (what /v1/runs and the dashboard "
         "show; --url is enough).",
    no_args_is_help=True,
)

RunState = Literal["running", "cancelling", "failing", "succeeded", "failed", "cancelled"]
RUN_STYLES = {**STATE_STYLES, "running": "bold yellow", "cancelling": "red", "failing": "bold red"}

RunId = Annotated[str, typer.Argument(metavar="RUN_ID", help="The run's id.")]
ChildrenOption = Annotated[bool, typer.Option(
    "--children", help="List every fan-out and spawned child node too (by default they are counted by state).")]


def styled(state: str) -> Text:
    """A run's or a node's state, coloured."""
    return Text(state, style=RUN_STYLES.get(state, ""))


def _by_state(nodes: list[NodeState]) -> str:
    counts = Counter(n.state for n in nodes)
    return ", ".join(f"{n} {s}" for s, n in counts.most_common()) or "-"


def _first_line(text: str | None) -> str:
    if not text or not text.strip():
        return "-"
    return text.strip().splitlines()[0]


def runs_table(runs: list[Run]) -> Table:
    """Runs, newest first: id, flow, state, jobs by state, started, duration, error (as the dashboard)."""
    table = Table(header_style="bold")
    for name in ("run", "flow", "state", "jobs", "started", "took", "error"):
        table.add_column(name, justify="right" if name == "took" else "left")
    for r in runs:
        took = fmt_duration(r.created_at, r.finished_at) if r.finished_at else "-"
        table.add_row(r.id, r.flow, styled(r.state), _by_state(list(r.nodes.values())), fmt_time(r.created_at),
                      took, _first_line(r.error))
    return table


def run_fields(r: Run) -> Table:
    """One run's fields as a two-column grid."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    rows: list[tuple[str, str | Text]] = [
        ("id", r.id),
        ("flow", r.flow),
        ("state", styled(r.state)),
        ("jobs", _by_state(list(r.nodes.values()))),
        ("input", Text(literal(fmt_value(r.input)))),
        ("created", fmt_time(r.created_at)),
        ("finished", fmt_time(r.finished_at)),
        ("took", fmt_duration(r.created_at, r.finished_at) if r.finished_at else "-"),
        ("deadline", fmt_time(r.deadline)),
        ("parent job", "-" if r.parent_job_id is None else str(r.parent_job_id)),
        ("error", Text(literal(r.error or "-"))),
    ]
    for name, value in rows:
        grid.add_row(name, value)
    return grid


def nodes_table(nodes: list[NodeState]) -> Table:
    """A run's nodes in the order they were created: job id, state, attempts, result, error."""
    table = Table(title="nodes", title_justify="left", header_style="bold")
    table.add_column("node")
    table.add_column("job", justify="right")
    table.add_column("state")
    table.add_column("attempt", justify="right")
    table.add_column("result")
    table.add_column("error")
    for n in nodes:
        table.add_row(n.name, str(n.job_id), styled(n.state), str(n.attempt),
                      Text(literal(fmt_value(n.result))), Text(literal(_first_line(n.error))))
    return table


def print_run(r: Run, children: bool) -> None:
    """``runs show`` for people: fields, the flow's nodes, then fan-out and spawned children (counted by
    state unless ``children``)."""
    console.print(run_fields(r))
    console.print()
    ordered = sorted(r.nodes.values(), key=lambda n: n.job_id)
    tops = [n for n in ordered if top_node(n.name) == n.name]
    kids = [n for n in ordered if top_node(n.name) != n.name]
    if not ordered:
        console.print("no nodes", style="dim")
        return
    print_table(nodes_table(ordered if children else tops))
    if kids and not children:
        groups: dict[str, list[NodeState]] = {}
        for n in kids:
            groups.setdefault(top_node(n.name) or n.name, []).append(n)
        console.print()
        for name, members in groups.items():
            console.print(Text(literal(f"{name}: {len(members)} children: {_by_state(members)}")))
        console.print("--children lists them", style="dim")


def print_json_run(value: Any) -> None:
    """Write a run (or a page of runs) as the HTTP API writes it, indented, to stdout."""
    import json

    sys.stdout.write(json.dumps(json.loads(dumps(value)), indent=2) + "\n")
    sys.stdout.flush()


def _run_line(r: Run, verb: str) -> None:
    line = Text(literal(f"run {r.id} ({r.flow}) {verb}: "))
    line.append(styled(r.state))
    console.print(line)


# -- commands ---------------------------------------------------------------------------------------


@runs_cli.command("list")
def list_command(
    ctx: typer.Context,
    flow: Annotated[str | None, typer.Option(help="Only runs of this flow.")] = None,
    state: Annotated[RunState | None, typer.Option(help="Only runs in this state.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many runs.")] = 50,
    cursor: Annotated[str | None, typer.Option(help="The next page: the cursor a listing printed.")] = None,
    app_ref: AppOption = None, url: UrlOption = None, schema: SchemaOption = None, as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """List runs, newest first: id, flow, state, jobs by state, start, duration and error (--json: the
    API's page, {"runs": [...], "next_cursor": ...})."""
    if flow is not None:
        check_name("--flow", flow, MAX_NAME_BYTES)
    if cursor is not None:
        check_name("--cursor", cursor, MAX_KEY_BYTES)
    app = open_target(ctx, app_ref, url, schema, wait)
    found = run(app, lambda a: a.list_runs(flow, state, limit + 1, before=cursor))
    page, more = found[:limit], len(found) > limit
    next_cursor = page[-1].id if more else None
    if as_json:
        print_json_run({"runs": [run_dict(r) for r in page], "next_cursor": next_cursor})
        return
    if not page:
        console.print("no runs", style="dim")
    else:
        print_table(runs_table(page))
    if next_cursor is not None:
        note(f"more: --cursor {next_cursor}")


def _one(ctx: typer.Context, run_id: str, app_ref: str | None, url: str | None, schema: str | None,
         wait: float) -> App:
    check_name("RUN_ID", run_id, MAX_KEY_BYTES)
    return open_target(ctx, app_ref, url, schema, wait)


@runs_cli.command("show")
def show_command(
    ctx: typer.Context, run_id: RunId, children: ChildrenOption = False, app_ref: AppOption = None,
    url: UrlOption = None, schema: SchemaOption = None, as_json: JsonOption = False, wait: WaitOption = WAIT,
) -> None:
    """Show one run: its fields and input, and each node with its job, state, attempt, result and error."""
    r = run(_one(ctx, run_id, app_ref, url, schema, wait), lambda a: a.get_run(run_id))
    if as_json:
        print_json_run(run_dict(r))
    else:
        print_run(r, children)


@runs_cli.command("cancel")
def cancel_command(
    ctx: typer.Context, run_id: RunId, app_ref: AppOption = None, url: UrlOption = None,
    schema: SchemaOption = None, as_json: JsonOption = False, wait: WaitOption = WAIT,
) -> None:
    """Cancel a run and its sub-flow runs: nodes not started are cancelled at once, running ones are
    asked to stop (the run is cancelling until they have)."""
    r = run(_one(ctx, run_id, app_ref, url, schema, wait), lambda a: a.cancel_run(run_id))
    if as_json:
        print_json_run(run_dict(r))
    else:
        _run_line(r, "cancelled")


@runs_cli.command("resume")
def resume_command(
    ctx: typer.Context, run_id: RunId, app_ref: AppOption = None, url: UrlOption = None,
    schema: SchemaOption = None, as_json: JsonOption = False, wait: WaitOption = WAIT,
) -> None:
    """Run a failed or cancelled run again: the nodes that succeeded are kept, the others run again."""
    r = run(_one(ctx, run_id, app_ref, url, schema, wait), lambda a: a.resume_run(run_id))
    if as_json:
        print_json_run(run_dict(r))
    else:
        _run_line(r, "resumed")
