"""What every ``jobloom`` command shares: finding the app or store, running async calls, printing.

Commands name their target with ``--app MODULE:ATTR`` (the user's :class:`~jobloom.App`, with its
performers) or ``--url URL`` (a bare store: enough to read, retry and cancel jobs, which needs no
code). ``JOBLOOM_APP`` and ``JOBLOOM_URL`` provide defaults; a flag given on the command line wins
over the environment.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import typer
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from jobloom.app.facade import App
from jobloom.app.loading import load_app, sqlite_file_problem
from jobloom.cli.literal import LiteralConsole, literal
from jobloom.core.errors import JobloomError
from jobloom.core.types import Attempt, Job
from jobloom.http.encode import attempt_json, job_json

T = TypeVar("T")

# job text is printed literally: no markup, no emoji codes, control characters escaped (see literal.py)
console = LiteralConsole(soft_wrap=True)  # status lines stay whole; tables still fit the width
err_console = LiteralConsole(stderr=True, soft_wrap=True)

APP_HELP = "The app, as MODULE:ATTR (e.g. myapp.jobs:app)."
URL_HELP = "The store URL (sqlite:///jobloom.db or postgresql://...); no app code needed."

AppOption = Annotated[
    str | None,
    typer.Option("--app", envvar="JOBLOOM_APP", show_envvar=True, help=APP_HELP, metavar="MODULE:ATTR"),
]
UrlOption = Annotated[
    str | None, typer.Option("--url", envvar="JOBLOOM_URL", show_envvar=True, help=URL_HELP)
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
SchemaOption = Annotated[
    str | None, typer.Option("--schema", help="With a PostgreSQL --url: the schema holding jobloom's tables.")
]
InternalOption = Annotated[bool, typer.Option(
    "--internal", help="Show jobloom's own bindings too (jobloom.map and jobloom.subflow, which run the fan-out "
                       "and sub-flow nodes of flows).")]
WAIT = 5.0
"""Seconds a command waits for a PostgreSQL server that refuses connections (workers' own retries are longer)."""
WaitOption = Annotated[
    float,
    typer.Option(
        "--wait", min=0, metavar="SECONDS",
        help="How long to wait for a PostgreSQL server that refuses connections before giving up.",
    ),
]


class LogFormat(enum.StrEnum):
    """How long-running commands (worker, serve) write their logs."""

    text = "text"
    json = "json"


LogFormatOption = Annotated[
    LogFormat, typer.Option(case_sensitive=False, help="Log lines as text, or one JSON object per line.")
]


class UsageProblem(JobloomError):
    """A command was given arguments that do not fit together (reported like any jobloom error)."""


def _from_command_line(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def choose_target(ctx: typer.Context, app_ref: str | None, url: str | None) -> tuple[str | None, str | None]:
    """Settle ``--app`` against ``--url``: the command line wins over the environment; both on the
    command line is refused; both from the environment means the app (it knows its own store)."""
    if app_ref and url:
        app_cli, url_cli = _from_command_line(ctx, "app_ref"), _from_command_line(ctx, "url")
        if app_cli and url_cli:
            raise UsageProblem("give either --app or --url, not both")
        if url_cli:
            return None, url
        return app_ref, None
    if not app_ref and not url:
        raise UsageProblem(
            "name the app with --app MODULE:ATTR (or JOBLOOM_APP), "
            "or the store with --url URL (or JOBLOOM_URL)"
        )
    return app_ref, url


def check_schema(url: str, schema: str | None) -> dict[str, Any]:
    """Store options for ``--schema``: PostgreSQL only (a SQLite store is one file)."""
    if not schema:
        return {}
    if url.startswith("sqlite:"):
        raise UsageProblem("--schema applies to PostgreSQL stores only; a SQLite store is one file")
    return {"schema": schema}


def check_sqlite_file(url: str, *, must_exist: bool) -> None:
    """Refuse a SQLite path that a command would otherwise create by accident.

    A command that only reads or changes existing jobs (``must_exist``) needs the file; one that may
    create the store (``migrate``, ``worker``, ``enqueue``) needs its folder, so a mistyped path is
    named instead of quietly becoming an empty store.
    """
    if problem := sqlite_file_problem(url, must_exist=must_exist):
        raise UsageProblem(problem)


def for_command(app: App, wait: float, *, must_exist: bool) -> App:
    """``app`` set up for a short command: its SQLite path checked, and a PostgreSQL server that refuses
    connections given up on after ``wait`` seconds (an app's own workers keep their longer retries)."""
    check_sqlite_file(app.url, must_exist=must_exist)
    if app.url.startswith(("postgresql:", "postgres:")):
        app.store_options["connect_wait"] = wait
    return app


def open_target(
    ctx: typer.Context, app_ref: str | None, url: str | None, schema: str | None = None, wait: float = WAIT,
    *, must_exist: bool = True,
) -> App:
    """The app to act through: the user's app (``--app``), or a bare ``App(url)`` with no performers.

    A bare app never creates tables: a store that lacks migrations is reported (``jobloom
    migrate`` applies them), and a SQLite file that does not exist is refused (unless not
    ``must_exist``), so a mistyped path does not look like an empty store.
    """
    app_ref, url = choose_target(ctx, app_ref, url)
    if app_ref:
        if schema:
            raise UsageProblem("--schema goes with --url; an app (--app) names its own store and schema")
        return for_command(load_app(app_ref), wait, must_exist=must_exist)
    assert url is not None
    return for_command(App(url, auto_migrate=False, **check_schema(url, schema)), wait, must_exist=must_exist)


def require_app(ctx: typer.Context, app_ref: str | None, what: str, wait: float = WAIT) -> App:
    """The user's app for commands that need its performers (``--url`` is not enough for them)."""
    if not app_ref:
        raise UsageProblem(f"{what} needs the app's performers: give --app MODULE:ATTR or set JOBLOOM_APP")
    return for_command(load_app(app_ref), wait, must_exist=False)


def run(app: App, fn: Callable[[App], Awaitable[T]]) -> T:
    """Run one async call against ``app`` on a fresh event loop, closing the store afterwards."""

    async def go() -> T:
        try:
            return await fn(app)
        finally:
            await app.close()

    return asyncio.run(go())


def redact_url(url: str) -> str:
    """A store URL fit to print: any password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


# -- printing ---------------------------------------------------------------------------------------


def fail(message: str) -> None:
    """Print ``error: message`` on one line to stderr."""
    err_console.print(f"[bold red]error:[/bold red] {escape(literal(message))}", markup=True)


def note(message: str) -> None:
    """Print a remark to stderr (kept out of stdout, which may be piped)."""
    err_console.print(f"[yellow]note:[/yellow] {escape(literal(message))}", markup=True)


def fmt_time(value: datetime | None, zone: str | None = None) -> str:
    """A timestamp to the second with the zone it is in, or ``-``: in ``zone`` (an IANA name, shown as
    such: ``2026-03-01 03:00:00 Europe/Berlin``) when given, else in local time with its abbreviation
    (``2026-03-01 02:00:00 UTC``), so no printed time leaves its zone to be guessed."""
    if value is None:
        return "-"
    if zone:
        from zoneinfo import ZoneInfo

        return value.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S ") + zone
    local = value.astimezone()
    return local.strftime("%Y-%m-%d %H:%M:%S ") + (local.tzname() or local.strftime("%z"))


def fmt_duration(start: datetime | None, end: datetime | None) -> str:
    """The time between two moments, compactly (``850ms``, ``12.3s``, ``4m05s``), or ``-``."""
    if start is None or end is None:
        return "-"
    secs = (end - start).total_seconds()
    if secs < 1:
        return f"{secs * 1000:.0f}ms"
    if secs < 60:
        return f"{secs:.1f}s"
    minutes, rest = divmod(int(secs), 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def fmt_value(value: Any) -> str:
    """A payload or result as compact JSON (``-`` for none)."""
    return "-" if value is None else json.dumps(value, separators=(",", ":"), sort_keys=True)


def jsonable(value: Any) -> Any:
    """Jobs, attempts, datetimes and containers as plain JSON values (datetimes in ISO 8601, UTC).

    Jobs and attempts are written by the HTTP API's own serializer (:mod:`jobloom.http.encode`): the
    command line's ``--json`` is the API's representation (run, node, tags, meta and progress included),
    never a second shape.
    """
    if isinstance(value, Job):
        return json.loads(job_json(value))
    if isinstance(value, Attempt):
        return json.loads(attempt_json(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def print_table(table: Table) -> None:
    """Print ``table`` if it fits the output's width with every cell whole, else each row as a record.

    A table squeezed into a narrow terminal (or a pipe, 80 columns unless ``COLUMNS`` says more)
    wraps its columns down to a character per line; records (one ``name  value`` line per column, a
    blank line between rows, long values folded onto more lines) stay readable at any width and cut
    nothing: ids, names and errors are always whole."""
    for column in table.columns:
        column.no_wrap = True
    natural = Measurement.get(console, console.options.update(width=1_000_000), table).maximum
    if natural <= console.width:
        console.print(table)
        return
    if table.title:
        console.print(Text.assemble((str(table.title), "bold")), highlight=False)
    headers = [str(c.header) for c in table.columns]
    cells = [list(c.cells) for c in table.columns]
    for i in range(table.row_count):
        record = Table.grid(padding=(0, 2))
        record.add_column(style="bold", no_wrap=True)
        record.add_column(overflow="fold")
        for header, values in zip(headers, cells, strict=True):
            record.add_row(header, values[i] if i < len(values) else "")
        if i:
            console.print()
        console.print(record)
    if table.caption:
        console.print(Text(str(table.caption), style="dim"), highlight=False)


def print_json(value: Any) -> None:
    """Write ``value`` as indented JSON to stdout, unstyled."""
    sys.stdout.write(json.dumps(jsonable(value), indent=2) + "\n")
    sys.stdout.flush()
