"""Building the API: ``create_asgi(app)``, the ASGI application that :func:`jobloom.web.asgi` serves."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from jobloom.app.facade import App
from jobloom.core.extras import needs_extra
from jobloom.http import (
    batches,
    binding_state,
    bindings,
    docs,
    errors,
    health,
    jobs,
    runs,
    schedules,
    search,
    topics,
    worker,
)
from jobloom.http.auth import SECURITY_SCHEMES, AuthMode, Guard
from jobloom.http.bounds import Bounds
from jobloom.http.context import Context
from jobloom.http.fastlane import FastLane
from jobloom.http.gate import Gate
from jobloom.http.jsononly import JsonOnly
from jobloom.http.longpoll import LongPolls

OPENAPI_URL = "/v1/openapi.json"
DESCRIPTION = """\
jobloom's REST API: enqueue jobs, start flow runs, read and act on them, from any language.

Send `Authorization: Bearer <token>` (made with `jobloom tokens create NAME --scopes ...`). Scopes:
`read` (every GET), `enqueue` (jobs, batches, topics, runs, events), `operate` (cancel, retry, delete, resume,
pause, trigger, limits), `worker` (the worker protocol of remote workers), `admin` (all). Errors are always
`{"error": {"type", "message", "field"?}}`.
"""


def create_fastapi(app: App, *, auth: AuthMode = "required", named: bool = False, token_ttl: float = 1.0,
                   metrics: bool = True, long_polls_per_token: int | None = None) -> FastAPI:
    """The FastAPI application of the API for ``app`` (see :func:`create_asgi`)."""
    from jobloom import __version__

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:  # long polls answer now; then the store of the server's event loop is closed
            ctx.polls.stop()
            await app.close()

    api = FastAPI(title="jobloom", version=__version__, description=DESCRIPTION, openapi_url=OPENAPI_URL,
                  docs_url=None, redoc_url=None, lifespan=lifespan)
    polls = LongPolls() if long_polls_per_token is None else LongPolls(long_polls_per_token)
    ctx = Context(app, Guard(app, auth, token_ttl), named=named, polls=polls)
    errors.install(api)
    # search before /jobs/{id}
    for module in (search, jobs, batches, topics, runs, schedules, binding_state, bindings, worker, health):
        api.include_router(module.router(ctx))
    if metrics:  # prometheus-client is imported only here, when the route is wanted
        with needs_extra("metrics", "the API's /metrics", " (or metrics=False)"):
            from jobloom.http import metrics as metrics_route

        api.include_router(metrics_route.router(ctx))
    docs.install(api, OPENAPI_URL)
    api.state.jobloom = ctx
    api.openapi = lambda: openapi(api)  # type: ignore[method-assign]
    return api


def openapi(api: FastAPI) -> dict[str, Any]:
    """The OpenAPI document with the bearer scheme (each guarded operation names it, see ``Context.guarded``)."""
    if api.openapi_schema is not None:
        return api.openapi_schema
    doc = get_openapi(title=api.title, version=api.version, description=api.description, routes=api.routes)
    doc.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
    api.openapi_schema = doc
    return doc


def create_asgi(
    app: App, *, auth: AuthMode = "required", named: bool = False, max_body: int | None = None,
    max_batch_body: int | None = None, token_ttl: float = 1.0, metrics: bool = True, bounds: Bounds | None = None,
) -> Any:
    """The ASGI application serving ``app``'s API under ``/v1``.

    ``auth``: ``"required"`` (a token on every operation but health and docs, whether or not any token
    exists) or ``"off"`` (for an API mounted behind the user's own authentication).
    ``named``: the app is a bare store (``App(url)``), which enqueues bindings known to the store by name.
    ``max_body``: the largest request body of an authenticated caller (bytes; ``max_batch_body`` for
    ``POST /v1/jobs/batch``); 413 beyond. ``bounds``: every other limit (:class:`~jobloom.http.bounds.Bounds`;
    ``max_body`` and ``max_batch_body``, when given, replace its body caps). A request that needs a token is
    refused (401) before its body is read.
    ``token_ttl``: how long the active tokens are kept before being read again (a revoked token stops
    working within that time). ``metrics``: serve ``GET /metrics`` (Prometheus; scope ``read``) and count
    the app's enqueues for it.
    """
    bounds = with_bodies(bounds, max_body, max_batch_body)
    api = create_fastapi(app, auth=auth, named=named, token_ttl=token_ttl, metrics=metrics,
                         long_polls_per_token=bounds.long_polls_per_token)
    ctx: Context = api.state.jobloom
    return Gate(JsonOnly(FastLane(api, ctx)), ctx.guard, bounds, polls=ctx.polls)


def with_bodies(bounds: Bounds | None, max_body: int | None, max_batch_body: int | None) -> Bounds:
    """``bounds`` (default: the defaults) with the body caps given (None: as in ``bounds``)."""
    bounds = bounds or Bounds()
    return dataclasses.replace(bounds, max_body=bounds.max_body if max_body is None else max_body,
                               max_batch_body=bounds.max_batch_body if max_batch_body is None else max_batch_body)
