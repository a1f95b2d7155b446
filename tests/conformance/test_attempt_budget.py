"""What ``Job.attempts_spent`` counts, and unknown payload keys, on every store."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

import jobloom
from jobloom.testing import TestClock

from ..helpers import eventually


@dataclass
class Order:
    id: str
    lines: list[Line] | None = None


@dataclass
class Line:
    sku: str


class Flaky(jobloom.Performer[Order, None]):
    max_attempts = 2
    backoff = jobloom.Backoff.fixed(0)

    async def perform(self, payload: Order) -> None:
        raise RuntimeError("down")


class Sleeper(jobloom.Performer[Order, str]):
    max_attempts = 1

    async def perform(self, payload: Order) -> str:
        await self.sleep("a", 0.01)
        await self.wait_for_event("go", timeout=30)
        return "done"


class Loose(jobloom.Performer[Order, str]):
    unknown_keys = "drop"

    async def perform(self, payload: Order) -> str:
        return payload.id


async def _drain_until(app: jobloom.App, job_id: int, done: Callable[[jobloom.Job], bool], what: str) -> jobloom.Job:
    """Run due jobs in-process until ``done(job)`` (a durable sleep makes its job due again a moment later)."""

    async def check() -> jobloom.Job | None:
        await app.drain()
        job = await app.get_job(job_id)
        return job if done(job) else None

    found: jobloom.Job = await eventually(check, what=what)
    return found


async def test_a_manual_retry_gives_a_fresh_budget_and_the_fence_still_grows(store_url: str) -> None:
    app = jobloom.App(store_url, performers=[Flaky], auto_migrate=True)
    try:
        job = await app.enqueue(Flaky, Order("o-1"))
        assert (job.attempt, job.attempts_spent) == (0, 0)
        failed = await _drain_until(app, job.id, lambda j: j.finished, "the first budget spent")
        assert (failed.state, failed.attempt, failed.attempts_spent) == ("failed", 2, 2)
        assert (await app.retry(job.id)).attempts_spent == 0
        again = await _drain_until(app, job.id, lambda j: j.finished, "the second budget spent")
        assert (again.state, again.attempt, again.attempts_spent) == ("failed", 4, 2)
        assert [a.attempt for a in await app.attempts(job.id)] == [1, 2, 3, 4]
        [listed] = await app.list_jobs(binding="Flaky")
        assert listed.attempts_spent == 2
    finally:
        await app.close()


async def test_sleeps_and_event_waits_spend_no_attempt(store_url: str) -> None:
    clock = TestClock()  # the sleep ends when the clock says so, however slow the machine
    app = jobloom.App(store_url, performers=[Sleeper], auto_migrate=True, clock=clock)
    try:
        job = await app.enqueue(Sleeper, Order("o-2"))
        await clock.advance(1)  # past the 0.01 s sleep, not the 30 s the event is waited for
        waiting = await app.get_job(job.id)
        assert waiting.attempt >= 2 and waiting.state == "scheduled", waiting
        assert waiting.attempts_spent == 0
        await app.send_event(job.id, "go")
        await clock.advance(0)
        done = await app.get_job(job.id)
        assert done.finished, done
        assert (done.state, done.attempts_spent) == ("succeeded", 1), done  # max_attempts = 1 was enough
        assert done.attempt == len(await app.attempts(job.id)) >= 3
    finally:
        await app.close()


async def test_unknown_payload_keys_are_refused_by_path_unless_dropped(store_url: str) -> None:
    app = jobloom.App(store_url, performers=[Flaky, Loose], auto_migrate=True)
    try:
        with pytest.raises(jobloom.InvalidPayload, match="unknown key 'extra'"):
            await app.enqueue(Flaky, {"id": "x", "extra": 1})
        with pytest.raises(jobloom.InvalidPayload, match=r"unknown key 'lines\[1\]\.qty'"):
            await app.enqueue(Flaky, {"id": "x", "lines": [{"sku": "a"}, {"sku": "b", "qty": 2}]})
        with pytest.raises(jobloom.InvalidPayload, match="unknown key 'extra'"):
            await app.enqueue_many([(Flaky, {"id": "y"}), (Flaky, {"id": "x", "extra": 1})])
        assert await app.list_jobs() == []
        kept = await app.enqueue(Loose, {"id": "x", "extra": 1})
        assert kept.payload == {"id": "x", "lines": None}
        ok = await app.enqueue(Flaky, {"id": "x", "lines": [{"sku": "a"}]})
        assert ok.payload == {"id": "x", "lines": [{"sku": "a"}]}
    finally:
        await app.close()


def test_an_unknown_keys_option_other_than_refuse_or_drop_is_refused() -> None:
    class Odd(jobloom.Performer[Order, None]):
        unknown_keys = "keep"

        async def perform(self, payload: Order) -> None: ...

    with pytest.raises(jobloom.InvalidOption, match="unknown_keys"):
        jobloom.App("sqlite:///never.db", performers=[Odd])


async def test_a_remote_binding_refuses_unknown_keys_of_its_type_but_not_of_a_json_schema(store_url: str) -> None:
    app = jobloom.App(store_url, auto_migrate=True, performers=[
        jobloom.RemoteBinding("Typed", payload=Line),
        jobloom.RemoteBinding("Lenient", payload=Line, unknown_keys="drop"),
        jobloom.RemoteBinding("Schema", payload={"type": "object", "required": ["sku"]}),
    ])
    try:
        with pytest.raises(jobloom.InvalidPayload, match="unknown key 'qty'"):
            await app.enqueue("Typed", {"sku": "a", "qty": 1})
        assert (await app.enqueue("Lenient", {"sku": "a", "qty": 1})).payload == {"sku": "a"}
        assert (await app.enqueue("Schema", {"sku": "a", "qty": 1})).payload == {"sku": "a", "qty": 1}
    finally:
        await app.close()
