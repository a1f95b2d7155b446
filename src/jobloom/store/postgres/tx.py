"""PostgreSQL transactions: named SQL in psycopg's style, and the Tx classes that run it.

Round trips are what a PostgreSQL transaction costs, so :class:`PostgresTx` takes as few as it can
(``BEGIN`` with the first statement, unread writes with the next one or with ``COMMIT``). The store
(:mod:`jobloom.store.postgres`) opens, commits and retries them.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import orjson
import psycopg
from psycopg.rows import TupleRow

from jobloom.core.errors import StoreError
from jobloom.core.rows import ClaimRow
from jobloom.store.base import Later, Params, Tx
from jobloom.store.sql import load_queries

AsyncConn = psycopg.AsyncConnection[TupleRow]
SyncConn = psycopg.Connection[TupleRow]

_TOKEN = re.compile(r"--[^\n]*|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|::|:(\w+)|%")


def to_psycopg(query: str) -> str:
    """A query written with ``:name`` parameters, in psycopg's ``%(name)s`` style.

    Comments are dropped, string literals, quoted names and ``::casts`` kept, ``%`` escaped.
    """

    def replace(m: re.Match[str]) -> str:
        text = m.group(0)
        if m.group(1) is not None:
            return f"%({m.group(1)})s"
        if text == "%":
            return "%%"
        if text.startswith("--"):
            return ""
        return text

    return _TOKEN.sub(replace, query).strip()


_QUERIES = {name: to_psycopg(text) for name, text in load_queries("postgres").items()}


def _query(name: str) -> str:
    try:
        return _QUERIES[name]
    except KeyError:
        raise StoreError(f"the PostgreSQL store has no query named {name!r}") from None


def _nowait(query: str) -> str:
    changed, n = re.subn(r"\bFOR UPDATE\b", "FOR UPDATE NOWAIT", query)
    if n != 1:
        raise StoreError("lock_binding must take exactly one FOR UPDATE lock")
    return changed


_LOCK_BINDING_NOWAIT = _nowait(_query("lock_binding"))


class _BindingLocks:
    """Deadlock avoidance for the binding locks of one transaction.

    A worker's cycle dispatches several bindings in one transaction, in an order that rotates for
    fairness, so two workers can each hold the lock the other waits for. Here a lock is waited for
    only when it comes after (by name) every binding lock the transaction holds; one taken out of
    that order is tried without waiting (``NOWAIT``), and if it is busy the transaction fails with a
    transient error, is rolled back and runs again at once. A wait cycle needs an out-of-order wait,
    so there are none, and no transaction sits out PostgreSQL's deadlock check (1 s). (A brief wait
    instead of NOWAIT measured worse: under contention most out-of-order conflicts are real cycles.)
    Creating a missing binding row waits whatever the order; workers create theirs at start.
    """

    def __init__(self) -> None:
        self.highest: str | None = None

    def query(self, name: str, params: Params | None) -> str:
        """The SQL to run for ``name``: the NOWAIT variant for an out-of-order binding lock."""
        if name != "lock_binding" or params is None:
            return _query(name)
        binding = str(params["binding"])
        if self.highest is None or binding >= self.highest:
            self.highest = binding
            return _query(name)
        return _LOCK_BINDING_NOWAIT


class PostgresTx(Tx):
    """One transaction on one connection; each named query is one statement.

    Round trips are what a PostgreSQL transaction costs, so this one takes as few as it can:
    ``BEGIN`` goes out with the first statement, writes whose results nobody reads
    (:meth:`executemany`) wait to go out with the next statement or with ``COMMIT``, each group in
    one pipeline. A deferred write that fails fails that later statement (or the commit), and the
    whole transaction is rolled back as before.
    """

    def __init__(
        self, conn: AsyncConn, *, begun: bool = True, channel: str | None = None, statements: int | None = None,
        search_path: str | None = None, asynchronous_claims: bool = False,
    ) -> None:
        self.conn = conn
        self._direct_claim = "claim_direct__asynchronous" if asynchronous_claims else "claim_direct__with_events"
        self._search_path = search_path  # set for the transaction with BEGIN (behind a pooler)
        self._locks = _BindingLocks()
        self._begun = begun
        # deferred statements: (query, params, how): "many" runs once per parameter set, "one" once, and
        # a Later once, keeping its rows for the Later when the round trip that carried it is over
        self._pending: list[tuple[str, Params | Sequence[Params], str | Later[Any]]] = []
        self._channel = channel
        self._left = statements  # None: any number

    async def insert_jobs(self, rows: Sequence[Params], at: float) -> list[int]:
        """Insert new jobs and their events in one statement, which also wakes the workers at commit."""
        ids = await _new_ids(await self._send(_query("insert_job__with_events"), self._jobs_params(rows, at)),
                             len(rows))
        if self._channel is not None:
            self.notified = True
        return ids

    async def insert_jobs_streamed(self, chunks: Iterable[Sequence[Params]], at: float) -> list[int]:
        """Send each chunk's insert without waiting for its answer, so that the next chunk is built
        while the server inserts the last one; read every chunk's ids at the end (one pipeline)."""
        if self._left is not None:
            return await super().insert_jobs_streamed(chunks, at)
        query = _query("insert_job__with_events")
        sent = []
        async with self._pipeline():
            for rows in chunks:
                sent.append((await self.conn.execute(query, self._jobs_params(rows, at)), len(rows)))
        ids: list[int] = []
        for cur, count in sent:
            ids += await _new_ids(cur, count)
        if self._channel is not None:
            self.notified = True
        return ids

    def _jobs_params(self, rows: Sequence[Params], at: float) -> Params:
        numbered = [{**row, "i": i} for i, row in enumerate(rows)]
        return {"rows": _json_rows(numbered), "at": at, "channel": self._channel}

    @contextlib.asynccontextmanager
    async def _pipeline(self) -> AsyncIterator[None]:
        """A pipeline (one round trip) that first sends ``BEGIN`` if not sent and the deferred
        statements; once it is over, each deferred statement's Later gets its rows."""
        async with self.conn.pipeline():
            later = await self._send_pending()
            yield
        for handle, cur in later:
            handle.answer(await cur.fetchall())

    async def _send_pending(self) -> list[tuple[Later[Any], psycopg.AsyncCursor[TupleRow]]]:
        """Send ``BEGIN`` if not sent, and the deferred statements (inside a pipeline); the Laters to
        answer once the pipeline is over, with the cursors of their statements."""
        if not self._begun:
            self._begun = True
            await self.conn.execute("BEGIN")
            if self._search_path is not None:
                await self.conn.execute("SELECT set_config('search_path', %s, true)", [self._search_path])
        pending, self._pending = self._pending, []
        later: list[tuple[Later[Any], psycopg.AsyncCursor[TupleRow]]] = []
        for query, params, how in pending:
            if how == "many":
                assert isinstance(params, Sequence)
                async with self.conn.cursor() as cur:
                    await cur.executemany(query, params)
            else:
                assert not isinstance(params, Sequence)
                cur = await self.conn.execute(query, params)
                if isinstance(how, Later):
                    later.append((how, cur))
        return later

    async def _run(self, name: str, params: Params | None) -> psycopg.AsyncCursor[TupleRow]:
        return await self._send(self._locks.query(name, params), params)

    async def _send(self, query: str, params: Params | None) -> psycopg.AsyncCursor[TupleRow]:
        if self._left is not None:
            if self._left <= 0 or self._pending:
                raise StoreError("a single-statement transaction ran a second statement")
            self._left -= 1
        if self._begun and not self._pending:
            return await self.conn.execute(query, params or {})
        async with self._pipeline():
            cur = await self.conn.execute(query, params or {})
        return cur

    async def fetch_rows_batch(self, queries: Sequence[tuple[str, Params | None]]) -> list[list[tuple[Any, ...]]]:
        """Run independent named queries in one pipeline: one round trip for all of them."""
        if self._left is not None:
            return await super().fetch_rows_batch(queries)
        async with self._pipeline():
            cursors = [await self.conn.execute(self._locks.query(name, params), params or {})
                       for name, params in queries]
        return [await cur.fetchall() if cur.description is not None else [] for cur in cursors]

    def has_pending(self) -> bool:
        """Whether writes are waiting to go out with the next statement or the commit."""
        return bool(self._pending)

    async def flush(self) -> None:
        """Send the deferred statements now (with ``BEGIN`` if not sent): one round trip."""
        await self.connection()

    async def connection(self) -> AsyncConn:
        """The connection, inside the transaction, with every deferred write sent."""
        if not self._begun or self._pending:
            async with self._pipeline():
                pass
        return self.conn

    async def commit(self) -> None:
        """Send the deferred writes and ``COMMIT`` in one round trip (nothing if nothing ran)."""
        if not self._begun and not self._pending:
            return
        async with self._pipeline():
            await self.conn.execute("COMMIT")

    async def rollback(self) -> None:
        """Drop the deferred writes and roll back what was sent."""
        self._pending.clear()
        if self._begun:
            await self.conn.execute("ROLLBACK")

    async def fetch_rows(self, name: str, params: Params | None = None) -> list[tuple[Any, ...]]:
        """Run a named query and return all rows."""
        cur = await self._run(name, params)
        return await cur.fetchall() if cur.description is not None else []

    async def execute(self, name: str, params: Params | None = None) -> int:
        """Run a named statement; return the number of rows it changed."""
        return (await self._run(name, params)).rowcount

    async def executemany(self, name: str, rows: Sequence[Params]) -> None:
        """Run a named statement once per parameter set, deferred to the next round trip: as one
        set-based statement when the query has a ``__bulk`` twin, else pipelined."""
        if not rows:
            return
        bulk = _QUERIES.get(name + "__bulk")
        if bulk is not None:
            self._pending.append((bulk, {"rows": _json_rows(rows)}, "one"))
        else:
            self._pending.append((_query(name), rows, "many"))

    async def claim(self, params: Params) -> Later[ClaimRow]:
        """Claim jobs and record their ``started`` events in one statement, sent with the transaction's
        next round trip (a worker's cycle: with its ``COMMIT``)."""
        if self._left is not None:
            return await super().claim(params)
        later: Later[ClaimRow] = Later(ClaimRow._make)
        self._pending.append((_query("claim__with_events"), params, later))
        return later

    async def claim_direct(self, params: Params) -> Later[ClaimRow]:
        """Claim the job a wake-up named, with its ``started`` event, in one statement sent with the
        transaction's next round trip (with ``hold_dispatch`` before it and ``COMMIT`` after it)."""
        if self._left is not None:
            return await super().claim_direct(params)
        later: Later[ClaimRow] = Later(ClaimRow._make)
        # hold_dispatch first, as a statement of its own: the claim's snapshot then sees any pause committed
        self._pending.append((_query("hold_dispatch"), {"bindings": [params["binding"]]}, "one"))
        self._pending.append((_query(self._direct_claim), params, later))
        return later


def _json_rows(rows: Sequence[Params]) -> str:
    """A batch of rows as the JSON array that a ``__bulk`` statement reads with ``json_to_recordset``
    (orjson: a tenth of the standard library's time per row, on the worker's and enqueuer's hot path)."""
    return orjson.dumps(rows).decode()


async def _new_ids(cur: psycopg.AsyncCursor[TupleRow], count: int) -> list[int]:
    """The ids ``insert_job__with_events`` returned, checked against the number of rows sent."""
    ids = [r[0] for r in await cur.fetchall()]
    if len(ids) != count:
        raise StoreError(f"insert_job__with_events returned {len(ids)} ids for {count} rows")
    return ids


class SyncPostgresTx(Tx):
    """A :class:`Tx` over a caller's synchronous connection: its methods never suspend.

    Coroutines that await only this Tx run to completion without an event loop
    (:func:`run_without_loop`), which is how a synchronous caller enqueues in its own transaction.
    """

    def __init__(self, conn: SyncConn) -> None:
        self.conn = conn
        self._locks = _BindingLocks()

    def _run(self, name: str, params: Params | None) -> psycopg.Cursor[TupleRow]:
        return self.conn.execute(self._locks.query(name, params), params or {})

    async def fetch_rows(self, name: str, params: Params | None = None) -> list[tuple[Any, ...]]:
        """Run a named query and return all rows."""
        cur = self._run(name, params)
        return cur.fetchall() if cur.description is not None else []

    async def execute(self, name: str, params: Params | None = None) -> int:
        """Run a named statement; return the number of rows it changed."""
        return self._run(name, params).rowcount

    async def executemany(self, name: str, rows: Sequence[Params]) -> None:
        """Run a named statement once per parameter set."""
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(_query(name), rows)

    async def fetch_rows_batch(self, queries: Sequence[tuple[str, Params | None]]) -> list[list[tuple[Any, ...]]]:
        """Run independent named queries in one pipeline: one round trip for all of them."""
        with self.conn.pipeline():
            cursors = [self._run(name, params) for name, params in queries]
        return [cur.fetchall() if cur.description is not None else [] for cur in cursors]


__all__ = ["AsyncConn", "PostgresTx", "SyncConn", "SyncPostgresTx", "to_psycopg"]
