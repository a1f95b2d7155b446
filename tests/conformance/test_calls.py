"""A job that calls another and waits for it (``self.call``), on every store."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import jobloom
from jobloom.core.queries import Q
from jobloom.engine.callers import CALL_WAIT
from jobloom.engine.coordinator import report
from jobloom.engine.jobs import Outcome

runs: dict[str, int] = {}


class Double(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        runs["double"] = runs.get("double", 0) + 1
        return 2 * int(payload["n"])


class Broken(jobloom.Performer[dict[str, Any], None]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> None:
        raise ValueError(f"no good: {payload['n']}")


class Caller(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        runs["caller"] = runs.get("caller", 0) + 1
        first = await self.call(Double, {"n": payload["n"]})
        second = await self.call(Double, {"n": first}, name="again", priority=5)
        return int(second)


class Gatherer(jobloom.Performer[dict[str, Any], list[int]]):
    async def perform(self, payload: dict[str, Any]) -> list[int]:
        runs["gatherer"] = runs.get("gatherer", 0) + 1
        return list(await asyncio.gather(*(self.call(Double, {"n": n}) for n in range(payload["k"]))))


class Careful(jobloom.Performer[dict[str, Any], str]):
    async def perform(self, payload: dict[str, Any]) -> str:
        try:
            await self.call(Broken, {"n": 1})
        except jobloom.ChildFailed as exc:
            return f"{exc.binding} {exc.state}: {exc.error}"
        return "no failure"


class Careless(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        await self.call(Broken, {"n": 2})


class SyncCaller(jobloom.Performer[dict[str, Any], int]):
    def perform(self, payload: dict[str, Any]) -> int:
        return int(self.call(Double, {"n": payload["n"]})) + 1


class BadOption(jobloom.Performer[dict[str, Any], None]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> None:
        await self.call(Double, {"n": 1}, **payload)


PERFORMERS = [Double, Broken, Caller, Gatherer, Careful, Careless, SyncCaller, BadOption]


@pytest.fixture
async def app(store_url: str):
    runs.clear()
    app = jobloom.App(store_url, performers=PERFORMERS, auto_migrate=True)
    yield app
    await app.close()


async def _children(app: jobloom.App, parent: int) -> list[tuple[int, str, str]]:
    """The children ``parent`` made with its calls, in the order made: (id, binding, state)."""
    store = await app.store()

    async def read(tx: Any) -> list[tuple[int, str, str]]:
        steps = await tx.fetch(Q.get_steps, {"job_id": parent})
        ids = sorted(int(r.result) for r in steps if r.name.startswith("call:"))
        rows = [await tx.fetchone(Q.call_child, {"id": i}) for i in ids]
        return [(r.id, r.binding, r.state) for r in rows if r is not None]

    return await store.transact(read, exclusive=False)


async def test_a_call_returns_the_childs_result_and_makes_it_once(app: jobloom.App) -> None:
    job = await app.enqueue(Caller, {"n": 3})
    await app.drain()
    done = await app.get_job(job.id)
    assert done.state == "succeeded" and done.result == 12
    assert done.attempts_spent == 1  # each wait refunded its attempt
    assert [a.outcome for a in await app.attempts(job.id)] == ["suspended", "suspended", "succeeded"]
    assert runs == {"caller": 3, "double": 2}  # no child made or run twice
    children = await _children(app, job.id)
    assert [(b, s) for _, b, s in children] == [("Double", "succeeded"), ("Double", "succeeded")]
    again = await app.get_job(children[1][0])
    assert again.priority == 5 and again.unique_key == f"call:{job.id}:again"
    assert again.parent_id == job.id and done.parent_id is None  # the caller is the child's parent


async def test_calls_gathered_make_every_child_before_the_caller_suspends(app: jobloom.App) -> None:
    job = await app.enqueue(Gatherer, {"k": 4})
    await app.drain(bindings=["Gatherer"])  # the caller alone: it makes its children and suspends
    assert (await app.get_job(job.id)).state == "scheduled"
    children = await _children(app, job.id)
    assert [(b, s) for _, b, s in children] == [("Double", "queued")] * 4
    await app.drain()
    done = await app.get_job(job.id)
    assert done.state == "succeeded" and done.result == [0, 2, 4, 6]
    assert len(await _children(app, job.id)) == 4 and runs["double"] == 4


async def test_a_failed_child_raises_child_failed_in_the_caller(app: jobloom.App) -> None:
    careful = await app.enqueue(Careful, {})
    careless = await app.enqueue(Careless, {})
    await app.drain()
    done = await app.get_job(careful.id)
    assert done.state == "succeeded" and done.result == "Broken failed: ValueError: no good: 1"
    failed = await app.get_job(careless.id)
    assert failed.state == "failed" and failed.attempts_spent == 1  # a ChildFailed is not retried
    assert failed.error.startswith("ChildFailed: child job ")
    assert "(Broken) failed: ValueError: no good: 2" in failed.error


async def test_a_cancelled_child_wakes_its_caller(app: jobloom.App) -> None:
    job = await app.enqueue(Careless, {})
    await app.drain(bindings=["Careless"])
    [(child, _, state)] = await _children(app, job.id)
    assert state == "queued" and (await app.get_job(job.id)).state == "scheduled"
    await app.cancel(child)
    assert (await app.get_job(job.id)).state == "queued"
    await app.drain(bindings=["Careless"])
    failed = await app.get_job(job.id)
    assert failed.state == "failed" and "(Broken) cancelled" in failed.error


async def test_a_sync_perform_calls_with_the_blocking_form(app: jobloom.App) -> None:
    job = await app.enqueue(SyncCaller, {"n": 20})
    await app.drain()
    done = await app.get_job(job.id)
    assert done.state == "succeeded" and done.result == 41


@pytest.mark.parametrize(("options", "words"), [
    ({"unique_key": "k"}, ["call option 'unique_key'", "'k'", "Double"]),
    ({"colour": "red"}, ["call option 'colour'", "'red'", "Double"]),
    ({"priority": "high"}, ["priority", "'high'", "Double"]),
    ({"name": ""}, ["call name", "''"]),
])
async def test_bad_call_options_fail_the_caller_naming_them(app: jobloom.App, options: dict[str, Any],
                                                            words: list[str]) -> None:
    job = await app.enqueue(BadOption, options)
    await app.drain(bindings=["BadOption"])
    failed = await app.get_job(job.id)
    assert failed.state == "failed", failed
    for word in words:
        assert word in failed.error, (word, failed.error)
    assert await _children(app, job.id) == []


async def test_a_child_that_ended_while_its_caller_suspended_is_seen_by_the_report(app: jobloom.App) -> None:
    """The caller's report reads its children under their locks: an end it sees queues it again at once."""
    store = await app.store()
    caller = await app.enqueue(Careless, {})
    child = await app.enqueue(Double, {"n": 1})
    now = store.now()

    async def start(tx: Any, ended: bool) -> None:
        await tx.execute("promote_due", {"now": 2e10, "limit": 10})
        await tx.fetch(Q.claim, {"ids": [caller.id], "worker": "w", "lease_expires": now + 60, "now": now})
        await tx.execute("set_parent", {"id": child.id, "parent_id": caller.id})
        if ended:
            await tx.execute("cancel_now", {"id": child.id, "now": now, "reason": "gone"})

    async def suspend(attempt: int) -> jobloom.Job:
        wait = Outcome(caller.id, attempt, "suspended", "w", now, now, retry_after=1e10,
                       wait=f"{CALL_WAIT}{child.id}")
        await store.transact(lambda tx: report(tx, [wait], now, hooks=app.hooks))
        return await app.get_job(caller.id)

    await store.transact(lambda tx: start(tx, False))
    waiting = await suspend(1)
    assert waiting.state == "scheduled" and waiting.run_at.timestamp() > now + 1e6  # its child runs: it sleeps
    await store.transact(lambda tx: start(tx, True))  # its second attempt, and its child ends before it suspends
    woken = await suspend(2)
    assert woken.state == "scheduled" and woken.run_at.timestamp() < now + 1  # due at once
