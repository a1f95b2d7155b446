"""``jobloom jobs …``: list (search), show, retry, cancel, delete and count jobs, through an app or a store URL."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from jobloom.app.diagnose import Diagnosis, why_not_running
from jobloom.app.facade import App
from jobloom.app.search import JobFilter
from jobloom.cli.common import (
    WAIT,
    AppOption,
    InternalOption,
    JsonOption,
    SchemaOption,
    UrlOption,
    UsageProblem,
    WaitOption,
    console,
    fmt_duration,
    fmt_time,
    fmt_value,
    jsonable,
    note,
    open_target,
    print_json,
    print_table,
    run,
)
from jobloom.cli.literal import literal
from jobloom.core.errors import InvalidOption
from jobloom.core.states import ALL_STATES
from jobloom.core.types import Attempt, Job
from jobloom.flows.flow import INTERNAL_BINDINGS
from jobloom.http.encode import diagnosis_dict

jobs_cli = typer.Typer(
    name="jobs", help="Look at jobs and act on them: list, show, retry, cancel, delete, counts.", no_args_is_help=True
)

STATE_STYLES = {
    "waiting": "dim", "scheduled": "cyan", "queued": "blue", "running": "bold yellow", "succeeded": "green",
    "failed": "bold red", "stalled": "magenta", "cancelled": "dim red", "skipped": "dim", "expired": "dim",
}
OUTCOME_STYLES = {
    "succeeded": "green", "failed": "red", "timeout": "red", "permanent": "bold red", "retry": "yellow",
    "cancelled": "dim red", "lost": "magenta",
}


def styled_state(job: Job) -> Text:
    """A job's state, coloured; a running job whose cancel was asked says so."""
    text = Text(job.state, style=STATE_STYLES.get(job.state, ""))
    if job.cancel_requested and job.state == "running":
        text.append(" (cancel requested)", style="dim")
    return text


def _first_line(text: str | None) -> str:
    """An error's first line, whole (``jobs show`` has every line), or ``-``."""
    if not text or not text.strip():
        return "-"
    return text.strip().splitlines()[0]


def _keys(job: Job) -> str:
    keys = [f"unique={job.unique_key}" if job.unique_key else "",
            f"key={job.concurrency_key}" if job.concurrency_key else ""]
    return " ".join(k for k in keys if k) or "-"


def jobs_table(jobs: list[Job], width: int = 200) -> Table:
    """The job list as a table, newest first; on a narrow terminal (``width``) lesser columns are left out."""
    table = Table(title=None, show_lines=False, header_style="bold")
    columns: list[tuple[str, dict[str, Any]]] = [
        ("id", {"justify": "right", "no_wrap": True}),
        ("binding", {"no_wrap": True}),
        ("state", {"no_wrap": True}),
        ("attempts", {"justify": "right", "no_wrap": True}),
        ("prio", {"justify": "right"}),
        ("created", {"no_wrap": True}),
        ("run at", {"no_wrap": True}),
        ("keys", {"ratio": 1}),
        ("error", {}),
    ]
    dropped = set()
    if width < 130:
        dropped |= {"run at", "keys"}
    if width < 95:
        dropped |= {"prio", "created"}
    for name, options in columns:
        if name not in dropped:
            table.add_column(name, **options)
    for job in jobs:
        cells: dict[str, str | Text] = {
            "id": str(job.id), "binding": job.binding, "state": styled_state(job),
            "attempts": f"{job.attempts_spent}/{job.max_attempts}", "prio": str(job.priority),
            "created": fmt_time(job.created_at),
            "run at": fmt_time(job.run_at) if job.state in ("scheduled", "queued") else "-",
            "keys": _keys(job), "error": _first_line(job.error),
        }
        table.add_row(*(cells[name] for name, _ in columns if name not in dropped))
    return table


def job_fields(job: Job) -> Table:
    """One job's fields as a two-column grid."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    rows: list[tuple[str, str | Text]] = [
        ("id", str(job.id)),
        ("binding", job.binding),
        ("state", styled_state(job)),
        ("attempts", f"{job.attempts_spent} of {job.max_attempts} spent"
                     + (f" ({job.attempt} executions in all)" if job.attempt != job.attempts_spent else "")),
        ("priority", str(job.priority)),
        ("delivery", job.delivery),
        ("created", fmt_time(job.created_at)),
        ("run at", fmt_time(job.run_at)),
        ("started", fmt_time(job.started_at)),
        ("finished", fmt_time(job.finished_at)),
        ("unique key", job.unique_key or "-"),
        ("concurrency key", job.concurrency_key or "-"),
        ("payload", Text(literal(fmt_value(job.payload)))),
        ("result", Text(literal(fmt_value(job.result)))),
        ("error", Text(literal(job.error or "-"))),
    ]
    for name, value in rows:
        grid.add_row(name, value)
    return grid


def attempts_table(attempts: list[Attempt]) -> Table:
    """A job's attempts; a ``late report`` column appears when a fenced-off report was recorded."""
    late = any(a.reported_outcome for a in attempts)
    table = Table(title="attempts", title_justify="left", header_style="bold")
    table.add_column("attempt", justify="right", no_wrap=True)
    table.add_column("worker", overflow="fold")
    table.add_column("started", no_wrap=True)
    table.add_column("finished", no_wrap=True)
    table.add_column("took", justify="right", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    table.add_column("error", overflow="fold")
    if late:
        table.add_column("late report", no_wrap=True)
    for a in attempts:
        outcome = Text(a.outcome or "running", style=OUTCOME_STYLES.get(a.outcome or "", "yellow"))
        row: list[str | Text] = [
            str(a.attempt), a.worker or "-", fmt_time(a.started_at), fmt_time(a.finished_at),
            fmt_duration(a.started_at, a.finished_at), outcome, Text(literal(a.error.strip()) if a.error else "-"),
        ]
        if late:
            row.append(f"{a.reported_outcome} at {fmt_time(a.reported_at)}" if a.reported_outcome else "-")
        table.add_row(*row)
    return table


def print_job(job: Job, attempts: list[Attempt]) -> None:
    """``jobs show`` for people: fields, attempts, then the tracebacks of failed attempts."""
    console.print(job_fields(job))
    console.print()
    if attempts:
        print_table(attempts_table(attempts))
    else:
        console.print("no attempts yet", style="dim")
    for a in attempts:
        if a.traceback and a.outcome != "succeeded":
            console.print()
            console.print(f"traceback of attempt {a.attempt}:", style="bold")
            console.print(Text(literal(a.traceback.rstrip())), highlight=False)


def print_action(job: Job, verb: str) -> None:
    """One line after retry or cancel: the job and the state it is in now."""
    line = Text(literal(f"job {job.id} ({job.binding}) {verb}: "))
    line.append(styled_state(job))
    console.print(line)


# -- commands ---------------------------------------------------------------------------------------

JobId = Annotated[int, typer.Argument(help="The job's id.", min=1)]


StateOption = Annotated[
    list[str] | None, typer.Option("--state", help=f"Only jobs in this state ({', '.join(ALL_STATES)}); repeatable.")
]
BindingOption = Annotated[str | None, typer.Option(help="Only jobs of this binding (performer).")]
TagOption = Annotated[
    list[str] | None, typer.Option("--tag", help="Only jobs with this tag; repeatable (all of them).")
]
UniqueKeyOption = Annotated[str | None, typer.Option("--unique-key", help="Only jobs with this unique key.")]
TextOption = Annotated[str | None, typer.Option("--text", help="Only jobs whose error contains this text.")]
AfterOption = Annotated[str | None, typer.Option(
    "--created-after", help="Only jobs enqueued at or after: ISO 8601 (UTC if no offset) or epoch seconds.")]
BeforeTimeOption = Annotated[str | None, typer.Option(
    "--created-before", help="Only jobs enqueued before: ISO 8601 (UTC if no offset) or epoch seconds.")]


def parse_moment(option: str, text: str | None) -> datetime | float | None:
    """A moment given on the command line: epoch seconds or an ISO 8601 date-time (UTC if no offset)."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidOption(option, text, "an ISO 8601 date-time or epoch seconds") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def job_filter(state: list[str] | None, binding: str | None, tag: list[str] | None, unique_key: str | None,
               text: str | None, created_after: str | None, created_before: str | None) -> JobFilter:
    """The search options of a command as a :class:`JobFilter`."""
    return JobFilter(state or None, binding, tag or None, unique_key, text,
                     parse_moment("--created-after", created_after), parse_moment("--created-before", created_before))


@jobs_cli.command("list")
def list_command(
    ctx: typer.Context,
    state: StateOption = None,
    binding: BindingOption = None,
    tag: TagOption = None,
    unique_key: UniqueKeyOption = None,
    text: TextOption = None,
    created_after: AfterOption = None,
    created_before: BeforeTimeOption = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many jobs.")] = 50,
    before: Annotated[int | None, typer.Option(min=1, help="Only ids below this one (to page back).")] = None,
    cursor: Annotated[str | None, typer.Option(help="The next page: the cursor a listing printed.")] = None,
    internal: InternalOption = False,
    app_ref: AppOption = None,
    url: UrlOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """List jobs, newest first, matching every filter given (--json: a list; the next page's cursor
    goes to stderr). The jobs of jobloom's own bindings (a flow's fan-out and sub-flow nodes) are left
    out unless --internal, or --binding names one."""
    app = open_target(ctx, app_ref, url, schema, wait)
    f = job_filter(state, binding, tag, unique_key, text, created_after, created_before)
    page = run(app, lambda a: a.list_jobs(
        f.states, f.binding, limit, before, tags=f.tag_list, unique_key=f.unique_key, text=f.text,
        created_after=f.after_ts, created_before=f.before_ts, cursor=cursor))
    jobs = [j for j in page if internal or binding is not None or j.binding not in INTERNAL_BINDINGS]
    if as_json:
        print_json(jobs)
    elif not jobs:
        console.print("no jobs", style="dim")
    else:
        print_table(jobs_table(jobs, console.width))
    if len(jobs) < len(page):
        note(f"{len(page) - len(jobs)} job(s) of jobloom's own bindings left out (--internal shows them)")
    if page.next_cursor is not None:
        note(f"more: --cursor {page.next_cursor}")


@jobs_cli.command("show")
def show_command(
    ctx: typer.Context,
    job_id: JobId,
    app_ref: AppOption = None,
    url: UrlOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """Show one job: its fields, its attempts, and the tracebacks of failed attempts."""
    app = open_target(ctx, app_ref, url, schema, wait)

    async def load(a: App) -> tuple[Job, list[Attempt]]:
        return await a.get_job(job_id), await a.attempts(job_id)

    job, attempts = run(app, load)
    if as_json:
        print_json({"job": jsonable(job), "attempts": jsonable(attempts)})
    else:
        print_job(job, attempts)


@jobs_cli.command("why")
def why_command(
    ctx: typer.Context,
    job_id: JobId,
    app_ref: AppOption = None,
    url: UrlOption = None,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """Why a job is not running: each cause that holds it (a debounce window, a full binding, a rate
    limit, ...) with the jobs it names and when it ends; or why an expired job never ran."""
    app = open_target(ctx, app_ref, url, schema, wait)

    async def load(a: App) -> Diagnosis:
        return await why_not_running(a, job_id)

    d = run(app, load)
    if as_json:
        print_json(diagnosis_dict(d))
        return
    console.print(Text(f"job {d.job_id}: ") + Text(d.state, style=STATE_STYLES.get(d.state, "")))
    if not d.reasons:
        console.print("nothing holds it: it is running or finished", style="dim")
    for r in d.reasons:
        line = Text(f"{r.code:<16}", style="bold") + Text(r.text)
        if r.until is not None:
            line += Text(f" (until {r.until.isoformat(timespec='seconds')})", style="dim")
        if r.job_ids:
            line += Text(" jobs " + ", ".join(map(str, r.job_ids)), style="dim")
        console.print(line)


OptionalJobId = Annotated[int | None, typer.Argument(help="The job's id (or filters with --all).", min=1)]
AllOption = Annotated[bool, typer.Option("--all", help="Act on every job matching the filters.")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
ACTIONS = {
    "retry": ("retried", "failed, stalled and cancelled"),
    "cancel": ("cancelled", "unfinished"),
    "delete": ("deleted", "finished"),
}


def bulk(app: App, action: str, f: JobFilter, yes: bool) -> None:
    """Run a bulk action after asking (unless ``yes``), then print how many jobs it changed."""
    done, which = ACTIONS[action]
    shown = ", ".join(f"{k}={v}" for k, v in (
        ("state", ",".join(f.states or ())), ("binding", f.binding), ("tags", ",".join(f.tag_list or ())),
        ("unique key", f.unique_key), ("text", f.text), ("created after", f.created_after),
        ("created before", f.created_before)) if v) or "no filter: every job"
    question = f"{action} the {which} jobs matching {shown}?"
    if not yes and not sys.stdin.isatty():
        raise UsageProblem(f"{question} Not confirmed: give --yes to act without a question (stdin is not a terminal)")
    if not yes and not typer.confirm(question, err=True):
        raise UsageProblem("not confirmed: nothing was changed")
    many = {"retry": App.retry_many, "cancel": App.cancel_many, "delete": App.delete_many}[action]
    n = run(app, lambda a: many(a, f))
    console.print(f"{n} job{'s' if n != 1 else ''} {done}")


def _one_or_all(job_id: int | None, every: bool, f: JobFilter, action: str) -> None:
    if job_id is not None and (every or f != JobFilter()):
        raise UsageProblem(f"jobs {action} takes a job id, or filters with --all, not both")
    if job_id is None and not every:
        raise UsageProblem(f"jobs {action} needs a job id, or --all (with filters such as --state and --binding) "
                           "to act on every matching job")


@jobs_cli.command("retry")
def retry_command(
    ctx: typer.Context, job_id: OptionalJobId = None, state: StateOption = None, binding: BindingOption = None,
    tag: TagOption = None, unique_key: UniqueKeyOption = None, text: TextOption = None,
    created_after: AfterOption = None, created_before: BeforeTimeOption = None, every: AllOption = False,
    yes: YesOption = False, app_ref: AppOption = None, url: UrlOption = None, schema: SchemaOption = None,
    wait: WaitOption = WAIT,
) -> None:
    """Queue a failed, stalled or cancelled job again (its history is kept); with --all, every such job
    matching the filters."""
    f = job_filter(state, binding, tag, unique_key, text, created_after, created_before)
    _one_or_all(job_id, every, f, "retry")
    app = open_target(ctx, app_ref, url, schema, wait)
    if job_id is None:
        bulk(app, "retry", f, yes)
        return
    print_action(run(app, lambda a: a.retry(job_id)), "retried")


@jobs_cli.command("cancel")
def cancel_command(
    ctx: typer.Context, job_id: OptionalJobId = None, state: StateOption = None, binding: BindingOption = None,
    tag: TagOption = None, unique_key: UniqueKeyOption = None, text: TextOption = None,
    created_after: AfterOption = None, created_before: BeforeTimeOption = None, every: AllOption = False,
    yes: YesOption = False, app_ref: AppOption = None, url: UrlOption = None, schema: SchemaOption = None,
    wait: WaitOption = WAIT,
) -> None:
    """Cancel a job: at once unless it is running, in which case its worker is told to stop it; with
    --all, every unfinished job matching the filters."""
    f = job_filter(state, binding, tag, unique_key, text, created_after, created_before)
    _one_or_all(job_id, every, f, "cancel")
    app = open_target(ctx, app_ref, url, schema, wait)
    if job_id is None:
        bulk(app, "cancel", f, yes)
        return
    print_action(run(app, lambda a: a.cancel(job_id)), "cancelled")


@jobs_cli.command("delete")
def delete_command(
    ctx: typer.Context, state: StateOption = None, binding: BindingOption = None,
    tag: TagOption = None, unique_key: UniqueKeyOption = None, text: TextOption = None,
    created_after: AfterOption = None, created_before: BeforeTimeOption = None, every: AllOption = False,
    yes: YesOption = False, app_ref: AppOption = None, url: UrlOption = None, schema: SchemaOption = None,
    wait: WaitOption = WAIT,
) -> None:
    """Delete every finished job matching the filters, with its history (needs --all; unfinished jobs
    are left alone)."""
    f = job_filter(state, binding, tag, unique_key, text, created_after, created_before)
    _one_or_all(None, every, f, "delete")
    bulk(open_target(ctx, app_ref, url, schema, wait), "delete", f, yes)


@jobs_cli.command("counts")
def counts_command(
    ctx: typer.Context, app_ref: AppOption = None, url: UrlOption = None, schema: SchemaOption = None,
    as_json: JsonOption = False,
    finished: Annotated[bool, typer.Option(
        "--finished", help="Count succeeded and skipped jobs too (reads every job of the history).")] = False,
    internal: InternalOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """Count jobs per binding and state; succeeded and skipped ones only with --finished (jobloom's own
    bindings only with --internal)."""
    app = open_target(ctx, app_ref, url, schema, wait)
    counts = {b: n for b, n in run(app, lambda a: a.counts(finished=finished)).items()
              if internal or b not in INTERNAL_BINDINGS}
    if as_json:
        print_json(counts)
        return
    note = "" if finished else "succeeded and skipped jobs not counted (--finished counts them)"
    if not counts:
        console.print("no jobs" + (f" ({note})" if note else ""), style="dim")
        return
    states = [s for s in ALL_STATES if any(s in by_state for by_state in counts.values())]
    table = Table(header_style="bold")
    table.add_column("binding", no_wrap=True)
    for s in states:
        table.add_column(s, justify="right", style=STATE_STYLES.get(s, ""))
    table.add_column("total", justify="right", style="bold")
    totals = dict.fromkeys(states, 0)
    for binding in sorted(counts):
        row = counts[binding]
        for s in states:
            totals[s] += row.get(s, 0)
        table.add_row(binding, *(str(row.get(s, 0)) for s in states), str(sum(row.values())))
    if len(counts) > 1:
        table.add_section()
        table.add_row("all", *(str(totals[s]) for s in states), str(sum(totals.values())), style="bold")
    print_table(table)
    if note:
        console.print(note, style="dim")
