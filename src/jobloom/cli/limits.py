"""``jobloom limits …``: change a binding's limits at run time, and list the limits in force."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from jobloom.app.bindings import BindingInfo
from jobloom.app.facade import App
from jobloom.cli.common import (
    WAIT,
    AppOption,
    JsonOption,
    SchemaOption,
    UrlOption,
    UsageProblem,
    WaitOption,
    console,
    note,
    open_target,
    print_json,
    print_table,
    run,
)
from jobloom.core.options import RateLimit
from jobloom.core.records import check_limits
from jobloom.core.types import Policy

limits_cli = typer.Typer(
    name="limits", help="Per-binding limits: concurrency, per-key concurrency, rate, priority aging.",
    no_args_is_help=True,
)

LIFT_WORDS = ("none", "off", "unlimited")


BindingLimits = BindingInfo
"""A binding's limits as ``limits list`` shows them (the binding as ``App.list_bindings`` reads it)."""


async def read_limits(app: App) -> list[BindingInfo]:
    """The limits of every binding the store knows, plus the app's performers not yet registered."""
    return await app.list_bindings()


def fmt_rate(policy: Policy) -> str:
    """A rate limit the way it is written (``10/s``, ``30/m``), with its burst when above 1."""
    return fmt_rate_limit(policy.rate)


def fmt_rate_limit(rate: RateLimit | None) -> str:
    """:func:`fmt_rate` of one token bucket (``unlimited`` for None)."""
    if rate is None:
        return "unlimited"
    per_second = rate.rate
    for unit, secs in (("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if per_second * secs >= 1 or unit == "h":
            text = f"{per_second * secs:.4g}/{unit}"
            break
    return text + (f" burst {rate.burst:g}" if rate.burst > 1 else "")


STAR = "* changed at run time (limits set)"
QUESTION = "? set in code, known once a worker registers the binding"


def limits_table(rows: list[BindingLimits]) -> Table:
    """Bindings and their limits; run-time overrides are marked with ``*``, values only the code knows
    (no worker registered the binding yet) with ``?``; a legend says what each mark shown means.

    ``per key`` is ``-`` for a binding whose jobs have no concurrency key (its performer has no
    ``concurrency_key``): the limit does not apply to it."""
    table = Table(header_style="bold", caption_justify="left")
    for name in ("binding", "concurrency", "per key", "rate", "priority aging"):
        table.add_column(name, no_wrap=name != "binding", overflow="fold")
    marks: set[str] = set()
    for r in rows:
        p = r.policy

        def mark(field: str, text: str, r: BindingLimits = r) -> str:
            if field in r.overridden:
                marks.add("*")
                return text + " *"
            if text == "-" or r.defaults_known:
                return text
            marks.add("?")
            return "?"

        key_limit = r.key_limit
        table.add_row(
            r.binding + ("" if r.registered else " (not registered yet)"),
            mark("concurrency", "unlimited" if p.concurrency is None else str(p.concurrency)),
            mark("key_concurrency", "-" if key_limit is None else str(key_limit))
            + ("" if p.key_rate is None else mark("key_rate_limit", f", {fmt_rate_limit(p.key_rate)}/key")),
            mark("rate_limit", fmt_rate(p)),
            mark("priority_aging", "strict" if p.priority_aging is None else f"{p.priority_aging:g}s"),
        )
    legend = [text for sign, text in (("*", STAR), ("?", QUESTION)) if sign in marks]
    if legend:
        table.caption = "; ".join(legend)
    return table


def _lifted(text: str) -> bool:
    return text.strip().lower() in LIFT_WORDS


def parse_limits(
    concurrency: str | None, key_concurrency: int | None, rate_limit: str | None, priority_aging: str | None,
    key_rate_limit: str | None = None,
) -> dict[str, Any]:
    """Command-line limit values to ``set_limits`` arguments; ``none`` lifts a limit."""
    limits: dict[str, Any] = {}
    if concurrency is not None:
        if _lifted(concurrency):
            limits["concurrency"] = None
        else:
            try:
                limits["concurrency"] = int(concurrency)
            except ValueError:
                raise UsageProblem(
                    f"--concurrency must be an integer >= 0 or 'none'; got {concurrency!r}"
                ) from None
    if key_concurrency is not None:
        limits["key_concurrency"] = key_concurrency
    if rate_limit is not None:
        limits["rate_limit"] = None if _lifted(rate_limit) else rate_limit
    if key_rate_limit is not None:
        limits["key_rate_limit"] = None if _lifted(key_rate_limit) else key_rate_limit
    if priority_aging is not None:
        if _lifted(priority_aging) or priority_aging.strip().lower() == "strict":
            limits["priority_aging"] = None
        else:
            try:
                limits["priority_aging"] = float(priority_aging)
            except ValueError:
                raise UsageProblem(
                    f"--priority-aging must be seconds or 'none' (strict priority); got {priority_aging!r}"
                ) from None
    if not limits:
        raise UsageProblem(
            "nothing to set: give --concurrency, --key-concurrency, --rate-limit, --key-rate-limit or "
            "--priority-aging"
        )
    return limits


@limits_cli.command("set")
def set_command(
    ctx: typer.Context,
    binding: Annotated[str, typer.Argument(help="The binding (performer name).")],
    concurrency: Annotated[
        str | None,
        typer.Option(help="At most N running at once, across all workers (0 holds every job; 'none' lifts it)."),
    ] = None,
    key_concurrency: Annotated[
        int | None, typer.Option(help="At most N running at once per concurrency key.")
    ] = None,
    rate_limit: Annotated[
        str | None, typer.Option(help="A token bucket, e.g. 10/s, 600/m, '100/s burst 20' ('none' lifts it).")
    ] = None,
    priority_aging: Annotated[
        str | None, typer.Option(help="Seconds of waiting worth one priority step ('none': strict priority).")
    ] = None,
    key_rate_limit: Annotated[
        str | None, typer.Option(help="A token bucket per concurrency key, e.g. 10/s ('none' lifts it).")
    ] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Store the limits even for a binding that no worker has registered (and the app lacks).",
    )] = False,
    app_ref: AppOption = None,
    url: UrlOption = None,
    schema: SchemaOption = None,
    wait: WaitOption = WAIT,
) -> None:
    """Change a binding's limits; workers apply them at their next dispatch.

    A binding that the store does not know (no worker registered it, no limits were set for it) and
    that the app (``--app``) does not perform is refused, naming it (a misspelt name would otherwise
    hold limits nobody uses); ``--force`` stores them anyway, for a binding whose workers start later."""
    limits = parse_limits(concurrency, key_concurrency, rate_limit, priority_aging, key_rate_limit)
    app = open_target(ctx, app_ref, url, schema, wait)
    if app.specs and not force:
        app.spec(binding)  # an app knows its bindings: refuse a misspelt one

    async def apply(a: App) -> list[BindingLimits]:
        check_limits(binding, limits)  # a bad value is named before an unknown binding is
        rows = await read_limits(a)
        known = {r.binding for r in rows} | set(a.specs)  # registered, performed by the app, or given limits
        if binding not in known and not force:
            names = ", ".join(sorted(known)) or "none yet"
            raise UsageProblem(
                f"no worker has registered a binding {binding!r} (known: {names}): check the name, "
                f"or give --force to store its limits for workers that start later"
            )
        await a.set_limits(binding, **limits)
        if not any(r.registered for r in rows if r.binding == binding):
            forced = "stored with --force: " if binding not in known else ""
            note(f"{forced}no worker has registered {binding!r} yet; the limits apply once one does")
        return [r for r in await read_limits(a) if r.binding == binding]

    print_table(limits_table(run(app, apply)))


@limits_cli.command("reset")
def reset_command(
    ctx: typer.Context,
    binding: Annotated[str, typer.Argument(help="The binding (performer name).")],
    names: Annotated[list[str] | None, typer.Argument(
        help="The limits to reset: concurrency, key_concurrency, rate_limit, priority_aging, key_rate_limit "
             "(none: all).")] = None,
    app_ref: AppOption = None,
    url: UrlOption = None,
    schema: SchemaOption = None,
    wait: WaitOption = WAIT,
) -> None:
    """Drop run-time overrides set with ``limits set``: the code's values apply again at the next dispatch."""
    app = open_target(ctx, app_ref, url, schema, wait)

    async def apply(a: App) -> list[BindingLimits]:
        await a.reset_limits(binding, *(names or ()))
        return [r for r in await read_limits(a) if r.binding == binding]

    print_table(limits_table(run(app, apply)))


@limits_cli.command("list")
def list_command(
    ctx: typer.Context, app_ref: AppOption = None, url: UrlOption = None, schema: SchemaOption = None,
    as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """List each binding's limits in force."""
    app = open_target(ctx, app_ref, url, schema, wait)
    rows = run(app, read_limits)
    if as_json:
        print_json([r.as_json() for r in rows])
    elif not rows:
        console.print("no bindings yet (a worker registers its bindings when it starts)", style="dim")
    else:
        print_table(limits_table(rows))
