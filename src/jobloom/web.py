"""The web site of an app: the HTTP API at ``/v1`` and the dashboard at ``/``, as one ASGI application.

:func:`asgi` is what ``jobloom serve`` serves and what a service mounts (``fastapi_app.mount("/jobs",
jobloom.web.asgi(app))``): the API's own stack (the gate, then the fast lanes that serve enqueue and the
worker protocol without routing), and behind the fast lanes a split: paths under ``/v1``, ``/metrics``
(and the server's lifespan) go to the API's FastAPI app, everything else to the dashboard, which takes
the API's tokens (its :class:`~jobloom.http.auth.Guard`). The fast lanes' requests never reach the split,
so the dashboard costs them nothing.

This module is the top of the web stack: it composes the API (:mod:`jobloom.http`) and the dashboard
(:mod:`jobloom.dashboard`), and nothing below it imports it (``App.asgi()``, kept for existing code,
loads it by name when called). It needs the ``web`` extra.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from jobloom.app.facade import App
from jobloom.dashboard.session import Sessions
from jobloom.dashboard.site import create_dashboard
from jobloom.http.auth import AuthMode
from jobloom.http.bounds import Bounds
from jobloom.http.factory import create_fastapi, with_bodies
from jobloom.http.fastlane import FastLane
from jobloom.http.gate import Gate, SessionCheck
from jobloom.http.jsononly import JsonOnly

API_PREFIX = "/v1"
METRICS_PATH = "/metrics"  # the API's Prometheus endpoint, at the root where scrapers look for it


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


def asgi(
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


__all__ = ["API_PREFIX", "METRICS_PATH", "Site", "asgi"]
