"""``jobloom stats``: per binding, its jobs by state, throughput, run-time percentiles and queue latency.

What the dashboard's overview shows and ``GET /v1/stats`` returns: jobs by state now (each state read
from its index; succeeded and skipped ones are the history, counted in the figures instead), jobs
finished per minute over the last five minutes, how long the oldest runnable job has waited, and
since ``--since`` (default: an hour ago) the counts and run-time percentiles of the read model.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from jobloom.app.bindings import BindingInfo
from jobloom.app.facade import App
from jobloom.cli.common import (
    WAIT,
    AppOption,
    InternalOption,
    JsonOption,
    SchemaOption,
    UrlOption,
    WaitOption,
    console,
    fmt_time,
    open_target,
    print_table,
    run,
)
from jobloom.cli.jobs import STATE_STYLES, parse_moment
from jobloom.core.text import MAX_NAME_BYTES, check_name
from jobloom.dashboard.reads import queue_latency
from jobloom.flows.flow import INTERNAL_BINDINGS
from jobloom.housekeeping.stats import Figures, Stats
from jobloom.http.encode import dumps, stats_dict

COUNTED = ("queued", "scheduled", "waiting", "running", "failed", "stalled", "cancelled")
"""The states counted now (as on the dashboard's overview); succeeded and skipped jobs are history."""
THROUGHPUT_MINUTES = 5
"""Throughput: jobs finished (succeeded or failed) per minute over this many minutes."""


@dataclass(frozen=True, slots=True)
class Overview:
    """What ``jobloom stats`` reads: the bindings with their counts, the figures since ``--since``, the
    last few minutes' figures (for throughput), and each binding's queue latency (seconds)."""

    bindings: list[BindingInfo]
    stats: Stats
    recent: Stats
    latency: dict[str, float]

    def names(self, internal: bool) -> list[str]:
        """Every binding with jobs, limits or figures (jobloom's own only if ``internal``), sorted."""
        found = {b.binding for b in self.bindings} | set(self.stats.bindings)
        return sorted(n for n in found if internal or n not in INTERNAL_BINDINGS)

    def counts(self, name: str) -> dict[str, int]:
        """Jobs of ``name`` by state now (succeeded and skipped left out)."""
        for b in self.bindings:
            if b.binding == name:
                return {s: n for s, n in b.counts.items() if n}
        return {}

    def throughput(self, name: str) -> float:
        """Jobs of ``name`` finished per minute over the last :data:`THROUGHPUT_MINUTES` minutes."""
        f = self.recent.bindings.get(name, Figures())
        return (f.succeeded + f.failed) / THROUGHPUT_MINUTES


async def read_overview(a: App, binding: str | None, since: Any) -> Overview:
    """Read what ``jobloom stats`` shows, through the app's reads (the overview's own)."""
    store = await a.store()
    infos = [b for b in await a.list_bindings() if binding is None or b.binding == binding]
    stats = await a.stats(binding=binding, since=since)
    recent = await a.stats(binding=binding, since=timedelta(minutes=THROUGHPUT_MINUTES))
    latency = await queue_latency(store, [b.binding for b in infos if b.counts.get("queued")], store.now())
    return Overview(infos, stats, recent, latency)


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 1:
        return f"{value * 1000:.0f}ms"
    return f"{value:.1f}s" if value < 120 else f"{value / 60:.1f}m"


def stats_table(o: Overview, names: list[str]) -> Table:
    """One row per binding: jobs by state now, throughput, finished since, run-time percentiles, latency."""
    table = Table(header_style="bold")
    table.add_column("binding")
    for s in COUNTED:
        table.add_column(s, justify="right", style=STATE_STYLES.get(s, ""))
    for name in ("per min", "succeeded", "failed", "p50", "p90", "p99", "oldest"):
        table.add_column(name, justify="right")
    for name in names:
        counts, f = o.counts(name), o.stats.bindings.get(name, Figures())
        table.add_row(name, *(str(counts.get(s, 0)) for s in COUNTED), f"{o.throughput(name):.1f}",
                      str(f.succeeded), str(f.failed), _seconds(f.p50), _seconds(f.p90), _seconds(f.p99),
                      _seconds(o.latency.get(name)))
    return table


def stats_json(o: Overview, names: list[str]) -> dict[str, Any]:
    """``GET /v1/stats``'s body (its ``bindings`` limited to ``names``), with ``counts`` (jobs by state now),
    ``throughput`` (jobs finished per minute, last five minutes) and ``queue_latency`` (seconds) per binding."""
    body = stats_dict(o.stats)
    body["bindings"] = {n: f for n, f in body["bindings"].items() if n in names}
    body["counts"] = {n: o.counts(n) for n in names}
    body["throughput"] = {n: o.throughput(n) for n in names}
    body["queue_latency"] = {n: o.latency[n] for n in names if n in o.latency}
    return body


def stats(
    ctx: typer.Context,
    binding: Annotated[str | None, typer.Option(help="One binding's figures only.")] = None,
    since: Annotated[str | None, typer.Option(
        help="Figures from this moment: ISO 8601 (UTC if no offset) or epoch seconds [default: an hour ago].",
        show_default=False)] = None,
    internal: InternalOption = False,
    app_ref: AppOption = None, url: UrlOption = None, schema: SchemaOption = None, as_json: JsonOption = False,
    wait: WaitOption = WAIT,
) -> None:
    """Per binding: jobs by state now, jobs finished per minute (last 5 minutes), succeeded, failed and
    run-time percentiles since --since, and how long the oldest runnable job has waited (as the dashboard's
    overview; --json: GET /v1/stats's body with counts, throughput and queue_latency added)."""
    if binding is not None:
        check_name("--binding", binding, MAX_NAME_BYTES)
    moment = parse_moment("--since", since)
    app = open_target(ctx, app_ref, url, schema, wait)
    o = run(app, lambda a: read_overview(a, binding, moment))
    names = o.names(internal or binding is not None)
    if as_json:
        sys.stdout.write(json.dumps(json.loads(dumps(stats_json(o, names))), indent=2) + "\n")
        return
    console.print(Text.assemble(("since ", "dim"), fmt_time(o.stats.since)), highlight=False)
    if not names:
        console.print("no bindings yet (a worker registers its bindings when it starts)", style="dim")
    else:
        print_table(stats_table(o, names))
    t = o.stats.total
    expired = f"{t.expired} expired, " if t.expired else ""  # not started by their expiry
    console.print(f"all: {t.enqueued} enqueued, {t.succeeded} succeeded, {t.failed} failed, {t.retried} retried, "
                  f"{expired}run time p50 {_seconds(t.p50)} p90 {_seconds(t.p90)} p99 {_seconds(t.p99)}",
                  highlight=False)
    if o.stats.pending_events:
        console.print(f"{o.stats.pending_events} events not counted yet (workers fold them in)", style="dim")
