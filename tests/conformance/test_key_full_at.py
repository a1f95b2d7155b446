"""A key's rate bucket full again at once is not saved, on every store: the binding's row says when the
last one is full (``key_full_at``), and no later dispatch records its starts before then."""

from __future__ import annotations

import time
from typing import Any

import pytest

import jobloom
from jobloom.core.dispatch_plan import KEY_BUCKET_SKIP
from jobloom.core.queries import Q
from jobloom.engine import coordinator
from jobloom.engine.jobs import Claimed


class Fast(jobloom.Performer[dict[str, Any], None]):
    concurrency_key = staticmethod(lambda p: p.get("k"))
    key_concurrency = 100
    fairness = "round_robin"
    key_rate_limit = "1000000/s burst 5"

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Plain(jobloom.Performer[dict[str, Any], None]):
    """A fast key rate without turns."""

    concurrency_key = staticmethod(lambda p: p.get("k"))
    key_concurrency = 100
    key_rate_limit = "1000000/s burst 5"

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture
async def app(store_url: str):
    app = jobloom.App(store_url, performers=[Fast, Plain], auto_migrate=True, lease=30.0)
    await app.register_bindings()
    yield app
    await app.close()


async def claim(app: jobloom.App, binding: str, *, now: float) -> list[Claimed]:
    store = await app.store()

    async def work(t: Any) -> list[Claimed]:
        return (await coordinator.dispatch(t, binding, capacity=10, worker="w1", now=now, lease=30.0)).claimed
    return await store.transact(work)


async def buckets(app: jobloom.App, binding: str, keys: list[str]) -> list[Any]:
    store = await app.store()
    return await store.transact(lambda t: t.fetch(Q.key_buckets, {"binding": binding, "keys": keys}))


async def full_at(app: jobloom.App, binding: str) -> float | None:
    store = await app.store()
    rows = await store.transact(lambda t: t.fetch(Q.get_binding, {"binding": binding}))
    return rows[0].key_full_at


@pytest.mark.parametrize("binding", ["Fast", "Plain"])
async def test_a_bucket_full_again_at_once_is_not_saved_and_no_later_start_comes_before_it(
    app: jobloom.App, binding: str
) -> None:
    performer = {"Fast": Fast, "Plain": Plain}[binding]
    await app.enqueue_many([(performer, {"k": k}) for k in ["a", "a", "b", "c"] * 2])
    now = time.time()
    first = await claim(app, binding, now=now)
    assert len(first) == 8  # a burst of 5 each: every job starts
    assert await buckets(app, binding, ["a", "b", "c"]) == []  # each key full again 4 µs later at most
    last = await full_at(app, binding)
    assert last is not None and now < last <= now + KEY_BUCKET_SKIP
    assert last == pytest.approx(now + 4 / 1_000_000)  # a's four tokens
    # a dispatch whose clock reads earlier (another process's) records its starts no earlier than that:
    # a key without a row is a full bucket at its time, as it would be had a's row been written
    await app.enqueue_many([(performer, {"k": "a"}) for _ in range(6)])
    second = await claim(app, binding, now=now - 1.0)
    assert len(second) == 5 and all(c.started_at >= last for c in second)


async def test_a_bucket_not_full_again_at_once_is_saved(app: jobloom.App) -> None:
    await app.set_limits("Fast", key_rate_limit="100/s burst 5")  # a token's refill: 10 ms, past the skip
    await app.enqueue_many([(Fast, {"k": k}) for k in ["a", "b"]])
    now = time.time()
    assert len(await claim(app, "Fast", now=now)) == 2
    assert {r.concurrency_key for r in await buckets(app, "Fast", ["a", "b"])} == {"a", "b"}
    assert await full_at(app, "Fast") is None
