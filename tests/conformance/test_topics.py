"""Publishing to topics, on every store: one job per subscribed binding, atomically."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pydantic
import pytest

import jobloom
from jobloom.blobs import Directory
from jobloom.core.errors import InvalidOption, InvalidPayload
from jobloom.engine.middleware import EnqueueCall
from jobloom.engine.performer import inspect_performer

from .test_transactional import async_connection


class Order(pydantic.BaseModel):
    id: int


class Mail(jobloom.Performer[Order, None]):
    triggers = ["order.created"]

    async def perform(self, payload: Order) -> None:
        return None


class Ledger(jobloom.Performer[dict, None]):
    triggers = ["order.created", "order.paid"]

    async def perform(self, payload: dict) -> None:
        return None


@pytest.fixture
async def app(store_url: str):
    app = jobloom.App(store_url, performers=[Mail, Ledger], auto_migrate=True)
    await app.store()
    yield app
    await app.close()


async def test_publish_makes_one_job_per_subscriber(app: jobloom.App) -> None:
    jobs = await app.publish("order.created", {"id": 7})
    assert sorted(j.binding for j in jobs) == ["Ledger", "Mail"]
    assert {j.binding: j.payload for j in await app.list_jobs()} == {"Mail": {"id": 7}, "Ledger": {"id": 7}}
    assert app.topics() == {"order.created": ["Ledger", "Mail"], "order.paid": ["Ledger"]}


async def test_unsubscribed_topic_is_accepted_and_enqueues_nothing(app: jobloom.App) -> None:
    assert await app.publish("nobody.listens", {"x": 1}) == []
    assert await app.list_jobs() == []


async def test_a_refusing_subscriber_refuses_the_whole_publish(app: jobloom.App) -> None:
    with pytest.raises(InvalidPayload) as err:
        await app.publish("order.created", {"id": "not a number"})
    assert "Mail" in str(err.value) + "".join(getattr(err.value, "__notes__", []))
    assert await app.list_jobs() == []


async def test_publish_many_is_one_transaction(app: jobloom.App) -> None:
    with pytest.raises(InvalidPayload):
        await app.publish_many([("order.paid", {"id": 1}), ("order.created", {"id": "bad"})])
    assert await app.list_jobs() == []
    jobs = await app.publish_many([("order.paid", {"id": 1}), ("order.created", {"id": 2})])
    assert len(jobs) == 3 and len(await app.list_jobs()) == 3


async def test_publish_in_the_callers_transaction(app: jobloom.App) -> None:
    conn = await async_connection(app.url)
    is_sqlite = isinstance(conn, sqlite3.Connection)
    try:
        jobs = await app.publish("order.created", {"id": 1}, connection=conn)
        assert len(jobs) == 2
        if is_sqlite:
            conn.rollback()
        else:
            await conn.rollback()
        assert await app.list_jobs() == []
        await app.publish("order.paid", {"id": 2}, connection=conn)
        if is_sqlite:
            conn.commit()
        else:
            await conn.commit()
        [stored] = await app.list_jobs()
        assert stored.binding == "Ledger"
    finally:
        if is_sqlite:
            conn.close()
        else:
            await conn.close()


@pytest.mark.parametrize("bad", ["order created", "", ".x", "x" * 129, 5, ["a", "a"]])
async def test_bad_triggers_name_the_binding_and_value(bad: object) -> None:
    triggers = bad if isinstance(bad, list) else [bad]

    class Bad(jobloom.Performer[dict, None]):
        async def perform(self, payload: dict) -> None:
            return None

    Bad.triggers = triggers  # type: ignore[misc]
    with pytest.raises(InvalidOption, match="invalid triggers on Bad"):
        inspect_performer(Bad)


async def test_bad_topic_is_refused(app: jobloom.App) -> None:
    with pytest.raises(InvalidOption, match="invalid topic"):
        await app.publish("no spaces", {})


class TagsAndRefuses:
    """Enqueue middleware: tags each job with its binding, and refuses a payload marked ``refuse``."""

    async def enqueue(self, request: EnqueueCall, call_next: Any) -> EnqueueCall:
        if isinstance(request.payload, dict) and request.payload.get("refuse"):
            raise PermissionError(f"{request.binding} refuses it")
        request.tags = [*request.tags, f"via:{request.binding}"]
        return await call_next(request)  # type: ignore[no-any-return]


async def test_published_jobs_pass_the_enqueue_middleware(store_url: str) -> None:
    app = jobloom.App(store_url, performers=[Mail, Ledger], auto_migrate=True, middleware=[TagsAndRefuses()])
    try:
        jobs = await app.publish("order.created", {"id": 3})
        assert sorted(j.tags for j in jobs) == [["via:Ledger"], ["via:Mail"]]
        with pytest.raises(PermissionError) as refused:
            await app.publish_many([("order.paid", {"id": 4}), ("order.created", {"id": 5, "refuse": True})])
        assert "subscriber" in "".join(refused.value.__notes__)
        assert len(await app.list_jobs()) == 2  # the refused publish_many left nothing
    finally:
        await app.close()


async def test_a_large_publish_in_the_callers_transaction_is_offloaded(store_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "blobs"
    app = jobloom.App(store_url, performers=[Ledger], auto_migrate=True, blobs=Directory(folder), offload_over=1024)
    conn = await async_connection(app.url)
    big = {"data": "p" * 4096}
    try:
        [job] = await app.publish("order.paid", big, connection=conn)
        assert job.payload == big  # the caller sees its data, not the reference the row keeps
        if isinstance(conn, sqlite3.Connection):
            conn.commit()
        else:
            await conn.commit()
        assert len(list(folder.glob("*/*"))) == 1
        assert (await app.get_job(job.id)).payload == big
    finally:
        if isinstance(conn, sqlite3.Connection):
            conn.close()
        else:
            await conn.close()
        await app.close()
