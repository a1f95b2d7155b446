"""Driver-level tests of the SQLite store: named parameters bound by position, and list values."""

from __future__ import annotations

import math
import sqlite3
from typing import Any

import pytest

from jobloom.engine.jobs import event
from jobloom.store.base import Tx
from jobloom.store.sqlite.store import (
    _POSITIONAL,
    _QUERIES,
    SQLiteStore,
    add_math_functions,
    ensure_math_functions,
    positional,
)


def test_named_parameters_are_numbered_outside_strings_and_comments() -> None:
    sql, names = positional("SELECT :a, ':b', \"c:d\" -- it's :e\n/* :f */, :a, x = :g")
    assert sql == "SELECT ?1, ':b', \"c:d\" -- it's :e\n/* :f */, ?1, x = ?2"
    assert names == ("a", "g")
    assert positional("SELECT 1") == ("SELECT 1", ())


async def test_every_named_query_prepares_with_its_parameters_by_position(sqlite_url: str) -> None:
    store = SQLiteStore(sqlite_url)
    try:
        await store.migrate()
        for name, (sql, get) in _POSITIONAL.items():
            names = positional(_QUERIES[name])[1]
            values = get(dict.fromkeys(names))
            assert len(values) == len(names), name
            store.conn.execute("EXPLAIN " + sql, values)  # the count matches: no name left unnumbered
    finally:
        await store.close()


async def test_list_values_become_json_arrays_and_a_missing_parameter_is_named(sqlite_url: str) -> None:
    store = SQLiteStore(sqlite_url)
    try:
        await store.migrate()

        async def work(tx: Tx) -> list[Any]:
            await tx.executemany("insert_event", [event(1.0, i, "A", "enqueued") for i in range(1, 6)])
            seqs = [r[0] for r in await tx.fetch("project_events", {"limit": 10})]
            await tx.executemany("prune_projected_events", [{"seqs": seqs[:2]}, {"seqs": (seqs[2],)}])
            assert await tx.execute("prune_projected_events", {"seqs": {seqs[3]}}) == 1
            with pytest.raises(sqlite3.ProgrammingError, match="seqs"):
                await tx.execute("prune_projected_events", {})
            return await tx.fetch("project_events", {"limit": 10})

        left = await store.transact(work)
        assert [r[0] for r in left] == [5]
    finally:
        await store.close()


def test_math_functions_stand_in_where_the_library_lacks_them() -> None:
    """The projector's SQL uses ln, floor and ceil; a SQLite built without them gets Python's."""
    conn = sqlite3.connect(":memory:")
    try:
        add_math_functions(conn)  # replaces the library's own, where it has them
        row = conn.execute("SELECT ln(2.0), floor(-1.5), ceil(1.2), ln(NULL), CAST(floor(7.9) AS INTEGER)").fetchone()
        assert row == (math.log(2.0), -2, 2, None, 7)
        ensure_math_functions(conn)
        assert conn.execute("SELECT ceil(ln(100.0))").fetchone() == (5,)
    finally:
        conn.close()


async def test_a_transaction_waits_for_a_write_lock_another_connection_holds(sqlite_url: str) -> None:
    """``BEGIN IMMEDIATE`` finding the lock taken waits and tries again (each wait told to the retry
    observers), and runs once the other connection commits."""
    import asyncio

    from jobloom.store import base

    store = SQLiteStore(sqlite_url)
    waits: list[str] = []
    seen = asyncio.Event()

    def observer(dialect: str, reason: str) -> None:
        waits.append(f"{dialect}:{reason}")
        seen.set()

    base._retry_observers.append(observer)
    other = None
    try:
        await store.migrate()
        other = sqlite3.connect(store.path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        ran: list[int] = []

        async def work(tx: Tx) -> int:
            ran.append(1)
            return await tx.execute("init_projector", {"name": "lock-test", "now": 0.0})

        task = asyncio.create_task(store.transact(work))
        await asyncio.wait_for(seen.wait(), 10)
        assert not ran and not task.done()  # it waited for the lock rather than running or failing
        other.execute("COMMIT")
        assert await asyncio.wait_for(task, 10) == 1
        assert ran == [1] and set(waits) == {"sqlite:busy"}
    finally:
        base._retry_observers.remove(observer)
        if other is not None:
            other.close()
        await store.close()
