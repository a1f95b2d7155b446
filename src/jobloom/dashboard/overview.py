"""The overview page: per binding its active jobs by state, queue latency (how long its oldest runnable
job has waited), throughput and run times (from the read model), the limits in force, and the workers
alive; charts of the last hour (per minute), day or week (per hour); its live part refreshes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobloom.app.bindings import BindingInfo
from jobloom.dashboard import reads
from jobloom.dashboard.session import Session
from jobloom.dashboard.web import Dashboard
from jobloom.housekeeping.stats import Figures, Stats, read_hours

COLUMNS = ("queued", "scheduled", "waiting", "running", "failed", "stalled", "cancelled")
"""The states the overview counts (each read from its index)."""
WINDOWS = {"1h": ("last hour", timedelta(hours=1)), "24h": ("last 24 hours", timedelta(days=1)),
           "7d": ("last 7 days", timedelta(days=7))}
"""The charts' windows: the last hour per minute, a day or a week per hour (the read model's hourly rows)."""
THROUGHPUT_WINDOW = 5
"""Throughput is the jobs finished per minute over this many minutes."""


def window_of(value: str | None) -> str:
    """The chart window a query asks for (an unknown one is the last hour)."""
    return value if value in WINDOWS else "1h"


@dataclass(frozen=True, slots=True)
class BindingLine:
    """One binding's line on the overview."""

    info: BindingInfo
    figures: Figures
    tokens: float | None
    keys_full: int
    keys_running: int
    latency: float | None = None
    recent: Figures = field(default_factory=Figures)

    @property
    def throughput(self) -> float:
        """Jobs finished (succeeded or failed) per minute over the last :data:`THROUGHPUT_WINDOW` minutes."""
        return (self.recent.succeeded + self.recent.failed) / THROUGHPUT_WINDOW

    @property
    def running(self) -> int:
        """Jobs running now."""
        return self.info.counts.get("running", 0)


async def overview_values(d: Dashboard, window: str = "1h") -> dict[str, Any]:
    """What the overview shows (bindings, stats, workers, the chart of ``window``) as template values."""
    app = d.app
    store = await app.store()
    infos = await app.list_bindings()
    stats: Stats = await app.stats(since=timedelta(hours=1))
    recent: Stats = await app.stats(since=timedelta(minutes=THROUGHPUT_WINDOW))
    rows = await reads.binding_rows(store)
    keyed = [b.binding for b in infos if b.counts.get("running")]
    keys = await reads.running_keys(store, keyed)
    workers = await reads.workers(store)
    now = store.now()
    latency = await reads.queue_latency(store, [b.binding for b in infos if b.counts.get("queued")], now)
    lines = []
    for info in infos:
        running_keys = keys.get(info.binding, [])
        full = sum(1 for k in running_keys if k.n >= info.policy.key_concurrency)
        lines.append(BindingLine(info, stats.bindings.get(info.binding, Figures()),
                                 reads.tokens_now(rows.get(info.binding), info.policy, now), full, len(running_keys),
                                 latency.get(info.binding), recent.bindings.get(info.binding, Figures())))
    if window == "1h":
        chart = chart_data(stats, now)
    else:
        chart = hourly_chart(await read_hours(store, since=WINDOWS[window][1]), now)
    worst = max(lines, key=lambda line: line.latency or 0.0, default=None)
    return {"lines": lines, "stats": stats, "chart": chart, "columns": COLUMNS, "now": now,
            "workers_alive": [w for w in workers if w.alive], "workers_total": len(workers),
            "window": window, "windows": WINDOWS, "worst": worst if worst and worst.latency is not None else None}


def chart_data(stats: Stats, now: float) -> dict[str, Any]:
    """The last hour per minute for the charts: every minute present (no events: zero counts, no run times),
    and the x range from the first minute to now."""
    by_minute = {int(m.timestamp()) // 60: f for m, f in stats.minutes}
    first, last = int(stats.since.timestamp()) // 60, int(now) // 60
    return _series(by_minute, range(first, last + 1), 1, "min")


def hourly_chart(stats: Stats, now: float) -> dict[str, Any]:
    """A day or a week per hour for the charts (read from the hourly rows): every hour present."""
    by_minute = {int(m.timestamp()) // 60: f for m, f in stats.minutes}
    first, last = int(stats.since.timestamp()) // 60, int(now) // 60
    return _series(by_minute, range(first, last - last % 60 + 1, 60), 60, "hour")


def _series(by_minute: dict[int, Figures], minutes: range, step: int, per: str) -> dict[str, Any]:
    points = [(m * 60, by_minute.get(m, Figures())) for m in minutes]
    return {
        "x": [m for m, _ in points], "range": [minutes.start * 60, (minutes[-1] + step) * 60], "per": per,
        "succeeded": [f.succeeded for _, f in points], "failed": [f.failed for _, f in points],
        "started": [f.started for _, f in points],
        "p50": [f.p50 for _, f in points], "p90": [f.p90 for _, f in points], "p99": [f.p99 for _, f in points],
    }


def routes(d: Dashboard) -> list[Route]:
    """The overview's routes: the page and its live part."""

    async def page(request: Request, session: Session) -> Response:
        window = window_of(request.query_params.get("window"))
        return d.html(request, "overview.html", session, active="overview", **await overview_values(d, window))

    async def live(request: Request, session: Session) -> Response:
        window = window_of(request.query_params.get("window"))
        return d.html(request, "overview_live.html", session, **await overview_values(d, window))

    return [Route("/", d.page(page)), Route("/overview/live", d.page(live))]
