"""Procrastinate on PostgreSQL (``PEERS_PG_URL``, a database of its own): async no-op tasks."""

from __future__ import annotations

import os

from procrastinate import App, PsycopgConnector
from stamps import drain_stamp, latency_stamp

app = App(connector=PsycopgConnector(conninfo=os.environ.get("PEERS_PG_URL", "postgresql://postgres@127.0.0.1/peers")))


@app.task(name="noop")
async def noop(i: int) -> None:
    drain_stamp()


@app.task(name="stamped")
async def stamped(enqueued: float) -> None:
    latency_stamp(enqueued)
