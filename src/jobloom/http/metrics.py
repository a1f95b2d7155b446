"""``GET /metrics``: the Prometheus metrics of this process and the store's gauges (scope ``read``).

The counters are those of the process serving the API (its enqueues; a worker's own are on
``jobloom worker --metrics-port``); the gauges (jobs by binding and state, limits, rate tokens) are read
from the store at most once every five seconds, however often it is scraped.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import Response

from jobloom.http.context import Context
from jobloom.observe.exposition import render, scrape_registry
from jobloom.observe.gauges import StoreGauges
from jobloom.observe.metrics import enable_metrics

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SCRAPE_TIMEOUT = 10.0


def router(ctx: Context) -> APIRouter:
    """The metrics route; it enables the app's metrics (its enqueues are counted from now on)."""
    api = APIRouter(tags=["metrics"])
    enable_metrics(ctx.app.telemetry)
    gauges = StoreGauges(ctx.app.store, bindings=sorted(ctx.app.specs))
    registry = scrape_registry(gauges)
    lock = asyncio.Lock()

    @api.get("/metrics", include_in_schema=False, **ctx.guarded("read"))
    async def metrics() -> Response:
        """The metrics in Prometheus' text format."""
        async with lock:  # one read of the store at a time; the others use it
            try:
                await asyncio.wait_for(gauges.refresh(), SCRAPE_TIMEOUT)
            except TimeoutError:
                gauges.error = f"the store did not answer within {SCRAPE_TIMEOUT:g} s"
        return Response(render(registry), media_type=CONTENT_TYPE)

    return api
