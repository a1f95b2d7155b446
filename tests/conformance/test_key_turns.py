"""Limits between the concurrency keys of a binding, on every store: round-robin turns and a rate per key."""

from __future__ import annotations

import time
from typing import Any

import pytest

import jobloom
from jobloom.core import lifecycle
from jobloom.engine import coordinator
from jobloom.engine.jobs import Claimed, Outcome


class Turns(jobloom.Performer[dict[str, Any], None]):
    concurrency = 1
    concurrency_key = staticmethod(lambda p: p.get("k"))
    fairness = "round_robin"

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Weighted(jobloom.Performer[dict[str, Any], None]):
    concurrency = 1
    concurrency_key = staticmethod(lambda p: p.get("k"))
    fairness = "round_robin"
    key_weights = {"gold": 3}

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Wide(jobloom.Performer[dict[str, Any], None]):
    concurrency_key = staticmethod(lambda p: p.get("k"))
    key_concurrency = 5
    fairness = "round_robin"

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class PerKey(jobloom.Performer[dict[str, Any], None]):
    concurrency_key = staticmethod(lambda p: p.get("k"))
    key_concurrency = 100
    key_rate_limit = "1/h burst 2"

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Both(jobloom.Performer[dict[str, Any], None]):
    concurrency_key = staticmethod(lambda p: p.get("k"))
    key_concurrency = 100
    rate_limit = "1/h burst 3"
    key_rate_limit = "1/h burst 2"

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture
async def app(store_url: str):
    app = jobloom.App(store_url, performers=[Turns, Weighted, Wide, PerKey, Both], auto_migrate=True, lease=30.0)
    await app.register_bindings()
    yield app
    await app.close()


async def claim(app: jobloom.App, binding: str, *, now: float, capacity: int = 10) -> list[Claimed]:
    store = await app.store()

    async def work(t: Any) -> list[Claimed]:
        return (await coordinator.dispatch(t, binding, capacity=capacity, worker="w1", now=now, lease=30.0)).claimed
    return await store.transact(work)


async def finish(app: jobloom.App, claimed: list[Claimed]) -> None:
    store = await app.store()
    outcomes = [Outcome(c.id, c.attempt, lifecycle.SUCCEEDED, "w1", c.started_at, time.time()) for c in claimed]

    async def work(t: Any) -> None:
        await coordinator.report(t, outcomes, time.time(), hooks=app.hooks)
    await store.transact(work)


async def keys_of(app: jobloom.App, claimed: list[Claimed]) -> list[str | None]:
    return [(await app.get_job(c.id)).concurrency_key for c in claimed]


async def run_one_at_a_time(app: jobloom.App, binding: str, starts: int) -> list[str | None]:
    order: list[str | None] = []
    for _ in range(starts):
        claimed = await claim(app, binding, now=time.time(), capacity=1)
        if not claimed:
            break
        order += await keys_of(app, claimed)
        await finish(app, claimed)
    return order


async def test_a_key_with_few_jobs_is_not_starved_by_keys_with_a_backlog(app: jobloom.App) -> None:
    await app.enqueue_many([(Turns, {"k": k}) for k in ["A"] * 100 + ["B"] * 100 + ["C"] * 5])
    order = await run_one_at_a_time(app, "Turns", 15)
    assert order == ["A", "B", "C"] * 5


async def test_priority_orders_the_jobs_within_a_key_not_the_turns(app: jobloom.App) -> None:
    low = await app.enqueue(Turns, {"k": "A", "n": 1})
    high = await app.enqueue(Turns, {"k": "A", "n": 2}, priority=5)
    b = await app.enqueue(Turns, {"k": "B"}, priority=-5)
    started = []
    for _ in range(3):
        claimed = await claim(app, "Turns", now=time.time(), capacity=1)
        started += [c.id for c in claimed]
        await finish(app, claimed)
    assert started == [high.id, b.id, low.id]


async def test_jobs_without_a_key_take_turns_as_one_key_after_the_last_name(app: jobloom.App) -> None:
    await app.enqueue_many([(Turns, {"k": k}) for k in ["B", "B", "A", "A"]] + [(Turns, {}), (Turns, {})])
    assert await run_one_at_a_time(app, "Turns", 6) == ["A", "B", None, "A", "B", None]


async def test_a_weight_gives_a_key_that_many_starts_in_a_row(app: jobloom.App) -> None:
    await app.enqueue_many([(Weighted, {"k": k}) for k in ["gold"] * 6 + ["iron"] * 6])
    order = await run_one_at_a_time(app, "Weighted", 8)
    assert order == ["gold", "gold", "gold", "iron", "gold", "gold", "gold", "iron"]


async def test_the_turn_goes_on_from_one_dispatch_to_the_next_and_round_in_one(app: jobloom.App) -> None:
    await app.enqueue_many([(Wide, {"k": k}) for k in ["A"] * 10 + ["B"] * 10 + ["C"] * 2])
    first = await keys_of(app, await claim(app, "Wide", now=time.time(), capacity=4))
    second = await keys_of(app, await claim(app, "Wide", now=time.time(), capacity=4))
    assert sorted(first) == ["A", "A", "B", "C"]  # A, B, C, then A again: the turn goes round
    assert sorted(second) == ["A", "B", "B", "C"]  # B, C (its last job), A, B


async def test_a_full_key_passes_its_turn(app: jobloom.App) -> None:
    await app.enqueue_many([(Turns, {"k": k}) for k in ["A", "A", "B", "B"]])
    [a] = await claim(app, "Turns", now=time.time(), capacity=1)
    await app.set_limits("Turns", concurrency=2)
    [b] = await claim(app, "Turns", now=time.time(), capacity=1)
    assert await keys_of(app, [a, b]) == ["A", "B"]
    await finish(app, [b])
    [b2] = await claim(app, "Turns", now=time.time(), capacity=1)  # A's turn, but A is full: B goes on
    assert await keys_of(app, [b2]) == ["B"]


async def test_each_key_has_a_bucket_of_its_own(app: jobloom.App) -> None:
    await app.enqueue_many([(PerKey, {"k": k}) for k in ["a"] * 4 + ["b"] * 4])
    now = time.time()
    claimed = await claim(app, "PerKey", now=now)
    assert sorted(await keys_of(app, claimed)) == ["a", "a", "b", "b"]  # burst 2 each
    assert await claim(app, "PerKey", now=now + 60) == []
    store = await app.store()

    async def work(t: Any) -> Any:
        return await coordinator.dispatch(t, "PerKey", capacity=10, worker="w1", now=now + 60, lease=30.0)
    held = await store.transact(work)
    assert held.claimed == [] and held.next_token_at == pytest.approx(now + 3600)
    later = await claim(app, "PerKey", now=now + 3601)
    assert sorted(await keys_of(app, later)) == ["a", "b"]


async def test_the_binding_rate_and_the_key_rate_must_both_allow_a_start(app: jobloom.App) -> None:
    await app.enqueue_many([(Both, {"k": k}) for k in ["a"] * 4 + ["b"] * 4])
    claimed = await claim(app, "Both", now=time.time())
    keys = await keys_of(app, claimed)
    assert len(keys) == 3 and max(keys.count("a"), keys.count("b")) == 2  # binding burst 3, each key 2


async def test_a_key_rate_set_at_run_time_applies_and_idle_keys_keep_no_bucket(app: jobloom.App) -> None:
    await app.set_limits("PerKey", key_rate_limit="2/s")
    await app.enqueue_many([(PerKey, {"k": k}) for k in ["a"] * 3 + ["b"] * 3])
    now = time.time()
    assert len(await claim(app, "PerKey", now=now)) == 2  # burst 1 each
    store = await app.store()

    async def rows(t: Any) -> int:
        return len(await t.fetch_rows("key_buckets", {"binding": "PerKey", "keys": ["a", "b"]}))
    assert await store.transact(rows) == 2
    assert len(await claim(app, "PerKey", now=now + 0.5)) == 2
    assert len(await claim(app, "PerKey", now=now + 10)) == 2  # full again: their rows are gone first
    assert await store.transact(rows) == 2  # spent again now
    await app.enqueue(PerKey, {"k": "c"})
    await claim(app, "PerKey", now=now + 20)  # a and b idle and full: deleted
    assert await store.transact(rows) == 0


async def test_a_full_bucket_keeps_its_row_a_while_and_an_idle_key_loses_it(app: jobloom.App) -> None:
    from jobloom.engine.dispatch import KEY_BUCKET_KEEP, KEY_BUCKET_PRUNE_EVERY

    await app.set_limits("PerKey", key_rate_limit="2/s")
    await app.enqueue_many([(PerKey, {"k": k}) for k in ["a"] * 3 + ["b"]])
    store = await app.store()

    async def keys(t: Any) -> set[str]:
        return {r[0] for r in await t.fetch_rows("key_buckets", {"binding": "PerKey", "keys": ["a", "b"]})}
    now = time.time()
    assert len(await claim(app, "PerKey", now=now)) == 2  # a and b spend a token each: a row each
    assert await store.transact(keys) == {"a", "b"}
    # b is full again from now + 0.5, and idle; a dispatch a while later (past a prune's interval) keeps
    # its row, full as it is, as long as KEY_BUCKET_KEEP: saving it again would update it in place
    soon = now + 0.5 + KEY_BUCKET_KEEP / 2
    assert soon - now >= KEY_BUCKET_PRUNE_EVERY
    assert len(await claim(app, "PerKey", now=soon)) == 1  # a again
    assert await store.transact(keys) == {"a", "b"}
    # once b has been full for longer than that, the next prune deletes its row: an idle key costs nothing
    assert len(await claim(app, "PerKey", now=now + 0.5 + KEY_BUCKET_KEEP + KEY_BUCKET_PRUNE_EVERY)) == 1
    assert await store.transact(keys) == {"a"}


async def test_a_job_waiting_for_its_keys_turn_is_told_so(app: jobloom.App) -> None:
    from jobloom.app.diagnose import why_not_running

    await app.enqueue_many([(Turns, {"k": k}) for k in ["A", "A", "B"]])
    c = await app.enqueue(Turns, {"k": "C"})
    await app.set_limits("Turns", concurrency=2)
    claimed = await claim(app, "Turns", now=time.time(), capacity=1)  # A started: B's turn, then C's
    d = await why_not_running(app, c.id)
    [turn] = [r for r in d.reasons if r.code == "key_turn"]
    b_job = next(j for j in await app.list_jobs(binding="Turns", state="queued") if j.concurrency_key == "B")
    assert turn.job_ids == (b_job.id,) and "turn" in turn.text
    await finish(app, claimed)


async def test_a_job_of_a_key_out_of_tokens_is_told_when_the_next_comes(app: jobloom.App) -> None:
    from jobloom.app.diagnose import why_not_running

    await app.enqueue_many([(PerKey, {"k": "a"})] * 2)
    waiting = await app.enqueue(PerKey, {"k": "a"})
    assert len(await claim(app, "PerKey", now=time.time())) == 2
    d = await why_not_running(app, waiting.id)
    assert d.codes[:1] == ("key_rate_limited",)
    [reason] = d.reasons[:1]
    assert "'a'" in reason.text and reason.until is not None
