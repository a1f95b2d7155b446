"""``/v1/health`` (no token: the store answers and its migrations are current, else 503) and ``/v1/stats``."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from jobloom.core.errors import InvalidOption, MigrationsMissing, MigrationsTooOld
from jobloom.core.text import MAX_NAME_BYTES, check_name
from jobloom.http import schemas as s
from jobloom.http.context import Context, json_response
from jobloom.http.encode import dumps, stats_dict
from jobloom.http.jobs import ERRORS
from jobloom.store.migrations import missing_migrations

HEALTH_TIMEOUT = 5.0
log = logging.getLogger("jobloom.http")


def _store_kind(url: str) -> str:
    return "sqlite" if url.startswith("sqlite:") else "postgres"


def router(ctx: Context) -> APIRouter:
    """The health and stats routes."""
    api = APIRouter(prefix="/v1", tags=["health"])
    read = ctx.guarded("read")
    app = ctx.app

    @api.get("/health", response_model=s.HealthOut,
             responses={503: {"model": s.HealthOut, "description": "The store is unreachable or behind"}})
    async def health() -> Response:
        """Whether the store answers and has every migration this version needs (503 otherwise). No token."""
        kind = _store_kind(app.url)

        async def check() -> list[str]:
            store = await app.store()
            return [m.name for m in missing_migrations(store.dialect, await store.applied_migrations())]

        try:
            missing = await asyncio.wait_for(check(), HEALTH_TIMEOUT)
        except MigrationsMissing as exc:
            missing = exc.missing
        except MigrationsTooOld as exc:  # its text names the file or schema: not shown to anyone
            body = {"status": "unavailable", "store": kind, "migrations": "missing",
                    "detail": f"migrated part of the way by jobloom 0.2 (the last migration: {exc.last}): "
                              "upgrade through jobloom 0.2's `jobloom migrate` (docs/how-to/upgrades.md)"}
            return json_response(dumps(body), 503)
        except Exception as exc:  # the text may hold paths or hosts: logged here, not shown to anyone
            log.warning("health check: the store did not answer: %s: %s", type(exc).__name__, exc)
            body = {"status": "unavailable", "store": kind, "migrations": "unknown",
                    "detail": "the store did not answer (the server's log says why)"}
            return json_response(dumps(body), 503)
        if missing:
            body = {"status": "unavailable", "store": kind, "migrations": "missing",
                    "detail": "missing migrations: " + ", ".join(missing)}
            return json_response(dumps(body), 503)
        return json_response(dumps({"status": "ok", "store": kind, "migrations": "current", "detail": None}))

    @api.get("/stats", response_model=s.StatsOut, **read, responses=ERRORS)
    async def stats(
        binding: Annotated[str | None, Query(description="One binding's figures only.")] = None,
        since: Annotated[datetime | None, Query(description="From this moment (ISO 8601); default: an hour ago.")]
        = None,
    ) -> Response:
        """Counts and run-time percentiles from the read model, per binding and per minute."""
        if binding is not None:
            check_name("binding", binding, MAX_NAME_BYTES)
        if since is not None and since.tzinfo is None:
            raise InvalidOption("since", since.isoformat(), "a moment with a time zone (e.g. ...Z)")
        return json_response(dumps(stats_dict(await app.stats(binding=binding, since=since))))

    return api
