"""FastAPI: open the jobloom app with the service, and mount its HTTP API.

::

    from jobloom.contrib.fastapi import lifespan, mount

    api = FastAPI(lifespan=lifespan(app))     # the store is opened (and checked) at start-up, closed at shutdown
    mount(api, app, "/jobs")                  # the jobloom API under /jobs/v1/...

    @api.post("/signups")
    async def signup(body: Signup) -> dict[str, int]:
        job = await app.enqueue(Welcome, body)
        return {"job": job.id}
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from jobloom.app.facade import App


def lifespan(
    app: App, then: Callable[[Any], AbstractAsyncContextManager[Any]] | None = None,
) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """A lifespan for ``FastAPI(lifespan=...)`` that opens ``app``'s store at start-up and closes it at shutdown.

    Opening connects and checks the migrations, so a service whose store is unreachable or not migrated
    fails to start (with jobloom's error) instead of failing its first request. ``then``: the service's
    own lifespan, entered inside this one (the store is open while it runs)."""

    @asynccontextmanager
    async def span(api: Any) -> AsyncIterator[None]:
        try:
            await app.store()
            if then is None:
                yield
            else:
                async with then(api):
                    yield
        finally:
            await app.close()

    return span


def mount(api: Any, app: App, path: str = "/jobs", **options: Any) -> None:
    """Mount ``app``'s HTTP API (``jobloom.web.asgi(app, **options)``) on the FastAPI or Starlette app ``api``
    at ``path``.

    ``options`` are :func:`jobloom.web.asgi`'s: ``auth="required"`` (the default: a token on every call)
    or ``"off"`` (behind the service's own authentication),
    ``max_body=``. The mounted API shares the service's event loop, so the store opened by
    :func:`lifespan` serves both."""
    from jobloom.web import asgi

    api.mount(path, asgi(app, **options))
