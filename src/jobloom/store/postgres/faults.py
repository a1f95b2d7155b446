"""How the PostgreSQL store reads a failure: a conflict or a lost connection to retry, a commit whose
answer was lost, a server that waiting may bring back."""

from __future__ import annotations

import re
import select

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from jobloom.store.postgres.tx import AsyncConn


def is_transient(exc: BaseException) -> bool:
    """Whether running the transaction again may succeed: a conflict, or a lost connection."""
    if isinstance(
        exc, pg_errors.SerializationFailure | pg_errors.DeadlockDetected | pg_errors.LockNotAvailable | PoolTimeout
    ):
        return True
    if isinstance(exc, psycopg.OperationalError):
        state = exc.sqlstate
        # No SQLSTATE: the connection broke client-side. 08: connection exception. 57P01-03: the
        # server is shutting down or starting. 53300: too many connections (for now).
        return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03", "53300")
    return False


def has_unread(conn: AsyncConn) -> bool:
    """Whether an idle connection's socket has something to read (the server said goodbye)."""
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` leaves the transaction's outcome unknown: the server's own error (a failed
    statement, a failed COMMIT) means nothing was committed; a broken connection says nothing."""
    if not isinstance(exc, psycopg.Error):
        return isinstance(exc, OSError)
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


def server_unavailable(exc: psycopg.Error) -> bool:
    """A connection error that waiting may cure (down, starting, full), not a refused login or a URL
    that libpq cannot read (``invalid URI query parameter``: no retry makes it valid)."""
    if isinstance(exc, psycopg.ProgrammingError):
        return False
    text = str(exc)
    if "FATAL" not in text:
        return True  # refused, timed out, unreachable
    return any(s in text for s in ("starting up", "shutting down", "in recovery", "too many clients"))


def safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)
