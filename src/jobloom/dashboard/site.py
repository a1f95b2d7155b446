"""The dashboard's web application alone; :func:`jobloom.web.asgi` serves it at ``/`` next to the API."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from jobloom.app.facade import App
from jobloom.dashboard import actions, job, jobs, limits, login, overview, runs, schedules, workers
from jobloom.dashboard.session import Sessions
from jobloom.dashboard.web import Dashboard
from jobloom.http.auth import Guard


def create_dashboard(app: App, guard: Guard, *, session_key: bytes | None = None,
                     sessions: Sessions | None = None) -> Starlette:
    """The dashboard alone (Starlette), taking the tokens ``guard`` checks."""
    d = Dashboard(app, sessions or Sessions(guard, session_key))
    routes: list[Any] = [Mount("/static", StaticFiles(packages=[("jobloom.dashboard", "static")]), name="static")]
    for module in (login, overview, actions, jobs, job, runs, schedules, limits, workers):  # jobs before job
        routes += module.routes(d)
    return Starlette(routes=routes)

