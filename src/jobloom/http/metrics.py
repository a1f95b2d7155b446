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
        return Response(render(registry) + served(ctx), media_type=CONTENT_TYPE)

    return api


def served(ctx: Context) -> bytes:
    """The server's own gauges: its long polls under way, its claims waiting, the rounds its job waits have read."""
    return (b"# HELP jobloom_http_long_polls Long polls (claims with wait, job waits) this server holds now.\n"
            b"# TYPE jobloom_http_long_polls gauge\n"
            b"jobloom_http_long_polls %d\n"
            b"# HELP jobloom_http_claims_waiting Long-poll claims waiting now for a job (past their first look).\n"
            b"# TYPE jobloom_http_claims_waiting gauge\n"
            b"jobloom_http_claims_waiting %d\n"
            b"# HELP jobloom_http_wait_reads_total Store reads of the jobs waited for (one per round, for all).\n"
            b"# TYPE jobloom_http_wait_reads_total counter\n"
            b"jobloom_http_wait_reads_total %d\n" % (ctx.polls.count, ctx.app.remote_claims_waiting, ctx.waits.rounds))
