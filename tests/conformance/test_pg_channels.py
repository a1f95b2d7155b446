"""PostgreSQL: a commit wakes the workers of its own schema only, however the schema was chosen.

Two apps in two schemas of one database, each chosen by the URL's ``search_path`` (no ``schema=``):
enqueues in one, through the app or on a caller's own connection (async and sync), are never heard by
the other's subscription, and each hears its own. Notifications reach a listener in commit order, so
the last commit heard proves that the earlier ones of the other schema were not sent to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest

import jobloom
from jobloom.store.postgres import PostgresStore
from jobloom.store.postgres.channel import DEFAULT, channel_name
from tests.conftest import POSTGRES_URL
from tests.helpers import eventually

pytestmark = pytest.mark.postgres


class Mine(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Theirs(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture
def other_url(_schema_pool: Any) -> Iterator[str]:
    """A second private schema of the test server, as ``postgres_url`` is one."""
    with _schema_pool.lease() as url:
        yield url


@pytest.fixture
async def apps(postgres_url: str, other_url: str) -> AsyncIterator[tuple[jobloom.App, jobloom.App]]:
    mine = jobloom.App(postgres_url, performers=[Mine], auto_migrate=True)
    theirs = jobloom.App(other_url, performers=[Theirs], auto_migrate=True)
    yield mine, theirs
    for app in (mine, theirs):
        await app.close()
        app.close_sync()


def schema_of(url: str) -> str:
    return url.split("search_path%3D", 1)[1].split("&", 1)[0]


async def test_a_commit_wakes_the_workers_of_its_schema_only(
        apps: tuple[jobloom.App, jobloom.App], postgres_url: str, other_url: str) -> None:
    mine, theirs = apps
    store = await mine.store()
    assert isinstance(store, PostgresStore) and store.channel == channel_name(schema_of(postgres_url))
    assert (await theirs.store()).channel != store.channel
    heard: list[str] = []
    wake = await store.wakeups()
    assert wake.on_job(lambda job_id, binding: heard.append(binding))
    assert wake.on_signal(lambda: heard.append("signal"))
    try:
        await theirs.enqueue(Theirs, {})  # the app's own transaction
        async with await psycopg.AsyncConnection.connect(other_url) as conn:  # a caller's, async
            await theirs.enqueue(Theirs, {}, connection=conn)
        with psycopg.connect(other_url) as sync_conn:  # a caller's, sync
            await asyncio.to_thread(theirs.enqueue_sync, Theirs, {}, connection=sync_conn)

        await mine.enqueue(Mine, {})
        await eventually(lambda: heard == ["Mine", "signal"], timeout=10, what=f"only its own enqueue heard: {heard}")
        async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
            await mine.enqueue(Mine, {}, connection=conn)
        await eventually(lambda: heard[2:] == ["Mine", "signal"], timeout=10, what=f"its caller's enqueue: {heard}")
        with psycopg.connect(postgres_url) as sync_conn:
            await asyncio.to_thread(mine.enqueue_sync, Mine, {}, connection=sync_conn)
        await eventually(lambda: heard[4:] == ["signal"], timeout=10, what=f"its sync caller's enqueue: {heard}")
    finally:
        await wake.close()


async def test_a_schema_named_or_on_the_search_path_is_one_channel(postgres_url: str) -> None:
    schema = schema_of(postgres_url)
    base = POSTGRES_URL  # the test server's URL as given, without the schema's search path
    stores = [PostgresStore(base, schema=schema), PostgresStore(postgres_url), PostgresStore(base),
              PostgresStore(base, schema="public")]
    try:
        for store in stores:
            await store.open()
        assert [s.channel for s in stores] == [channel_name(schema), channel_name(schema), DEFAULT, DEFAULT]
    finally:
        for store in stores:
            await store.close()
    assert len(channel_name("x" * 60).encode()) <= 63 and channel_name("x" * 60) != channel_name("x" * 61)
