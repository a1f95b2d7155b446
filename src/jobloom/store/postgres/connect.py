"""Reaching the PostgreSQL server: the first connection (waiting out a server that is starting or
down, failing at once on what waiting cannot fix) and the offset between this host's clock and the
server's, which the store reads every time that decides from."""

from __future__ import annotations

import asyncio
import logging
import time

import psycopg
from psycopg.conninfo import conninfo_to_dict

from jobloom.core.errors import StoreError, StoreUnreachable
from jobloom.core.retrying import Delays
from jobloom.store.postgres.faults import safe_url, server_unavailable
from jobloom.store.postgres.tx import AsyncConn

log = logging.getLogger("jobloom.store.postgres")

CLOCK_RESYNC = 30.0
"""Seconds after which the store measures the server's clock again."""
CONNECT_TIMEOUT = 10.0
"""Seconds one connection attempt may take."""
QUIET_WAIT = 5.0
"""Seconds of refused connections before the wait is logged as a warning (a restart is routine)."""


def server_address(url: str) -> str:
    """``host:port`` that ``url`` connects to (libpq's defaults filled in), for messages."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.Error:
        return "?"
    host = str(info.get("host") or "localhost")
    return f"{host}:{info.get('port') or 5432}"


async def connect_when_up(url: str, wait: float, cls: type[AsyncConn] = psycopg.AsyncConnection) -> AsyncConn:
    """A connection to ``url`` once the server answers. A server that is down or starting is waited for,
    with backoff, up to ``wait`` seconds (then :class:`StoreUnreachable`); a refused login, a missing
    database or a URL libpq cannot read fails at once (:class:`StoreError`, with the server's message)."""
    started = time.monotonic()
    deadline = started + wait
    delays = Delays(0.05, 5.0)
    while True:
        try:
            conn: AsyncConn = await cls.connect(url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT))
            return conn
        except psycopg.Error as exc:
            reason = " ".join(str(exc).split())
            now = time.monotonic()
            where = f"PostgreSQL at {server_address(url)} ({safe_url(url)})"
            if not server_unavailable(exc):
                raise StoreError(f"cannot connect to {where}: {reason}") from exc
            if now >= deadline:
                raise StoreUnreachable(
                    f"cannot connect to {where}: {reason} (gave up after {now - started:.1f} s)",
                    server_address(url), now - started,
                ) from exc
            pause = min(delays.next(), deadline - now)  # the last try comes at the deadline
            level = logging.WARNING if now - started >= QUIET_WAIT else logging.DEBUG
            log.log(level, "PostgreSQL is not reachable (%s); trying again in %.2f s", reason, pause)
            await asyncio.sleep(pause)


class ServerClock:
    """The offset to add to this host's clock to read the server's, and how well it is known."""

    def __init__(self) -> None:
        self.offset = 0.0
        self.error = 0.0  # at most this far off: half the fastest round trip it was measured over
        self.synced = 0.0  # time.monotonic() of the last measurement

    def stale(self) -> bool:
        """Whether it is time to measure again."""
        return time.monotonic() - self.synced > CLOCK_RESYNC

    async def measure(self, conn: AsyncConn) -> float:
        """Read the server's clock a few times and keep the offset of the fastest round trip: the
        server's time is within half that round trip of the midpoint of our two readings. The offset."""
        best: tuple[float, float] | None = None
        for _ in range(3):
            t0 = time.time()
            cur = await conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8")
            row = await cur.fetchone()
            t1 = time.time()
            if row is None:
                continue
            sample = (t1 - t0, float(row[0]) - (t0 + t1) / 2)
            if best is None or sample[0] < best[0]:
                best = sample
        if best is not None:
            self.offset = best[1]
            self.error = best[0] / 2
        self.synced = time.monotonic()
        return self.offset
