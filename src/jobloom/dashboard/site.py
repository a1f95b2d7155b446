"""The dashboard's web application, and the site that serves it at ``/`` next to the API at ``/v1``.

:func:`create_site` is what ``App.asgi()`` and ``jobloom serve`` hand out: the API's own stack (the
body cap, then the fast lanes that serve enqueue and the worker protocol without routing), and behind
the fast lanes a split: paths under ``/v1``, ``/metrics`` (and the server's lifespan) go to the API's FastAPI app,
everything else to the dashboard, which takes the API's tokens (its :class:`~jobloom.http.auth.Guard`).
The fast lanes' requests never reach the split, so the dashboard costs them nothing.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from jobloom.app.facade import App
from jobloom.dashboard import actions, job, jobs, limits, login, overview, runs, schedules, workers
from jobloom.dashboard.session import Sessions
from jobloom.dashboard.web import Dashboard
from jobloom.http.auth import AuthMode, Guard
from jobloom.http.bounds import Bounds
from jobloom.http.factory import create_fastapi, with_bodies
from jobloom.http.fastlane import FastLane
from jobloom.http.gate import Gate, SessionCheck
from jobloom.http.jsononly import JsonOnly

API_PREFIX = "/v1"
METRICS_PATH = "/metrics"  # the API's Prometheus endpoint, at the root where scrapers look for it


def create_dashboard(app: App, guard: Guard, *, session_key: bytes | None = None,
                     sessions: Sessions | None = None) -> Starlette:
    """The dashboard alone (Starlette), taking the tokens ``guard`` checks."""
    d = Dashboard(app, sessions or Sessions(guard, session_key))
    routes: list[Any] = [Mount("/static", StaticFiles(packages=[("jobloom.dashboard", "static")]), name="static")]
    for module in (login, overview, actions, jobs, job, runs, schedules, limits, workers):  # jobs before job
        routes += module.routes(d)
    return Starlette(routes=routes)


class Site:
    """Sends ``/v1`` and ``/metrics`` (and lifespan events) to the API, every other HTTP request to the
    dashboard."""

    def __init__(self, api: ASGIApp, dashboard: ASGIApp) -> None:
        self.api = api
        self.dashboard = dashboard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Route one request."""
        if scope["type"] == "http":
            path, root = scope["path"], scope.get("root_path", "")
            if root and path.startswith(root):
                path = path[len(root):]
            if not path.startswith(API_PREFIX) and path != METRICS_PATH:
                await self.dashboard(scope, receive, send)
                return
        await self.api(scope, receive, send)


def create_site(
    app: App, *, auth: AuthMode = "required", named: bool = False, max_body: int | None = None,
    max_batch_body: int | None = None, token_ttl: float = 1.0, dashboard: bool = True,
    session_key: bytes | None = None, metrics: bool = True, bounds: Bounds | None = None,
) -> Any:
    """The API under ``/v1`` (see :func:`jobloom.http.factory.create_asgi` for the options) and, with
    ``dashboard``, the dashboard at ``/``. ``session_key``: the key that signs session cookies (default:
    a new random key, so a restart ends the sessions). ``metrics``: serve ``GET /metrics`` (Prometheus).
    In front of it all, the gate (:mod:`jobloom.http.gate`): a caller with neither a token nor a
    dashboard session may send only a small body, and none to the API."""
    bounds = with_bodies(bounds, max_body, max_batch_body)
    fastapi = create_fastapi(app, auth=auth, named=named, token_ttl=token_ttl, metrics=metrics,
                             long_polls_per_token=bounds.long_polls_per_token)
    ctx = fastapi.state.jobloom
    inner: ASGIApp = fastapi
    session: SessionCheck | None = None
    if dashboard:  # behind the fast lanes: their requests never pass through the split
        sessions = Sessions(ctx.guard, session_key)
        inner = Site(fastapi, create_dashboard(app, ctx.guard, sessions=sessions))

        async def has_session(scope: Any) -> bool:
            return await sessions.read(Request(scope)) is not None

        session = has_session

    return Gate(JsonOnly(FastLane(inner, ctx)), ctx.guard, bounds, session, polls=ctx.polls)
