"""The overview page: per binding its active jobs by state, throughput and run times over the last
hour (from the read model), the limits in force, and the workers alive; its live part refreshes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobloom.app.bindings import BindingInfo
from jobloom.dashboard import reads
from jobloom.dashboard.session import Session
from jobloom.dashboard.web import Dashboard
from jobloom.housekeeping.stats import Figures, Stats

COLUMNS = ("queued", "scheduled", "waiting", "running", "failed", "stalled", "cancelled")
"""The states the overview counts (each read from its index)."""


@dataclass(frozen=True, slots=True)
class BindingLine:
    """One binding's line on the overview."""

    info: BindingInfo
    figures: Figures
    tokens: float | None
    keys_full: int
    keys_running: int

    @property
    def running(self) -> int:
        """Jobs running now."""
        return self.info.counts.get("running", 0)


async def overview_values(d: Dashboard) -> dict[str, Any]:
    """What the overview shows (bindings, stats, workers) as template values."""
    app = d.app
    store = await app.store()
    infos = await app.list_bindings()
    stats: Stats = await app.stats(since=timedelta(hours=1))
    rows = await reads.binding_rows(store)
    keyed = [b.binding for b in infos if b.counts.get("running")]
    keys = await reads.running_keys(store, keyed)
    workers = await reads.workers(store)
    now = store.now()
    lines = []
    for info in infos:
        running_keys = keys.get(info.binding, [])
        full = sum(1 for k in running_keys if k.n >= info.policy.key_concurrency)
        lines.append(BindingLine(info, stats.bindings.get(info.binding, Figures()),
                                 reads.tokens_now(rows.get(info.binding), info.policy, now), full, len(running_keys)))
    chart = chart_data(stats, now)
    return {"lines": lines, "stats": stats, "chart": chart, "columns": COLUMNS, "now": now,
            "workers_alive": [w for w in workers if w.alive], "workers_total": len(workers)}


def chart_data(stats: Stats, now: float) -> dict[str, Any]:
    """The last hour per minute for the charts: every minute present (no events: zero counts, no run times),
    and the x range from the first minute to now."""
    by_minute = {int(m.timestamp()) // 60: f for m, f in stats.minutes}
    first, last = int(stats.since.timestamp()) // 60, int(now) // 60
    minutes = [(m * 60, by_minute.get(m, Figures())) for m in range(first, last + 1)]
    return {
        "x": [m for m, _ in minutes], "range": [first * 60, last * 60 + 60], "per": "min",
        "succeeded": [f.succeeded for _, f in minutes], "failed": [f.failed for _, f in minutes],
        "started": [f.started for _, f in minutes],
        "p50": [f.p50 for _, f in minutes], "p90": [f.p90 for _, f in minutes], "p99": [f.p99 for _, f in minutes],
    }


def routes(d: Dashboard) -> list[Route]:
    """The overview's routes: the page and its live part."""

    async def page(request: Request, session: Session) -> Response:
        return d.html(request, "overview.html", session, active="overview", **await overview_values(d))

    async def live(request: Request, session: Session) -> Response:
        return d.html(request, "overview_live.html", session, **await overview_values(d))

    return [Route("/", d.page(page)), Route("/overview/live", d.page(live))]
