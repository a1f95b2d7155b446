"""The PostgreSQL store: many workers on many machines share one database.

Serialization is taken only where a limit needs it: a row lock on a limited binding,
``FOR UPDATE SKIP LOCKED`` to claim, an advisory lock per unique key. Transactions run at READ
COMMITTED on pooled connections (psycopg 3 + ``psycopg_pool``); a transient failure (serialization
failure, deadlock, lost connection) rolls back and runs the transaction again with backoff. Idle
workers are woken by ``LISTEN/NOTIFY`` on one channel per schema.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from jobloom.core.errors import CommitUnknown, StoreError
from jobloom.core.retrying import Delays
from jobloom.store.base import Store, Tx, Wakeups, retried
from jobloom.store.migrations import pending
from jobloom.store.postgres.budget import check_budget
from jobloom.store.postgres.caller import in_callers_transaction, in_callers_transaction_sync
from jobloom.store.postgres.channel import channel_name, pool_channel
from jobloom.store.postgres.connect import ServerClock, connect_when_up
from jobloom.store.postgres.faults import connection_lost, has_unread, is_transient, safe_url
from jobloom.store.postgres.hosts import Servers, connection_class
from jobloom.store.postgres.listen import Listener
from jobloom.store.postgres.pooler import PollingWakeups, behind_pooler, say_polling, session_free
from jobloom.store.postgres.tx import AsyncConn, PostgresTx, SyncPostgresTx, to_psycopg
from jobloom.store.sql import load_migrations

T = TypeVar("T")
RECONNECT_GIVE_UP = 8.0
HELD_LIFETIME = 600.0
"""Seconds a connection stays held for single statements before it goes back to the pool (whose
``max_lifetime`` then recycles it in time)."""
log = logging.getLogger("jobloom.store.postgres")

_RETRY_DEADLINE = 60.0
_MIGRATE_LOCK = "jobloom.migrate"


class PostgresStore(Store):
    """PostgreSQL driver: ``PostgresStore("postgresql://user@host/db", schema="jobs")``.

    ``schema`` puts every jobloom table in that schema (created by :meth:`migrate`), so several
    apps can share a database; without it the connection's ``search_path`` decides. ``pool_min`` and
    ``pool_max`` size the connection pool; a transaction that keeps failing transiently is given up
    after ``retry_deadline`` seconds. ``connect_wait`` is how long :meth:`open` waits for a server that
    refuses connections (default: ``retry_deadline``; the command line uses a few seconds).
    ``asynchronous_claims=True``: direct claims of at-least-once jobs skip their flush (explanation/guarantees.md).
    """

    dialect = "postgres"
    streams_inserts = True
    pipelines = True

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        pool_min: int = 1, pool_max: int = 10,
        retry_deadline: float = _RETRY_DEADLINE, connect_wait: float | None = None,
        listen_url: str | None = None, pooled: bool | None = None,
        reserve: bool = False, asynchronous_claims: bool = False,
    ) -> None:
        if schema is not None and (not isinstance(schema, str) or not schema or "\0" in schema):
            raise StoreError(f"invalid schema name {schema!r}")
        if not 0 <= pool_min <= pool_max or pool_max < 1:
            raise StoreError(f"invalid pool size: pool_min={pool_min}, pool_max={pool_max}")
        self.url = url
        self.schema = schema
        self.pool_min = pool_min
        self.pool_max = pool_max
        self.retry_deadline = retry_deadline
        self.connect_wait = retry_deadline if connect_wait is None else connect_wait
        self.channel = channel_name(schema)  # without a schema, the one the server resolves (at open)
        self.listen_url = listen_url
        self.reserve = reserve  # check the server's connection budget at open, and open the pool full
        self.asynchronous_claims = bool(asynchronous_claims)
        self.pooled = pooled  # behind a transaction-pooling pooler (None: found out at open)
        self._pool_url = url
        self._search_path: str | None = None  # set in each transaction when pooled
        self._callers_schema = schema  # the search path set inside a caller's transaction (transact_on)
        self._pool: AsyncConnectionPool[AsyncConn] | None = None
        self._opening: asyncio.Lock | None = None
        self._listener: Listener | None = None
        self._listening: asyncio.Lock | None = None
        self._notifier: asyncio.Task[None] | None = None
        self._notify_wanted = False
        self._notify_failing = False
        self._clock = ServerClock()
        # one pooled connection kept out of the pool for single statements (an enqueue): checking a
        # connection out and back in costs more client time than the statement's own sending
        self._held: AsyncConn | None = None
        self._held_until = 0.0
        self._held_busy = False
        self._clock_task: asyncio.Task[None] | None = None
        # a URL naming several servers (a primary and standbys): connections skip an old primary (fencing)
        self._servers = Servers(url)
        self._conn_class: type[AsyncConn] = (
            connection_class(self._servers) if self._servers.several else psycopg.AsyncConnection)
        self._checking: asyncio.Task[None] | None = None  # a check of the pool's idle connections

    # -- connections --------------------------------------------------------------------------------

    async def _configure(self, conn: AsyncConn) -> None:
        if self.schema is not None and not self.pooled:  # behind a pooler: set in each transaction
            await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))

    async def open(self) -> None:
        """Check that the server answers, then open the pool.

        A server that is down or starting is waited for, with backoff, up to ``connect_wait``;
        a refused login or a missing database fails at once, with the server's message.
        """
        if self._pool is not None:
            return
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is not None:
                return
            await self._check_server()
            kwargs: dict[str, Any] = {"autocommit": True}
            if self.pooled:  # no prepared statement, no session setting
                kwargs["prepare_threshold"] = None
                self._pool_url, self._search_path = session_free(self.url, self.schema)
                if self.schema is None and self._search_path is not None:  # the URL's options said it
                    self._callers_schema = self._search_path
                if self.listen_url is None:
                    say_polling(safe_url(self.url))
            pool: AsyncConnectionPool[AsyncConn] = AsyncConnectionPool(
                self._pool_url, min_size=self.pool_min, max_size=self.pool_max, open=False,
                kwargs=kwargs, configure=self._configure, name="jobloom",
                connection_class=self._conn_class,
                # the pool's reconnect backoff doubles without a cap; giving up after a few seconds makes
                # the next request start a fresh attempt, so a worker is back soon after a long outage
                reconnect_timeout=RECONNECT_GIVE_UP,
            )
            try:
                await pool.open(wait=self.reserve, timeout=30.0)  # reserved: every connection now, or fail
                if self.schema is None:
                    self.channel = await pool_channel(pool, self._search_path, 30.0)
            except Exception as exc:
                await pool.close()
                raise StoreError(f"could not open {self.pool_min} connections to PostgreSQL at "
                                 f"{safe_url(self.url)} ({type(exc).__name__}: {exc})") from exc
            self._pool = pool

    async def _check_server(self) -> None:
        url = session_free(self.url, None)[0] if self.pooled else self.url
        conn = await connect_when_up(url, self.connect_wait, self._conn_class)
        try:
            if self.pooled is None:
                self.pooled = await behind_pooler(conn, self.url)
            if self.reserve and not self.pooled:
                await check_budget(conn, safe_url(self.url), self.pool_max, listens=True)
            self.clock_offset = await self._clock.measure(conn)
        finally:
            await conn.close()

    async def sync_clock(self) -> None:
        """Measure the offset between this host's clock and the server's again (on a pooled connection)."""
        pool = await self._ready()
        async with pool.connection(timeout=5.0) as conn:
            self.clock_offset = await self._clock.measure(conn)

    def now(self) -> float:
        """The server's clock, as estimated from this host's: every time that decides (leases, delays,
        deadlines, schedules, retention) is read from it, so hosts whose clocks disagree still agree on
        the order of things. The offset is measured at open and again every ``CLOCK_RESYNC`` seconds
        (:class:`~jobloom.store.postgres.connect.ServerClock`)."""
        if self.clock is not None:
            return self.clock()
        if self._clock.stale() and self._pool is not None and (
            self._clock_task is None or self._clock_task.done()
        ):
            with contextlib.suppress(RuntimeError):  # no running loop: measured at the next use
                self._clock_task = asyncio.get_running_loop().create_task(self._resync())
        return time.time() + self.clock_offset

    async def _resync(self) -> None:
        try:
            await self.sync_clock()
        except Exception as exc:  # keep the last offset; try again at the next resync
            self._clock.synced = time.monotonic()
            log.warning("could not read the PostgreSQL server's clock (%s: %s)", type(exc).__name__, exc)

    async def close(self) -> None:
        """Close the pool and the listening connection (after sending a pending NOTIFY)."""
        if self._notifier is not None and not self._notifier.done():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._notifier, 5.0)
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.stop()
        pool, self._pool = self._pool, None
        held, self._held = self._held, None
        if pool is not None:
            if held is not None and not self._held_busy:
                with contextlib.suppress(Exception):
                    await pool.putconn(held)
            await pool.close()

    async def _ready(self) -> AsyncConnectionPool[AsyncConn]:
        if self._pool is None:
            await self.open()
        assert self._pool is not None
        return self._pool

    # -- transactions -------------------------------------------------------------------------------

    async def transact(self, fn: Callable[[Tx], Awaitable[T]], *, exclusive: bool = True) -> T:
        """Run ``fn`` in one transaction on a pooled connection, again after a transient failure.

        ``exclusive`` is accepted for the seam's sake: PostgreSQL serializes with row locks taken by
        the queries themselves, not per transaction.
        """
        fn = self.coded(fn)

        async def once(conn: AsyncConn, phase: _Phase) -> T:
            tx = PostgresTx(conn, begun=False, channel=self.channel, search_path=self._search_path,
                            asynchronous_claims=self.asynchronous_claims)
            try:
                result = await fn(tx)
                phase.unsure = True  # from here on, the COMMIT may be applied without our hearing so
                await tx.commit()
            except BaseException:
                if conn.info.transaction_status != psycopg.pq.TransactionStatus.UNKNOWN:
                    with contextlib.suppress(psycopg.Error):
                        await tx.rollback()
                raise
            return result

        return await self._retrying(once, "COMMIT")

    async def autocommit(self, fn: Callable[[Tx], Awaitable[T]]) -> T:
        """Run ``fn``'s one statement on its own, without ``BEGIN``/``COMMIT``: one round trip.

        A statement is atomic by itself. A connection that the server has closed while it sat in the
        pool (a restart) is noticed before the statement is sent and replaced; a connection lost
        while the statement runs leaves its outcome unknown: :class:`CommitUnknown`.
        """
        fn = self.coded(fn)

        if self._search_path is not None:  # behind a pooler, a statement alone would miss the search path
            return await self.transact(fn)

        async def once(conn: AsyncConn, phase: _Phase) -> T:
            if has_unread(conn):  # idle connections hear only of their end (a FATAL, or EOF)
                await conn.close()
                raise psycopg.OperationalError("the pooled connection was closed by the server")
            phase.unsure = True  # the statement commits itself
            tx = PostgresTx(conn, channel=self.channel, statements=1)
            result = await fn(tx)
            if tx.has_pending():
                raise StoreError("a single-statement transaction left writes unsent")
            return result

        return await self._retrying(once, "a statement", held=True)

    async def _retrying(
        self, once: Callable[[AsyncConn, _Phase], Awaitable[T]], unsure_step: str, *, held: bool = False
    ) -> T:
        """Run ``once`` on a pooled connection until it succeeds, a failure is not transient, or
        ``retry_deadline`` passes (exponential backoff). A connection lost after ``once`` marked its
        phase unsure raises :class:`CommitUnknown`: running it again could apply it twice.
        ``held``: on the connection held for single statements when it is free (:meth:`_on_held`)."""
        pool = await self._ready()
        deadline = time.monotonic() + self.retry_deadline
        delays = Delays(0.002, 2.0, jitter=True)  # a lock conflict clears in milliseconds; a lost server: 2 s
        while True:
            phase = _Phase()
            done = False
            try:
                if held and not self._held_busy:
                    result = await self._on_held(pool, once, phase, max(0.05, deadline - time.monotonic()))
                    return result
                async with pool.connection(timeout=max(0.05, deadline - time.monotonic())) as conn:
                    result = await once(conn, phase)
                    done = True
                return result
            except Exception as exc:
                if done:  # applied; only handing the connection back failed
                    return result
                if phase.unsure and connection_lost(exc):
                    raise CommitUnknown(
                        f"the connection failed during {unsure_step} ({type(exc).__name__}: {exc}); "
                        "it may or may not have been applied"
                    ) from exc
                if connection_lost(exc):
                    self._check_pool(pool)
                if not is_transient(exc) or time.monotonic() + delays.current > deadline:
                    raise
                conflict = isinstance(exc, pg_errors.LockNotAvailable | pg_errors.SerializationFailure)
                log.log(logging.DEBUG if conflict else logging.WARNING,
                        "jobloom transaction retried after %s: %s", type(exc).__name__, exc)
                retried("postgresql", type(exc).__name__)
                await asyncio.sleep(delays.next())

    def _check_pool(self, pool: AsyncConnectionPool[AsyncConn]) -> None:
        """A connection was lost (the server restarted, or failed over): check the pool's idle connections
        at once, in the background, so the next transactions do not each meet a dead one."""
        if self._checking is None or self._checking.done():
            self._checking = asyncio.get_running_loop().create_task(self._check_idle(pool))

    async def _check_idle(self, pool: AsyncConnectionPool[AsyncConn]) -> None:
        try:
            await pool.check()
        except Exception as exc:  # the pool replaces what it can; the next failure asks again
            log.debug("checking the pool's connections failed (%s: %s)", type(exc).__name__, exc)

    async def _on_held(self, pool: AsyncConnectionPool[AsyncConn], once: Callable[[AsyncConn, _Phase], Awaitable[T]],
                       phase: _Phase, timeout: float) -> T:
        """Run ``once`` on the connection held for single statements (taken from the pool at first use,
        and again after :data:`HELD_LIFETIME`). A failure hands it back to the pool, which checks it
        and replaces a broken one; the next statement takes another."""
        conn, self._held, self._held_busy = self._held, None, True
        try:
            if conn is not None and (conn.closed or time.monotonic() > self._held_until):
                with contextlib.suppress(Exception):
                    await pool.putconn(conn)
                conn = None
            if conn is None:
                conn = await pool.getconn(timeout=timeout)
                self._held_until = time.monotonic() + HELD_LIFETIME
            try:
                result = await once(conn, phase)
            except BaseException:
                with contextlib.suppress(Exception):
                    await pool.putconn(conn)
                raise
            if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE and self._pool is pool:
                self._held = conn
            else:  # not idle (it should be), or the store closed meanwhile: the pool decides
                with contextlib.suppress(Exception):
                    await pool.putconn(conn)
            return result
        finally:
            self._held_busy = False

    async def transact_on(self, conn: Any, fn: Callable[[Tx], Awaitable[T]]) -> T:
        """Run ``fn`` inside the caller's open transaction on ``conn``; the caller commits (or not).

        Nothing jobloom writes is visible until that commit, and a rollback leaves no job. Workers
        are notified at commit (``NOTIFY`` is transactional). ``fn`` runs under a savepoint: if it
        fails, its writes are undone and the caller's transaction stays usable.
        """
        return await in_callers_transaction(conn, self.coded(fn), schema=self._callers_schema)

    def transact_on_sync(self, conn: Any, fn: Callable[[Tx], Coroutine[Any, Any, T]]) -> T:
        """:meth:`transact_on` for a synchronous ``psycopg.Connection``.

        ``fn`` is the same kind of coroutine function as for :meth:`transact`, but it must await only
        the Tx it is given: it runs to completion in the calling thread, without an event loop.
        """
        return in_callers_transaction_sync(conn, self.coded(fn), schema=self._callers_schema)

    # -- wake-ups -----------------------------------------------------------------------------------

    def is_transient(self, exc: BaseException) -> bool:
        """A conflict, a lost or refused connection, a pool that had no connection in time."""
        return isinstance(exc, StoreError | OSError) or is_transient(exc)

    async def notify(self) -> None:
        """``NOTIFY`` this schema's channel, in the background; never raises (a lost signal only delays
        a worker). Calls made while a NOTIFY is on its way are folded into one more, so a caller
        never waits for the round trip and a burst of commits sends two signals, not one per commit."""
        self._notify_wanted = True
        if self._notifier is None or self._notifier.done():
            self._notifier = asyncio.get_running_loop().create_task(self._send_notifications())

    async def _send_notifications(self) -> None:
        while self._notify_wanted:
            self._notify_wanted = False
            try:
                pool = await self._ready()
                async with pool.connection(timeout=5.0) as conn:
                    await conn.execute("SELECT pg_notify(%s, '')", [self.channel])
                self._notify_failing = False
            except Exception as exc:  # idle workers still wake at their next due moment
                level = logging.DEBUG if self._notify_failing else logging.WARNING
                self._notify_failing = True  # one warning per run of failures, not one per commit
                log.log(level, "jobloom NOTIFY failed (%s: %s); idle workers will notice the change at their "
                        "next due moment", type(exc).__name__, exc)

    async def wakeups(self) -> Wakeups:
        """Subscribe to this schema's channel (one ``LISTEN`` connection per store, shared)."""
        await self._ready()  # the channel is known once the store is open
        if self.listen_url is None and self.pooled:
            return PollingWakeups()
        if self._listening is None:
            self._listening = asyncio.Lock()
        async with self._listening:
            if self._listener is None:
                listener = (Listener(self.url, self.channel, self._conn_class) if self.listen_url is None
                            else Listener(self.listen_url, self.channel))
                await listener.start()
                self._listener = listener
        return self._listener.subscribe()

    # -- migrations ---------------------------------------------------------------------------------

    async def location(self) -> str:
        """``schema "name"``: the schema given, or the one the server's search path gives (``public``)."""
        if self.schema is not None:
            return f"schema {self.schema!r}"

        async def read(tx: Tx) -> str:
            cur = await (await _conn_of(tx)).execute("SELECT current_schema()")
            row = await cur.fetchone()
            return str(row[0]) if row and row[0] else "(none on the search path)"

        return f"schema {await self.transact(read, exclusive=False)!r}"

    async def applied_migrations(self) -> list[str]:
        """Migrations recorded in the schema (none if it or its table does not exist yet)."""

        async def read(tx: Tx) -> list[str]:
            conn = await _conn_of(tx)
            cur = await conn.execute("SELECT to_regclass('jobloom_migrations') IS NOT NULL")
            row = await cur.fetchone()
            if not row or not row[0]:
                return []
            cur = await conn.execute("SELECT name FROM jobloom_migrations ORDER BY version")
            return [r[0] for r in await cur.fetchall()]

        return await self.transact(read, exclusive=False)

    async def migrate(self) -> list[str]:
        """Apply missing migrations, each in its own transaction, under an advisory lock per schema.

        Two processes migrating at once apply each migration once: the second waits for the lock,
        then finds the migration recorded. A schema that jobloom 0.2 migrated part of the way gets none.
        """
        applied_now: list[str] = []
        every = load_migrations(self.dialect)
        for mig in every:

            async def apply(tx: Tx, mig: Any = mig) -> bool:
                conn = await _conn_of(tx)
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s), "
                    "hashtext(coalesce(%s::text, current_schema()::text, '')))",
                    [_MIGRATE_LOCK, self.schema],
                )
                if self.schema is not None:
                    await conn.execute(
                        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
                    )
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS jobloom_migrations (version integer PRIMARY KEY, "
                    "name text NOT NULL, applied_at double precision NOT NULL)"
                )
                cur = await conn.execute("SELECT name FROM jobloom_migrations")
                if mig not in pending(every, [r[0] for r in await cur.fetchall()]):  # refuses 0.2 part-way
                    return False
                await conn.execute(mig.sql)  # no parameters: one script, many statements
                await conn.execute(
                    "INSERT INTO jobloom_migrations (version, name, applied_at) VALUES (%s, %s, %s)",
                    [mig.version, mig.name, time.time()],
                )
                return True

            if await self.transact(apply):
                applied_now.append(mig.name)
        return applied_now


async def _conn_of(tx: Tx) -> AsyncConn:
    if not isinstance(tx, PostgresTx):
        raise StoreError("expected a PostgreSQL transaction")
    return await tx.connection()


class _Phase:
    """How far one attempt of a transaction got: ``unsure`` once a lost connection could hide that it
    was applied."""

    __slots__ = ("unsure",)

    def __init__(self) -> None:
        self.unsure = False


__all__ = ["PostgresStore", "PostgresTx", "SyncPostgresTx", "is_transient", "to_psycopg"]
