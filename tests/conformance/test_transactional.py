"""Enqueue in the caller's own transaction, on every store: the job exists if and only if it commits."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

import jobloom
from jobloom.store.sqlite.store import sqlite_path

from .performers import Echo


@pytest.fixture
async def app(store_url: str):
    app = jobloom.App(store_url, performers=[Echo], auto_migrate=True)
    await app.store()
    yield app
    await app.close()


def sync_connection(url: str) -> Any:
    if url.startswith("sqlite:"):
        return sqlite3.connect(sqlite_path(url))
    import psycopg

    return psycopg.connect(url)


async def async_connection(url: str) -> Any:
    if url.startswith("sqlite:"):
        return sqlite3.connect(sqlite_path(url))
    import psycopg

    return await psycopg.AsyncConnection.connect(url)


async def test_sync_enqueue_rolled_back_leaves_no_job(app: jobloom.App) -> None:
    conn = sync_connection(app.url)
    try:
        job = app.enqueue_sync(Echo, {"n": 1}, connection=conn, priority=3)
        assert job.state == "queued" and job.priority == 3
        conn.rollback()
        assert await app.list_jobs() == []
        kept = app.enqueue_sync(Echo, {"n": 2}, connection=conn)
        conn.commit()
        [stored] = await app.list_jobs()
        assert stored.id == kept.id and stored.payload == {"n": 2}
    finally:
        conn.close()
        app.close_sync()


async def test_async_enqueue_in_the_callers_transaction(app: jobloom.App) -> None:
    conn = await async_connection(app.url)
    is_sqlite = isinstance(conn, sqlite3.Connection)
    try:
        await app.enqueue(Echo, {"n": 1}, connection=conn)
        conn.rollback() if is_sqlite else await conn.rollback()
        assert await app.list_jobs() == []
        job = await app.enqueue(Echo, {"n": 2}, connection=conn)
        conn.commit() if is_sqlite else await conn.commit()
        assert [j.id for j in await app.list_jobs()] == [job.id]
        await app.drain()
        assert (await app.get_job(job.id)).result == {"echo": {"n": 2}}
    finally:
        conn.close() if is_sqlite else await conn.close()


async def test_a_wrong_connection_type_is_refused(app: jobloom.App) -> None:
    with pytest.raises(jobloom.JobloomError):
        app.enqueue_sync(Echo, {}, connection=object())
    app.close_sync()
