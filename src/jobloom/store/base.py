"""The store seam: a driver gives transactions that run named SQL, wake-ups, and migrations.

The coordinator's logic is written once against :class:`Tx`; each driver supplies its dialect's
SQL (``sql/<dialect>/*.sql``) and its way to serialize, notify and retry transient conflicts.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar, overload

from jobloom.core.codecs import IDENTITY, Codec
from jobloom.core.errors import StoreError
from jobloom.core.outbox import count_enqueues, count_starts
from jobloom.core.queries import QUERIES, Q, Query, R
from jobloom.core.rows import ClaimRow

T = TypeVar("T")

RetryObserver = Callable[[str, str], None]
"""Told of each transaction a store runs again (or waits to begin): (dialect, reason)."""
_retry_observers: list[RetryObserver] = []


def observe_retries(observer: RetryObserver) -> None:
    """Tell ``observer`` of every retry of every store in this process (once per observer)."""
    if observer not in _retry_observers:
        _retry_observers.append(observer)


def retried(dialect: str, reason: str) -> None:
    """A store runs a transaction again, or waits to begin it (a busy lock): tell the observers."""
    for observer in _retry_observers:
        observer(dialect, reason)
Params = Mapping[str, Any]


class Later(Generic[R]):
    """The rows of a statement a transaction sends with a later round trip (at the latest, with its
    ``COMMIT``): read :meth:`rows` once that round trip is over."""

    __slots__ = ("_make", "_rows")

    def __init__(self, make: Callable[[tuple[Any, ...]], R], rows: list[R] | None = None) -> None:
        self._make = make
        self._rows = rows

    def answer(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Set the rows the database returned (as the driver reads them)."""
        self._rows = list(map(self._make, rows))

    def rows(self) -> list[R]:
        """The statement's rows, as records."""
        if self._rows is None:
            raise StoreError("a deferred statement's rows were read before the statement was sent")
        return self._rows


class Tx(abc.ABC):
    """One open transaction. Query names refer to the dialect's named SQL."""

    codec: Codec = IDENTITY
    """How a job's content is stored (its store's :attr:`Store.codec`): encode what is written, decode what is read."""

    notified = False
    """Whether this transaction wakes idle workers itself when it commits (so no :meth:`Store.notify`)."""

    hint: str | None = None
    """What this transaction's wake-up says of the job it enqueued, if it wakes the workers itself
    (:func:`job_hint`)."""

    one_snapshot = False
    """Whether every statement of this transaction sees the same snapshot of the store (SQLite's
    transactions do; under PostgreSQL's read committed each statement sees what was committed when it
    began). A value read earlier in such a transaction need not be read again to be current."""

    @abc.abstractmethod
    async def fetch_rows(self, name: str, params: Params | None = None) -> list[tuple[Any, ...]]:
        """Run a named query and return all its rows as the driver reads them (plain tuples).
        Code outside the store calls :meth:`fetch`, which names the columns."""

    async def fetch_rows_batch(self, queries: Sequence[tuple[str, Params | None]]) -> list[list[tuple[Any, ...]]]:
        """:meth:`fetch_rows` of queries that do not depend on each other, in order. A driver may send
        them together (one round trip)."""
        return [await self.fetch_rows(name, params) for name, params in queries]

    @overload
    async def fetch(self, query: Query[R], params: Params | None = None) -> list[R]: ...
    @overload
    async def fetch(self, query: str, params: Params | None = None) -> list[Any]: ...

    async def fetch(self, query: Query[Any] | str, params: Params | None = None) -> list[Any]:
        """Run a named query and return all its rows as records (:mod:`jobloom.core.rows`).

        Given a bare name, its rows are records if the name has a handle in ``queries.Q``, else tuples."""
        q = _handle(query)
        if q is None:
            return await self.fetch_rows(query, params)  # type: ignore[arg-type]
        return list(map(q.make, await self.fetch_rows(q.name, params)))

    async def fetch_batch(self, queries: Sequence[tuple[Query[Any] | str, Params | None]]) -> list[list[Any]]:
        """Run named queries that do not depend on each other, in order; all their rows, per query, as
        records (see :meth:`fetch`). A driver may send them together (one round trip)."""
        handles = [_handle(query) for query, _ in queries]
        answers = await self.fetch_rows_batch([(q.name if q else query, params)  # type: ignore[misc]
                                               for (query, params), q in zip(queries, handles, strict=True)])
        return [list(map(q.make, rows)) if q else rows for q, rows in zip(handles, answers, strict=True)]

    @overload
    async def fetchone(self, query: Query[R], params: Params | None = None) -> R | None: ...
    @overload
    async def fetchone(self, query: str, params: Params | None = None) -> Any: ...

    async def fetchone(self, query: Query[Any] | str, params: Params | None = None) -> Any:
        """Run a named query and return its first row as a record (see :meth:`fetch`), if any."""
        rows = await self.fetch(query, params)
        return rows[0] if rows else None

    @abc.abstractmethod
    async def execute(self, name: str, params: Params | None = None) -> int:
        """Run a named statement; return the number of rows it changed."""

    @abc.abstractmethod
    async def executemany(self, name: str, rows: Sequence[Params]) -> None:
        """Run a named statement once per parameter set."""

    async def insert_many(self, name: str, rows: Sequence[Params]) -> list[int]:
        """Run a named ``INSERT ... RETURNING id`` once per row (in one batch: :meth:`fetch_rows_batch`);
        return the new ids in row order. A driver whose INSERT returns no row gives its own."""
        ids: list[int] = []
        for answer in await self.fetch_rows_batch([(name, row) for row in rows]):
            if not answer:
                raise StoreError(f"query {name!r} returned no id")
            ids.append(answer[0][0])
        return ids

    async def insert_jobs(self, rows: Sequence[Params], at: float) -> list[int]:
        """Insert new jobs (``insert_job`` rows, each with the ``event`` kind to record at ``at``) and
        their events (counted per binding and kind: :func:`~jobloom.core.outbox.count_enqueues`); return
        the new ids in row order. A driver may do it all in one statement."""
        ids = await self.insert_many(Q.insert_job, rows)  # the statement ignores the "event" key
        single, counted = count_enqueues(at, ids, rows)
        await self.executemany(Q.insert_event, single)
        await self.executemany(Q.insert_counted_event, counted)
        return ids

    async def claim(self, params: Params) -> Later[ClaimRow]:
        """Claim queued jobs (the ``claim`` statement's ``params``: ``ids``, ``worker``, ``lease_expires``,
        ``now``) and record their ``started`` events at ``now`` (counted:
        :func:`~jobloom.core.outbox.count_starts`). A driver may send it all as one statement with the
        transaction's next round trip: read the rows once it is over (after the commit)."""
        rows = await self.fetch(Q.claim, params)
        single, counted = count_starts(params["now"], rows)
        if single:
            await self.executemany(Q.insert_event, single)
        if counted:
            await self.executemany(Q.insert_counted_event, counted)
        return Later(ClaimRow._make, rows)

    async def claim_direct(self, params: Params) -> Later[ClaimRow]:
        """Claim the one job a wake-up named, where dispatch would claim it first (the ``claim_direct``
        statement's ``params``: ``id``, ``binding``, ``worker``, ``lease_expires``, ``now``), with its
        ``started`` event, after ``hold_dispatch`` of its binding (as a cycle holds it before it reads a
        policy: a pause then waits for it). A driver may send both with the transaction's next round trip."""
        await self.fetch(Q.hold_dispatch, {"bindings": [params["binding"]]})  # as a cycle, before the binding is read
        rows = await self.fetch(Q.claim_direct, params)
        single, _ = count_starts(params["now"], rows)
        if single:
            await self.executemany(Q.insert_event, single)
        return Later(ClaimRow._make, rows)

    async def flush(self) -> None:
        """Send the statements a driver holds back for its next round trip now (their :class:`Later`
        rows are then ready). A driver that holds none back has nothing to do."""
        return None

    async def insert_jobs_streamed(self, chunks: Iterable[Sequence[Params]], at: float) -> list[int]:
        """:meth:`insert_jobs` for each chunk of rows, in order; return all the ids in row order.

        ``chunks`` may build each chunk when asked for it: a driver that can send a statement without
        waiting for its answer builds the next chunk while the server inserts the last one."""
        ids: list[int] = []
        for rows in chunks:
            ids += await self.insert_jobs(rows, at)
        return ids


def _handle(query: Query[Any] | str) -> Query[Any] | None:
    return QUERIES.get(query) if isinstance(query, str) else query


class Wakeups(abc.ABC):
    """A subscription to wake-up signals from other processes."""

    @abc.abstractmethod
    async def wait(self, timeout: float | None) -> bool:
        """Wait for a signal (True) or the timeout (False); signals received meanwhile are merged."""

    def on_signal(self, callback: Callable[[], None]) -> bool:
        """Call ``callback()`` on the event loop the moment a signal arrives, besides waking :meth:`wait`
        (a worker's loop is then woken without a task in between). False: not supported, use :meth:`wait`."""
        return False

    def on_job(self, callback: Callable[[int, str], None]) -> bool:
        """Call ``callback(job_id, binding)`` when a signal names the one job that its commit enqueued
        (queued now, without a concurrency key), before the :meth:`on_signal` callbacks of that signal.
        False: not supported (every signal then only wakes)."""
        return False

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop listening."""


def job_hint(ids: Sequence[int], rows: Sequence[Params]) -> str | None:
    """What a wake-up says of the jobs one commit inserted (``rows``, as :meth:`Tx.insert_jobs` took
    them): ``"ID:BINDING"`` for one job queued now without a concurrency key (an idle worker may claim
    it directly: :meth:`Wakeups.on_job`), else None (the wake-up only wakes)."""
    if len(ids) != 1 or len(rows) != 1:
        return None
    row = rows[0]
    if row.get("state") != "queued" or row.get("concurrency_key") is not None:
        return None
    return f"{ids[0]}:{row['binding']}"


def read_hint(text: str) -> tuple[int, str] | None:
    """(job id, binding) from a wake-up's ``"ID:BINDING"`` (:func:`job_hint`), or None."""
    number, _, binding = text.partition(":")
    if not binding or not number.isdigit():
        return None
    return int(number), binding


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait for ``event`` (True, and clear it: signals meanwhile are merged) or the timeout (False)."""
    if not event.is_set():
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            return False
    event.clear()
    return True


class Store(abc.ABC):
    """A driver for one database. Every decision runs inside :meth:`transact`."""

    dialect: str
    url: str
    streams_inserts = False
    """Whether :meth:`Tx.insert_jobs_streamed` builds the next chunk while the database writes the last
    one. Otherwise a large batch is better built whole before its transaction starts (a lock held
    while payloads are validated is a lock every worker waits for)."""
    pipelines = False
    """Whether :meth:`Tx.fetch_rows_batch` sends its statements in one round trip. A worker's cycle then
    reads the candidates of the bindings it expects to dispatch with its first reads, instead of in a
    round trip of their own (:func:`~jobloom.engine.coordinator.read_cycle`)."""

    @abc.abstractmethod
    async def open(self) -> None:
        """Connect (idempotent)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections."""

    @abc.abstractmethod
    async def transact(self, fn: Callable[[Tx], Awaitable[T]], *, exclusive: bool = True) -> T:
        """Run ``fn`` in one transaction, committing on return.

        A transient conflict (a busy SQLite lock, a PostgreSQL serialization failure or lost
        connection) rolls back and runs ``fn`` again, so ``fn`` must have no effects outside ``tx``.
        ``exclusive=False`` marks a read-only transaction.
        """

    @abc.abstractmethod
    async def transact_on(self, conn: Any, fn: Callable[[Tx], Awaitable[T]]) -> T:
        """Run ``fn`` inside the caller's own open transaction on ``conn`` (a connection of this store's
        driver: an async or sync psycopg connection, or a ``sqlite3.Connection``), without committing:
        what ``fn`` writes exists if and only if the caller commits. Wrong connections raise ``StoreError``."""

    @abc.abstractmethod
    def transact_on_sync(self, conn: Any, fn: Callable[[Tx], Coroutine[Any, Any, T]]) -> T:
        """:meth:`transact_on` for synchronous callers, on a synchronous connection of the driver."""

    async def autocommit(self, fn: Callable[[Tx], Awaitable[T]]) -> T:
        """Run ``fn``, which runs exactly one statement, as cheaply as the database allows while keeping
        it atomic: a single statement needs no ``BEGIN``/``COMMIT`` round trips on a server. By default
        it is :meth:`transact`."""
        return await self.transact(fn)

    clock_offset = 0.0
    """Seconds to add to this host's clock to read the store's (0 for a store without a server)."""

    codec: Codec = IDENTITY
    """How a job's content (payloads, results, steps, event data) is stored: an ``App`` built with
    ``codec=`` sets it, and every transaction of this store carries it as :attr:`Tx.codec`."""

    def coded(self, fn: Callable[[Tx], T]) -> Callable[[Tx], T]:
        """``fn`` run with :attr:`Tx.codec` set to this store's codec (``fn`` itself for the identity)."""
        codec = self.codec
        if codec is IDENTITY:
            return fn

        def run(tx: Tx) -> T:
            tx.codec = codec
            return fn(tx)
        return run

    clock: Callable[[], float] | None = None
    """A clock that replaces the store's own (epoch seconds): an ``App`` built with ``clock=`` (such as
    ``jobloom.testing.TestClock``) sets it, so that a test decides the time of every decision."""

    def now(self) -> float:
        """The store's clock in epoch seconds: the time every decision on this store compares with.

        A store on one machine (SQLite) uses that machine's clock; a server's store estimates the
        server's clock, so that hosts whose clocks disagree still agree on leases and delays."""
        if self.clock is not None:
            return self.clock()
        return time.time() + self.clock_offset

    def is_transient(self, exc: BaseException) -> bool:
        """Whether ``exc`` (raised by :meth:`transact` after its own retries) says the store is unreachable
        or busy for now, rather than that the work itself cannot be done: the caller may try again later."""
        return isinstance(exc, StoreError)

    def idle(self) -> None:
        """A worker of this store has nothing to do for now: a moment for upkeep that must not run in
        the commits on a waiting job's way (SQLite: the write-ahead log's checkpoint). Never blocks;
        nothing by default."""
        return None

    @abc.abstractmethod
    async def notify(self) -> None:
        """Wake idle workers in other processes (after a commit that made work runnable)."""

    @abc.abstractmethod
    async def wakeups(self) -> Wakeups:
        """Subscribe to wake-up signals."""

    @abc.abstractmethod
    async def applied_migrations(self) -> list[str]:
        """Names of the migrations applied to this store."""

    async def location(self) -> str:
        """Where in its database this store keeps its tables, for messages (a SQLite file's path, a
        PostgreSQL schema's name); empty when there is nothing to add to the URL."""
        return ""

    @abc.abstractmethod
    async def migrate(self) -> list[str]:
        """Apply missing migrations; return the names applied now."""


def run_without_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Drive a coroutine that never suspends (it awaits only a synchronous Tx) to its result."""
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coro.close()
    raise StoreError("a synchronous transaction awaited something other than its Tx")
