"""Middleware, on every store: the order of the chain, what enqueue middleware may change or refuse, and
perform middleware around each attempt, its exceptions handled like the job's."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

import jobloom
from jobloom.core.errors import InvalidOption
from jobloom.engine.middleware import EnqueueCall

from .performers import FailTwice

TENANT: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="none")


class Seen(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    backoff = jobloom.Backoff.fixed(0)

    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"tenant": TENANT.get(), "payload": payload}


class SyncSeen(jobloom.Performer[dict[str, Any], str]):
    def perform(self, payload: dict[str, Any]) -> str:  # a plain def: in a thread
        return "sync"


class Recorder:
    """Notes each call, in and out, under its name."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    async def enqueue(self, request: EnqueueCall, call_next: Any) -> EnqueueCall:
        self.log.append(f"{self.name}:enqueue:in")
        request.tags = [*request.tags, self.name]
        out: EnqueueCall = await call_next(request)
        self.log.append(f"{self.name}:enqueue:out")
        return out

    async def perform(self, ctx: jobloom.JobContext, payload: Any, call_next: Any) -> Any:
        self.log.append(f"{self.name}:perform:in")
        result = await call_next()
        self.log.append(f"{self.name}:perform:out")
        return result


class Tenant:
    """Carries a tenant from meta at enqueue to a context variable in the attempt."""

    async def enqueue(self, request: EnqueueCall, call_next: Any) -> EnqueueCall:
        request.meta = {**request.meta, "tenant": "acme"}
        request.set(priority=7)
        return await call_next(request)  # type: ignore[no-any-return]

    async def perform(self, ctx: jobloom.JobContext, payload: Any, call_next: Any) -> Any:
        token = TENANT.set("acme")
        try:
            return await call_next()
        finally:
            TENANT.reset(token)


class Refuse:
    async def enqueue(self, request: EnqueueCall, call_next: Any) -> EnqueueCall:
        if request.payload.get("bad"):
            raise InvalidOption("payload", request.payload, "no 'bad' key (refused by middleware)", request.binding)
        return await call_next(request)  # type: ignore[no-any-return]


class Flaky:
    """Fails the first attempt of every Seen job, around the performer."""

    def __init__(self) -> None:
        self.calls = 0

    async def perform(self, ctx: jobloom.JobContext, payload: Any, call_next: Any) -> Any:
        self.calls += 1
        if ctx.binding == "Seen" and ctx.attempt == 1:
            raise RuntimeError("middleware says no")
        return await call_next()


def make(store_url: str, middleware: list[object]) -> jobloom.App:
    return jobloom.App(store_url, performers=[Seen, SyncSeen, FailTwice], auto_migrate=True, middleware=middleware)


async def test_first_in_the_list_is_outermost_for_enqueue_and_perform(store_url: str) -> None:
    log: list[str] = []
    app = make(store_url, [Recorder("a", log), Recorder("b", log)])
    try:
        job = await app.enqueue(Seen, {"x": 1})
        assert log == ["a:enqueue:in", "b:enqueue:in", "b:enqueue:out", "a:enqueue:out"]
        assert job.tags == ["a", "b"]
        log.clear()
        await app.drain()
        assert log == ["a:perform:in", "b:perform:in", "b:perform:out", "a:perform:out"]
        assert (await app.get_job(job.id)).state == "succeeded"
    finally:
        await app.close()


async def test_enqueue_middleware_changes_options_and_perform_sets_context(store_url: str) -> None:
    app = make(store_url, [Tenant()])
    try:
        job = await app.enqueue(Seen, {"x": 1}, meta={"from": "test"})
        stored = await app.get_job(job.id)
        assert stored.meta == {"from": "test", "tenant": "acme"} and stored.priority == 7
        many = await app.enqueue_many([(Seen, {"x": 2}), (SyncSeen, {})])
        assert [(await app.get_job(j.id)).priority for j in many] == [7, 7]
        await app.drain()
        assert (await app.get_job(job.id)).result == {"tenant": "acme", "payload": {"x": 1}}
        assert (await app.get_job(many[1].id)).result == "sync"  # a sync performer: wrapped in the loop
    finally:
        await app.close()


async def test_a_refusing_enqueue_middleware_stores_nothing(store_url: str) -> None:
    app = make(store_url, [Refuse()])
    try:
        with pytest.raises(InvalidOption, match="refused by middleware"):
            await app.enqueue(Seen, {"bad": True})
        with pytest.raises(InvalidOption) as err:
            await app.enqueue_many([(Seen, {"x": 1}), (Seen, {"bad": True})])
        assert "item 1" in "".join(err.value.__notes__)
        assert await app.list_jobs() == []
        assert (await app.enqueue(Seen, {"x": 1})).state == "queued"
    finally:
        await app.close()


async def test_a_perform_middleware_exception_is_retried_like_the_jobs(store_url: str) -> None:
    flaky = Flaky()
    app = make(store_url, [flaky])
    try:
        job = await app.enqueue(Seen, {"x": 1})
        last = await app.enqueue(Seen, {"x": 2}, max_attempts=1)
        await app.drain()
        await app.drain()
        done = await app.get_job(job.id)
        assert done.state == "succeeded" and done.attempt == 2
        attempts = await app.attempts(job.id)
        assert [a.outcome for a in attempts] == ["failed", "succeeded"]
        assert "RuntimeError: middleware says no" in (attempts[0].error or "")
        failed = await app.get_job(last.id)
        assert failed.state == "failed" and failed.error == "RuntimeError: middleware says no"
        # the job's own exceptions pass through the chain as they are
        own = await app.enqueue(FailTwice, {"key": "own"}, max_attempts=1)
        await app.drain()
        assert (await app.get_job(own.id)).error == "RuntimeError: failure 1"
    finally:
        await app.close()


class NoMethods:
    pass


class NotAsync:
    def perform(self, ctx: Any, payload: Any, call_next: Any) -> Any:
        return None


class Forgets:
    async def enqueue(self, request: EnqueueCall, call_next: Any) -> None:
        await call_next(request)


@pytest.mark.parametrize("bad, named", [
    (NoMethods(), "NoMethods"), (NotAsync(), "NotAsync"), (NoMethods, "the class NoMethods"),
])
def test_bad_middleware_is_refused_at_app_with_its_name(bad: object, named: str) -> None:
    with pytest.raises(InvalidOption, match="middleware") as err:
        jobloom.App("sqlite:///unused.db", performers=[Seen], middleware=[bad])
    assert named in str(err.value)


async def test_an_enqueue_middleware_that_returns_nothing_is_named(store_url: str) -> None:
    app = make(store_url, [Forgets()])
    try:
        with pytest.raises(InvalidOption, match="Forgets"):
            await app.enqueue(Seen, {"x": 1})
        assert await app.list_jobs() == []
    finally:
        await app.close()


class Spawns(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        child = await self.ctx.spawn("child", Seen, {"x": "child"})
        return child.id


async def test_sync_and_process_performers_are_wrapped_on_the_loop(store_url: str) -> None:
    from .sync_performers import InChild, Point

    log: list[str] = []
    app = jobloom.App(store_url, performers=[SyncSeen, InChild], auto_migrate=True,
                      middleware=[Recorder("a", log)])
    try:
        in_thread = await app.enqueue(SyncSeen, {})
        in_child = await app.enqueue(InChild, Point(1, 0))
        log.clear()
        await app.drain()
        assert log.count("a:perform:in") == 2 and log.count("a:perform:out") == 2
        assert (await app.get_job(in_thread.id)).result == "sync"
        assert (await app.get_job(in_child.id)).state == "succeeded"
    finally:
        await app.close()


async def test_enqueues_in_the_callers_transaction_and_children_pass_the_chain(store_url: str) -> None:
    from .test_transactional import async_connection, sync_connection

    log: list[str] = []
    app = jobloom.App(store_url, performers=[Seen, Spawns], auto_migrate=True, middleware=[Recorder("a", log)])
    try:
        await app.store()
        conn = await async_connection(app.url)
        is_sqlite = not hasattr(conn, "pgconn")
        try:
            in_async = await app.enqueue(Seen, {"x": 1}, connection=conn)
            conn.commit() if is_sqlite else await conn.commit()
        finally:
            conn.close() if is_sqlite else await conn.close()

        def in_a_thread() -> jobloom.Job:  # as sync code does: its own connection, the app's loop thread
            sync_conn = sync_connection(app.url)
            try:
                job = app.enqueue_sync(Seen, {"x": 2}, connection=sync_conn)
                sync_conn.commit()
                return job
            finally:
                sync_conn.close()

        in_sync = await asyncio.to_thread(in_a_thread)
        parent = await app.enqueue(Spawns, {})
        await app.drain()
        child_id = (await app.get_job(parent.id)).result
        for job_id in (in_async.id, in_sync.id, child_id):
            assert (await app.get_job(job_id)).tags == ["a"], job_id
    finally:
        await app.close()
        app.close_sync()
