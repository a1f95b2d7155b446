"""The ``jobloom`` command line: ``worker``, ``migrate``, ``enqueue``, ``jobs …`` and ``limits …``.

Every command goes through the public :class:`~jobloom.App` API. A mistake (a bad app reference,
unknown binding, invalid JSON or option, a job in the wrong state) is reported as one ``error:``
line on stderr with exit status 1; usage errors found by the parser are one ``error:`` line too,
saying what to give instead, with exit status 2 (:mod:`jobloom.cli.usage`).

``jobloom bench`` is provided by :mod:`jobloom.bench.cli` when that module exists: it exposes
either ``app`` (a :class:`typer.Typer`, added as the ``bench`` group) or ``bench`` (a function,
added as the ``bench`` command). It is imported for ``jobloom bench`` and the top-level help only, so
that no other command (a worker) pays for it.
"""

from __future__ import annotations

import enum
import importlib
import json
import logging
import os
import sys
from typing import Annotated, Any

import typer
import typer.main
from rich.markup import escape
from rich.text import Text
from typer.exceptions import TyperException

from jobloom.app.facade import App
from jobloom.app.loading import connection_env, load_app
from jobloom.cli.bindings import bindings_cli
from jobloom.cli.common import (
    WAIT,
    AppOption,
    JsonOption,
    LogFormat,
    LogFormatOption,
    UrlOption,
    UsageProblem,
    WaitOption,
    check_schema,
    choose_target,
    console,
    fail,
    for_command,
    print_json,
    redact_url,
    require_app,
    run,
)
from jobloom.cli.jobs import jobs_cli, styled_state
from jobloom.cli.limits import limits_cli
from jobloom.cli.literal import literal
from jobloom.cli.reencrypt import reencrypt_command
from jobloom.cli.runs import runs_cli
from jobloom.cli.scaffold import add_cli, init
from jobloom.cli.schedules import schedules_cli
from jobloom.cli.serve import serve
from jobloom.cli.stats import stats
from jobloom.cli.tokens import tokens_cli
from jobloom.cli.topics import topics_command
from jobloom.cli.usage import plain_flags, usage_message
from jobloom.core.errors import JobloomError, StoreUnreachable
from jobloom.core.extras import MissingExtra, needs_extra
from jobloom.core.text import load_json_text
from jobloom.engine.worker import DEFAULT_CONCURRENCY, DEFAULT_SYNC_CONCURRENCY

cli = typer.Typer(
    name="jobloom",
    help="jobloom: background jobs for Python.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
cli.add_typer(add_cli)
cli.add_typer(bindings_cli)
cli.command("topics")(topics_command)
cli.command("reencrypt")(reencrypt_command)
cli.add_typer(jobs_cli)
cli.add_typer(limits_cli)
cli.add_typer(runs_cli)
cli.add_typer(schedules_cli)
cli.add_typer(tokens_cli)
cli.command()(serve)
cli.command()(stats)
cli.command()(init)


def _print_version(value: bool) -> None:
    if value:
        from jobloom import __version__

        console.print(f"jobloom {__version__}", highlight=False, markup=False)
        raise typer.Exit()


@cli.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version, help="Print jobloom's version and exit.",
    )] = False,
) -> None:
    """jobloom: background jobs for Python."""


class LogLevel(enum.StrEnum):
    """Log levels of worker processes."""

    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


@cli.command()
def worker(
    app_ref: Annotated[str, typer.Argument(metavar="MODULE:ATTR", help="The app, e.g. myapp.jobs:app.")],
    processes: Annotated[int, typer.Option(
        min=1, help="Worker processes. One runs in this process (your process manager restarts it); more "
                    "are started, and restarted if they crash, by a supervisor that does not load the app.",
    )] = 1,
    supervise: Annotated[bool, typer.Option(
        "--supervise", help="Run the supervisor for one process too (it restarts the process if it dies).",
    )] = False,
    concurrency: Annotated[int | None, typer.Option(
        min=1, show_default=False,
        help=f"Jobs at once in each process [default: {DEFAULT_CONCURRENCY}, of which at most "
             f"{DEFAULT_SYNC_CONCURRENCY} of sync performers]. Given, it applies to sync performers too.",
    )] = None,
    sync_concurrency: Annotated[int | None, typer.Option(
        min=1, show_default=False,
        help="Of those, jobs of sync performers at once (a thread or a child process each) "
             f"[default: {DEFAULT_SYNC_CONCURRENCY}, or --concurrency when given].",
    )] = None,
    bindings: Annotated[
        str | None, typer.Option(help="Only these bindings, comma-separated (default: all the app's).")
    ] = None,
    grace: Annotated[
        float, typer.Option(min=0, help="Seconds that running jobs get to finish after SIGTERM.")
    ] = 25.0,
    log_level: Annotated[LogLevel, typer.Option(case_sensitive=False, help="Log level.")] = LogLevel.info,
    log_format: LogFormatOption = LogFormat.text,
    listen_url: Annotated[str | None, typer.Option(
        help="PostgreSQL behind a transaction-pooling pooler (PgBouncer): a URL straight to the server, for "
             "the wake-ups (LISTEN) that cannot go through the pooler. Without it such workers poll every second.",
    )] = None,
    pool_max: Annotated[int | None, typer.Option(
        min=1, show_default=False,
        help="PostgreSQL: at most this many pooled connections in each worker process [default: 10] (the "
             "wake-ups' listening connection comes on top).",
    )] = None,
    metrics_port: Annotated[
        int | None, typer.Option(min=0, max=65535, help="Serve Prometheus metrics of every worker process "
                                 "on this port (/metrics; 0 picks a free port).")
    ] = None,
    metrics_host: Annotated[str, typer.Option(help="The address the metrics endpoint listens on.")] = "127.0.0.1",
    wait: WaitOption = WAIT,
) -> None:
    """Run worker processes until SIGTERM or SIGINT, then drain gracefully."""
    from jobloom.engine.supervisor import child_env, command_line, serve
    from jobloom.observe.logs import configure_logging
    from jobloom.process import check_before_start

    if metrics_port is not None:
        with needs_extra("metrics", "jobloom worker --metrics-port"):
            import prometheus_client  # noqa: F401
    names = [b.strip() for b in (bindings or "").split(",") if b.strip()] or None
    alone = metrics_port is None and processes == 1 and not supervise
    connection_env(listen_url, pool_max)  # the worker processes take them from their environment
    if not alone:  # checked here, so that a bad app or store is reported before any process starts (a worker
        app = check_before_start(app_ref, names, wait)  # process alone makes the same checks itself)
    if metrics_port is None:
        # The worker process (or the supervisor, which loads no app) takes this process's place, with the
        # same pid for whoever signals it, and none of the CLI's memory; one worker process alone makes the
        # checks above itself (--check-wait), so the CLI never holds the app and its store as well.
        cmd = command_line(app_ref, processes=processes, concurrency=concurrency, sync_concurrency=sync_concurrency,
                           bindings=names, grace=grace, log_level=log_level.value, supervise=supervise,
                           log_format=log_format.value)
        if alone:
            cmd += ["--check-wait", repr(wait)]
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(cmd[0], cmd, child_env())
    # With metrics, this process stays: it supervises the worker processes (one or more) and serves the
    # endpoint that sums their metrics, with the store's gauges (which is why it keeps the app).
    configure_logging(log_level.value, log_format.value)
    from jobloom.observe.exposition import WorkerMetricsServer

    if app.url.startswith(("postgresql:", "postgres:")):  # a scrape gives up on a server that refuses connections
        app.store_options["connect_wait"] = wait

    server = WorkerMetricsServer(app.store, app.close, metrics_host, metrics_port, bindings=sorted(app.specs))
    port = server.start()
    logging.getLogger("jobloom.supervisor").info(
        "metrics_serving url=http://%s:%d/metrics", metrics_host, port,
        extra={"event": "metrics_serving", "host": metrics_host, "port": port})
    try:
        status = serve(app_ref, processes=processes, concurrency=concurrency, sync_concurrency=sync_concurrency,
                       bindings=names, grace=grace, log_level=log_level.value, log_format=log_format.value,
                       env=server.child_env(), on_exit=server.process_exited)
    finally:
        server.close()
    raise typer.Exit(status)


@cli.command()
def migrate(
    ctx: typer.Context,
    app_ref: AppOption = None,
    url: UrlOption = None,
    schema: Annotated[str | None, typer.Option(
        help="With a PostgreSQL --url: the schema to create the tables in (default: the search path's, public).",
    )] = None,
    wait: WaitOption = WAIT,
) -> None:
    """Apply the store's missing schema migrations."""
    app_ref, url = choose_target(ctx, app_ref, url)
    options: dict[str, Any] = {}
    if app_ref:
        user_app = load_app(app_ref)
        url, options = user_app.url, dict(user_app.store_options)
    assert url is not None
    options.update(check_schema(url, schema))
    target = for_command(App(url, auto_migrate=False, **options), wait, must_exist=False)

    async def go(a: App) -> tuple[list[str], str]:
        applied = await a.migrate()
        return applied, await (await a.store()).location()

    applied, location = run(target, go)
    where = redact_url(url) + (f" ({location})" if location and not url.startswith("sqlite:") else "")
    if applied:
        for name in applied:
            console.print(f"applied [bold]{escape(name)}[/bold]", markup=True)
        console.print(f"{where}: {len(applied)} migration(s) applied", highlight=False)
    else:
        console.print(f"{where}: up to date", highlight=False)


def parse_payload(text: str) -> Any:
    """The JSON payload given on the command line (``-`` reads it from stdin)."""
    if text == "-":
        text = sys.stdin.read()
    shown = text if len(text) <= 80 else text[:77] + "..."
    try:
        return load_json_text(text)
    except json.JSONDecodeError as exc:
        raise UsageProblem(
            f"invalid JSON payload {shown!r}: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except (ValueError, RecursionError) as exc:  # too deep, NaN, an integer too long to read
        raise UsageProblem(f"invalid JSON payload {shown!r}: {exc}") from None


@cli.command()
def enqueue(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="BINDING", help="The performer's binding name.")],
    payload: Annotated[str, typer.Argument(metavar="JSON", help="The payload as JSON ('-' reads stdin).")],
    delay: Annotated[
        float | None, typer.Option(help="Run no sooner than this many seconds from now.")
    ] = None,
    priority: Annotated[int | None, typer.Option(help="Higher runs first within the binding.")] = None,
    unique_key: Annotated[
        str | None, typer.Option(help="While a job with this key is unfinished, return it instead.")
    ] = None,
    concurrency_key: Annotated[
        str | None, typer.Option(help="The key that per-key concurrency counts.")
    ] = None,
    max_attempts: Annotated[int | None, typer.Option(help="Attempts before the job fails.")] = None,
    delivery: Annotated[str | None, typer.Option(help="at_least_once or at_most_once.")] = None,
    debounce: Annotated[
        float | None, typer.Option(help="Seconds: enqueues of --debounce-key within it collapse into one job.")
    ] = None,
    debounce_key: Annotated[str | None, typer.Option(help="The key debounced enqueues collapse by.")] = None,
    expires_in: Annotated[
        float | None, typer.Option(help="Seconds: a job not started by then never starts (it ends expired).")
    ] = None,
    app_ref: AppOption = None,
    as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """Enqueue one job by binding name; the performer validates the payload."""
    value = parse_payload(payload)
    app = require_app(ctx, app_ref, "enqueue", wait)
    app.spec(name)
    job = run(app, lambda a: a.enqueue(
        name, value, delay=delay, priority=priority, unique_key=unique_key, concurrency_key=concurrency_key,
        max_attempts=max_attempts, delivery=delivery, debounce=debounce, debounce_key=debounce_key,
        expires_in=expires_in,
    ))
    if as_json:
        print_json(job)
        return
    console.print(Text(literal(f"job {job.id} ({job.binding}) ")).append(styled_state(job)))


def _register_bench() -> None:
    """Plug in ``jobloom bench`` from :mod:`jobloom.bench.cli` when it is installed (once)."""
    if any(c.name == "bench" for c in cli.registered_commands) or any(
            g.name == "bench" for g in cli.registered_groups):
        return
    try:
        with needs_extra("bench", "jobloom bench"):
            module = importlib.import_module("jobloom.bench.cli")
    except ModuleNotFoundError as exc:
        if exc.name in ("jobloom.bench", "jobloom.bench.cli"):
            return
        problem: BaseException | None = exc
    except MissingExtra as exc:
        _bench_unavailable(str(exc))
        return
    except Exception as exc:  # a broken bench must not take the other commands down
        problem = exc
    else:
        problem = None
        sub = getattr(module, "app", None)
        if isinstance(sub, typer.Typer):
            cli.add_typer(sub, name="bench")
            return
        fn = getattr(module, "bench", None)
        if callable(fn):
            cli.command("bench")(fn)
            return
    reason = f"{type(problem).__name__}: {problem}" if problem else "it defines neither `app` nor `bench`"
    _bench_unavailable(f"the bench command could not be loaded from jobloom.bench.cli ({reason})")


def _bench_unavailable(message: str) -> None:
    """A hidden ``jobloom bench`` that says why the benchmarks cannot run."""

    @cli.command("bench", hidden=True, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    def bench_unavailable() -> None:
        """Benchmarks (unavailable: see the error)."""
        raise JobloomError(message)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``jobloom`` console script."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("bench", "-h", "--help"):  # the benchmarks' modules only when they can be used
        _register_bench()
    try:
        status = plain_flags(typer.main.get_command(cli)).main(
            args=argv, prog_name="jobloom", standalone_mode=False
        )
    except typer.Abort:
        fail("aborted")
        sys.exit(1)
    except TyperException as exc:  # the parser's own errors: a wrong option, a value of the wrong type
        if type(exc).__name__ != "NoArgsIsHelpError":  # that one has printed the help already
            fail(usage_message(exc))
        sys.exit(getattr(exc, "exit_code", 2))
    except StoreUnreachable as exc:
        fail(f"{exc}; --wait SECONDS waits longer")
        sys.exit(1)
    except JobloomError as exc:
        fail(str(exc))
        sys.exit(1)
    except OSError as exc:  # a path that cannot be created or read: the user's to fix, not a bug
        fail(f"{type(exc).__name__}: {exc}")
        sys.exit(1)
    except (RecursionError, OverflowError) as exc:  # input beyond what Python can hold: one line, not a traceback
        fail(f"{type(exc).__name__}: {exc}")
        sys.exit(1)
    if isinstance(status, int) and status:  # a command's typer.Exit(status)
        sys.exit(status)


if __name__ == "__main__":
    main()
