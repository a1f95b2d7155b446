"""The workers page: each registered worker process, alive or not, its bindings, the jobs it runs
and its last heartbeat (live)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobloom.dashboard import reads
from jobloom.dashboard.session import Session
from jobloom.dashboard.web import Dashboard


def routes(d: Dashboard) -> list[Route]:
    """The workers page and its live part."""

    async def values() -> dict[str, Any]:
        store = await d.app.store()
        return {"workers": await reads.workers(store), "now": store.now()}

    async def page(request: Request, session: Session) -> Response:
        return d.html(request, "workers.html", session, active="workers", **await values())

    async def live(request: Request, session: Session) -> Response:
        return d.html(request, "workers_live.html", session, **await values())

    return [Route("/workers", d.page(page)), Route("/workers/live", d.page(live))]
