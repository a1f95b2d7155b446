"""Searching jobs by a text in their payload or meta on every store, through each index a search can
take, and deleting one finished job (``App.delete``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import jobloom
from jobloom.app.notes import add_notes, job_notes
from jobloom.core.errors import InvalidOption, InvalidTransition, JobNotFound


class Mail(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[jobloom.App]:
    app = jobloom.App(store_url, performers=[Mail], auto_migrate=True)
    await app.migrate()
    yield app
    await app.close()


async def test_payload_text_finds_jobs_by_payload_or_meta_whatever_index_drives_the_search(
    app: jobloom.App,
) -> None:
    bob = await app.enqueue(Mail, {"to": "bob@example.com"}, tags=["t"], unique_key="u-bob")
    meta = await app.enqueue(Mail, {"to": "ann@example.com"}, meta={"order": "order-4711"}, tags=["t"])
    later = await app.enqueue(Mail, {"to": "bob@example.com", "n": 2}, delay=3600)
    other = await app.enqueue(Mail, {"to": "eve@example.com"})

    async def ids(**f: Any) -> list[int]:
        return [j.id for j in await app.list_jobs(**f)]

    assert await ids(payload_text="bob@") == [later.id, bob.id]  # no index filter: by id
    assert await ids(payload_text="order-4711") == [meta.id]  # in the meta
    assert await ids(payload_text="bob@", state="queued") == [bob.id]  # the queued jobs' index
    assert await ids(payload_text="bob@", state="scheduled") == [later.id]
    assert await ids(payload_text="bob@", state=["queued", "scheduled"], binding="Mail") == [later.id, bob.id]
    assert await ids(payload_text="example.com", tags=["t"]) == [meta.id, bob.id]  # the tags' index
    assert await ids(payload_text="bob@", binding="Mail", unique_key="u-bob") == [bob.id]
    assert await ids(payload_text="Bob@") == [], "case-sensitive"
    assert other.id not in await ids(payload_text="bob")
    with pytest.raises(InvalidOption, match="payload_text"):
        await app.list_jobs(payload_text="x" * 2000)
    assert await app.cancel_many(jobloom.JobFilter(payload_text="bob@")) == 2
    assert await app.delete_many(jobloom.JobFilter(payload_text="bob@", state="cancelled")) == 2
    assert await ids(payload_text="bob@") == []


async def test_deleting_one_finished_job(app: jobloom.App) -> None:
    done = await app.enqueue(Mail, {})
    waiting = await app.enqueue(Mail, {})
    await app.cancel(done.id)
    with pytest.raises(InvalidTransition, match="it is queued"):
        await app.delete(waiting.id)
    await app.cancel(waiting.id)
    if (await app.store()).dialect == "sqlite":  # SQLite would hand the newest id out again: it stays
        with pytest.raises(InvalidTransition, match="newest job"):
            await app.delete(waiting.id)
    store = await app.store()
    await add_notes(store, [done.id, waiting.id], "ops", "looked at it")

    async def notes(job_id: int) -> list[Any]:
        return await store.transact(lambda tx: job_notes(tx, job_id), exclusive=False)

    assert [(n.actor, n.what) for n in await notes(done.id)] == [("ops", "looked at it")]
    await app.delete(done.id)
    assert await notes(done.id) == [] and len(await notes(waiting.id)) == 1, "its notes go with it"
    with pytest.raises(JobNotFound):
        await app.get_job(done.id)
    with pytest.raises(JobNotFound):
        await app.delete(done.id)
    if (await app.store()).dialect == "sqlite":
        assert (await app.get_job(waiting.id)).state == "cancelled"
