"""PostgreSQL behind a connection pooler in transaction pooling mode (PgBouncer's ``pool_mode =
transaction``): each transaction may run on another server connection, so nothing may rest on a
session.

Through such a pooler the store (``pooled``): prepares no statement (``prepare_threshold=None``), sets
no session setting (the search path of ``schema=``, or of the URL's ``options=-csearch_path=...``,
which the pooler does not pass on, is set for each transaction with ``set_config(..., true)``), runs
single statements in a transaction of their own when a search path is needed, and does not
``LISTEN``: a notification reaches the server connection that listened, which the pooler has already
given to another client. Wake-ups then come from ``listen_url`` (a URL straight to the server,
``App(url, listen_url=...)``, ``jobloom worker --listen-url``), or, without one, the store polls:
every :data:`POLL_INTERVAL` seconds its subscribers look at the store, and it says so once.

A pooler is recognised when the server says it listens on another port than the URL names (the
pooler's port); ``pooled=True`` or ``False`` says it outright.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from jobloom.store.base import Wakeups

log = logging.getLogger("jobloom.store.postgres")
POLL_INTERVAL = 1.0
"""Seconds between two looks of a worker (or ``App.wait``) behind a pooler without ``listen_url``."""
_SEARCH_PATH = re.compile(r"-c\s*search_path\s*=\s*(\S+)")


async def behind_pooler(conn: psycopg.AsyncConnection[Any], url: str) -> bool:
    """Whether ``conn`` (made to ``url``) reaches its server through a pooler: the server listens on
    another port than the URL names. A Unix socket or a URL naming several servers says nothing."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.Error:
        return False
    port = str(info.get("port") or "5432")
    if "," in port or "," in str(info.get("host") or ""):
        return False
    cur = await conn.execute("SELECT inet_server_port()")
    row = await cur.fetchone()
    return row is not None and row[0] is not None and str(row[0]) != port


def session_free(url: str, schema: str | None) -> tuple[str, str | None]:
    """The URL without the ``options`` a pooler does not pass on, and the search path to set in each
    transaction (``schema``, else the URL's ``options=-csearch_path=...``; None: the server's)."""
    info = conninfo_to_dict(url)
    options = str(info.pop("options", "") or "")
    found = _SEARCH_PATH.search(options)
    path = sql.Identifier(schema).as_string() if schema is not None else (
        found.group(1) if found else None)
    return make_conninfo("", **info), path


class PollingWakeups(Wakeups):
    """Wake-ups without ``LISTEN``: a signal every :data:`POLL_INTERVAL` seconds."""

    def __init__(self, interval: float = POLL_INTERVAL) -> None:
        self.interval = interval

    async def wait(self, timeout: float | None) -> bool:
        """Sleep the interval (True: look now), or less if ``timeout`` comes first (False)."""
        if timeout is not None and timeout < self.interval:
            await asyncio.sleep(max(0.0, timeout))
            return False
        await asyncio.sleep(self.interval)
        return True

    def on_signal(self, callback: Callable[[], None]) -> bool:
        """Not supported: the worker waits with :meth:`wait`."""
        return False

    async def close(self) -> None:
        """Nothing to close."""


def say_polling(url: str) -> None:
    """Say once, at open, that wake-ups are polled."""
    log.warning("PostgreSQL at %s is reached through a connection pooler (transaction pooling): LISTEN/NOTIFY "
                "cannot work through it, so workers look for jobs every %.0f s; give a direct URL for wake-ups "
                "(App(..., listen_url=...), jobloom worker --listen-url) to be woken at once", url, POLL_INTERVAL)
