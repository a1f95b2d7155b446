"""The store seam's records: each named query's result columns are its record's fields, in order.

Code outside the store reads rows by column name (``jobloom.core.rows``); this checks, on each
store, that the SQL of every query with a handle in ``queries.Q`` returns exactly those columns, so a
column added, removed or reordered in one dialect's SQL fails here rather than being read under
another column's name.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import pytest

from jobloom import App
from jobloom.core.queries import QUERIES, Q
from jobloom.core.rows import JobRow
from jobloom.store.sql import load_queries
from jobloom.store.sqlite.store import positional

from ..conftest import INSTALL_POSTGRES, require_module
from .performers import Echo


def _sqlite_columns(path: str) -> dict[str, list[str]]:
    """Each query's result columns, from running it on an empty database (rolled back)."""
    conn = sqlite3.connect(path, isolation_level=None)
    out: dict[str, list[str]] = {}
    try:
        for name, sql in load_queries("sqlite").items():
            text, names = positional(sql)
            for value in (None, 0):  # NULL first; 0 where a NULL is not accepted (LIMIT)
                conn.execute("BEGIN")
                try:
                    cur = conn.execute(text, tuple(value for _ in names))
                    out[name] = [d[0] for d in cur.description or ()]
                    break
                except sqlite3.Error:
                    continue
                finally:
                    conn.execute("ROLLBACK")
    finally:
        conn.close()
    return out


def _numbered(sql: str) -> str:
    """psycopg's ``%(name)s`` parameters as the server's ``$n``."""
    numbers: dict[str, int] = {}
    text = re.sub(r"%\((\w+)\)s", lambda m: f"${numbers.setdefault(m.group(1), len(numbers) + 1)}", sql)
    return text.replace("%%", "%")


def _postgres_columns(url: str) -> dict[str, list[str]]:
    """Each query's result columns, as the server describes the prepared statement (nothing runs)."""
    psycopg = require_module("psycopg", INSTALL_POSTGRES)
    from jobloom.store.postgres.tx import to_psycopg

    out: dict[str, list[str]] = {}
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
        pg = conn.pgconn
        for name, sql in load_queries("postgres").items():
            text = _numbered(to_psycopg(sql))
            prepared = pg.prepare(b"jl_describe", text.encode())
            assert not prepared.error_message, (name, prepared.error_message)
            described = pg.describe_prepared(b"jl_describe")
            out[name] = [described.fname(i).decode() for i in range(described.nfields)]
            pg.exec_(b"DEALLOCATE jl_describe")
    return out


async def test_every_query_returns_the_columns_of_its_record(store_url: str) -> None:
    app = App(store_url, auto_migrate=True)
    try:
        store = await app.store()
        dialect = store.dialect
    finally:
        await app.close()
    if dialect == "sqlite":
        columns = _sqlite_columns(store_url.removeprefix("sqlite:///"))
    else:
        columns = _postgres_columns(store_url)
    wrong: dict[str, Any] = {}
    for name, query in QUERIES.items():
        if name not in columns:
            wrong[name] = "no such query, or it did not run"
        elif tuple(columns[name]) != query.row._fields:
            wrong[name] = (columns[name], query.row.__name__, query.row._fields)
    assert not wrong, wrong


async def test_fetch_returns_records_and_fetch_rows_plain_tuples(store_url: str) -> None:
    app = App(store_url, performers=[Echo], auto_migrate=True)
    try:
        job = await app.enqueue(Echo, {"n": 1})
        store = await app.store()

        async def read(tx: Any) -> tuple[Any, Any, Any]:
            return (await tx.fetchone(Q.get_job, {"id": job.id}), await tx.fetchone("get_job", {"id": job.id}),
                    (await tx.fetch_rows("get_job", {"id": job.id}))[0])

        by_handle, by_name, plain = await store.transact(read, exclusive=False)
        assert type(by_handle) is JobRow and type(by_name) is JobRow and type(plain) is tuple
        assert by_handle.id == job.id and by_handle.binding == "Echo" and by_handle.state == "queued"
        assert by_handle == by_name == plain
    finally:
        await app.close()


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_handle_names_a_query_of_both_dialects(name: str) -> None:
    assert name in load_queries("sqlite") and name in load_queries("postgres")
    assert getattr(Q, name) is QUERIES[name]
