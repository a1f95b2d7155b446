"""Transactions on the caller's own connection (transactional enqueue): jobloom's statements run
under a savepoint, with the store's ``search_path`` for the transaction (the caller's is read first
and put back), and ``NOTIFY`` wakes the workers when the caller commits. One round trip goes in and
one comes out; a failure rolls back to the savepoint and leaves the caller's transaction usable."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from jobloom.core.errors import StoreError
from jobloom.store.base import Tx, run_without_loop
from jobloom.store.postgres.channel import channel_name
from jobloom.store.postgres.tx import PostgresTx, SyncPostgresTx

T = TypeVar("T")


async def in_callers_transaction(conn: Any, fn: Callable[[Tx], Awaitable[T]], *, schema: str | None) -> T:
    """Run ``fn`` inside the transaction open on the caller's ``psycopg.AsyncConnection``."""
    if not isinstance(conn, psycopg.AsyncConnection):
        raise StoreError(
            f"connection= on a PostgreSQL store takes a psycopg.AsyncConnection here, not {type(conn).__name__}"
        )
    if conn.autocommit and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        raise StoreError("transactional enqueue needs a connection inside a transaction")
    cur = await conn.execute(_enter_sql(schema))
    old_path = await _next_value(cur) if schema is not None else None
    channel = channel_name(await _next_value(cur))
    try:
        tx = PostgresTx(conn, channel=channel)
        result = await fn(tx)
        await tx.connection()  # its deferred writes go out before the savepoint is released
    except BaseException:
        with contextlib.suppress(psycopg.Error):  # the connection is gone: the caller's rollback
            await conn.execute(_exit_sql(channel, old_path, ok=False))
        raise
    await conn.execute(_exit_sql(channel, old_path, ok=True))
    return result


def in_callers_transaction_sync(conn: Any, fn: Callable[[Tx], Coroutine[Any, Any, T]], *,
                                schema: str | None) -> T:
    """Run ``fn`` (awaiting only the Tx it is given) inside the transaction open on the caller's
    ``psycopg.Connection``, in the calling thread, without an event loop."""
    if not isinstance(conn, psycopg.Connection):
        raise StoreError(
            f"connection= on a PostgreSQL store takes a psycopg.Connection here, not {type(conn).__name__}"
        )
    if conn.autocommit and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        raise StoreError("transactional enqueue needs a connection inside a transaction")
    cur = conn.execute(_enter_sql(schema))
    old_path = _next_value_sync(cur) if schema is not None else None
    channel = channel_name(_next_value_sync(cur))
    try:
        result = run_without_loop(fn(SyncPostgresTx(conn)))
    except BaseException:
        with contextlib.suppress(psycopg.Error):  # the connection is gone: the caller's rollback
            conn.execute(_exit_sql(channel, old_path, ok=False))
        raise
    conn.execute(_exit_sql(channel, old_path, ok=True))
    return result


def _enter_sql(schema: str | None) -> sql.Composed:
    # One round trip: a savepoint, (with a schema) this store's search_path for the transaction,
    # reading the caller's first so that it can be put back, and the schema the rows go to (whose
    # channel wakes its workers).
    parts: list[sql.Composable] = [sql.SQL("SAVEPOINT jobloom_enqueue")]
    if schema is not None:
        parts.append(sql.SQL("SELECT current_setting('search_path'), set_config('search_path', {}, true)")
                     .format(sql.Literal(sql.Identifier(schema).as_string(None))))
    parts.append(sql.SQL("SELECT current_schema()"))
    return sql.SQL("; ").join(parts)


def _exit_sql(channel: str, old_path: str | None, *, ok: bool) -> sql.Composed:
    parts: list[sql.Composable] = []
    if ok:
        parts.append(sql.SQL("SELECT pg_notify({}, '')").format(sql.Literal(channel)))
    else:
        parts.append(sql.SQL("ROLLBACK TO SAVEPOINT jobloom_enqueue"))
    if old_path is not None:
        parts.append(sql.SQL("SELECT set_config('search_path', {}, true)").format(sql.Literal(old_path)))
    parts.append(sql.SQL("RELEASE SAVEPOINT jobloom_enqueue"))
    return sql.SQL("; ").join(parts)


async def _next_value(cur: psycopg.AsyncCursor[TupleRow]) -> str | None:
    """The first value of the next result of ``cur``'s statements."""
    if not cur.nextset():
        return None
    row = await cur.fetchone()
    return None if row is None or row[0] is None else str(row[0])


def _next_value_sync(cur: psycopg.Cursor[TupleRow]) -> str | None:
    """:func:`_next_value` of a synchronous cursor."""
    if not cur.nextset():
        return None
    row = cur.fetchone()
    return None if row is None or row[0] is None else str(row[0])
