"""Enqueue on every store: options, uniqueness, coalescing, and each bad input's error."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

import jobloom
from jobloom.app.facade import STREAM_CHUNK


@dataclass
class Mail:
    to: str
    retries: int = 0


class SendMail(jobloom.Performer[Mail, str]):
    async def perform(self, payload: Mail) -> str:
        return f"sent to {payload.to}"


class Quick(jobloom.Performer[dict, None]):  # type: ignore[type-arg]
    unique_for = 0

    async def perform(self, payload: dict) -> None:  # type: ignore[type-arg]
        return None


@pytest.fixture
async def app(store_url: str):
    app = jobloom.App(store_url, performers=[SendMail, Quick], auto_migrate=True)
    yield app
    await app.close()


async def test_enqueue_returns_the_job_with_its_fields(app: jobloom.App) -> None:
    before = time.time()
    job = await app.enqueue(SendMail, Mail(to="a@example.com"), priority=5)
    assert job.id > 0
    assert job.binding == "SendMail"
    assert job.state == "queued"
    assert job.attempt == 0
    assert job.priority == 5
    assert job.payload == {"to": "a@example.com", "retries": 0}
    assert job.created_at.timestamp() >= before - 1
    stored = await app.get_job(job.id)
    assert stored.state == "queued" and stored.payload == job.payload and stored.priority == 5


async def test_by_name_with_a_json_payload(app: jobloom.App) -> None:
    job = await app.enqueue("SendMail", {"to": "b@example.com"})
    assert job.binding == "SendMail"
    await app.drain()
    assert (await app.get_job(job.id)).result == "sent to b@example.com"


async def test_delay_and_run_at_make_it_scheduled(app: jobloom.App) -> None:
    delayed = await app.enqueue(SendMail, Mail(to="x"), delay=60)
    assert delayed.state == "scheduled"
    assert delayed.run_at is not None and delayed.run_at.timestamp() > time.time() + 50
    later = await app.enqueue(SendMail, Mail(to="y"), run_at=datetime.now(UTC) + timedelta(hours=1))
    assert later.state == "scheduled"
    past = await app.enqueue(SendMail, Mail(to="z"), run_at=datetime.now(UTC) - timedelta(seconds=5))
    assert past.state == "queued"
    assert await app.drain() == 1
    assert (await app.get_job(delayed.id)).state == "scheduled"


async def test_unique_key_returns_the_existing_job(app: jobloom.App) -> None:
    first = await app.enqueue(SendMail, Mail(to="u"), unique_key="user-1")
    second = await app.enqueue(SendMail, Mail(to="other"), unique_key="user-1")
    assert second.id == first.id
    assert second.payload == {"to": "u", "retries": 0}
    other = await app.enqueue(SendMail, Mail(to="u"), unique_key="user-2")
    assert other.id != first.id
    await app.drain()
    # finished, but within unique_for (24 h by default): still the same job
    third = await app.enqueue(SendMail, Mail(to="u"), unique_key="user-1")
    assert third.id == first.id and third.state == "succeeded"


async def test_unique_for_zero_frees_the_key_once_finished(app: jobloom.App) -> None:
    first = await app.enqueue(Quick, {}, unique_key="k")
    assert (await app.enqueue(Quick, {}, unique_key="k")).id == first.id
    await app.drain()
    again = await app.enqueue(Quick, {}, unique_key="k")
    assert again.id != first.id and again.state == "queued"


async def test_concurrent_enqueues_of_one_unique_key_make_one_job(app: jobloom.App) -> None:
    jobs = await asyncio.gather(*[app.enqueue(SendMail, Mail(to="r"), unique_key="race") for _ in range(20)])
    assert len({j.id for j in jobs}) == 1


async def test_enqueues_in_one_tick_share_one_transaction(app: jobloom.App, monkeypatch) -> None:
    store = await app.store()
    calls: list[str] = []
    original_transact, original_autocommit = store.transact, store.autocommit

    async def transact(fn, **kw):  # type: ignore[no-untyped-def]
        calls.append("transact")
        return await original_transact(fn, **kw)

    async def autocommit(fn):  # type: ignore[no-untyped-def]
        calls.append("autocommit")
        return await original_autocommit(fn)

    monkeypatch.setattr(store, "transact", transact)
    monkeypatch.setattr(store, "autocommit", autocommit)
    jobs = await asyncio.gather(*[app.enqueue(SendMail, Mail(to=str(i))) for i in range(100)])
    assert calls in (["autocommit"], ["autocommit", "transact"])  # a store's autocommit may be a transaction
    assert len({j.id for j in jobs}) == 100
    assert [j.payload["to"] for j in jobs] == [str(i) for i in range(100)]


async def test_enqueue_many(app: jobloom.App) -> None:
    jobs = await app.enqueue_many(
        [(SendMail, Mail(to=str(i))) for i in range(50)]
        + [jobloom.EnqueueRequest("Quick", {}, jobloom.EnqueueOptions(priority=3))]
    )
    assert len(jobs) == 51
    assert jobs[-1].binding == "Quick" and jobs[-1].priority == 3
    ids = [j.id for j in jobs]
    assert len(set(ids)) == 51
    for job in (jobs[0], jobs[25], jobs[-1]):
        assert (await app.get_job(job.id)).payload == job.payload


async def test_enqueue_many_names_the_bad_item_and_enqueues_nothing(app: jobloom.App) -> None:
    items: list[tuple[object, object]] = [(SendMail, Mail(to=str(i))) for i in range(5)]
    items.insert(3, (SendMail, {"to": 7}))  # not a string
    with pytest.raises(jobloom.InvalidPayload) as caught:
        await app.enqueue_many(items)
    assert "SendMail" in str(caught.value)
    assert caught.value.__notes__ == ["in item 3 of enqueue_many (counting from 0); nothing was enqueued"]
    assert await app.list_jobs() == []


async def test_a_large_enqueue_many_keeps_every_job_in_order(app: jobloom.App) -> None:
    """More items than one chunk (PostgreSQL sends a large batch in chunks, built while the last is written)."""
    n = 2 * STREAM_CHUNK + 37
    jobs = await app.enqueue_many([(SendMail, Mail(to=str(i))) for i in range(n)])
    assert [j.payload["to"] for j in jobs] == [str(i) for i in range(n)]
    assert [j.id for j in jobs] == sorted({j.id for j in jobs})  # distinct, in the order given
    stored = {j.id: j for j in await app.list_jobs(limit=10 * n)}
    assert len(stored) == n
    assert all(stored[j.id].payload == j.payload and stored[j.id].state == "queued" for j in jobs)


async def test_a_bad_item_late_in_a_large_enqueue_many_enqueues_nothing(app: jobloom.App) -> None:
    """The earlier chunks may already be at the server when the bad item is found: they roll back."""
    bad = 2 * STREAM_CHUNK + 5
    items: list[tuple[object, object]] = [(SendMail, Mail(to=str(i))) for i in range(3 * STREAM_CHUNK)]
    items[bad] = (SendMail, {"to": None})
    with pytest.raises(jobloom.InvalidPayload) as caught:
        await app.enqueue_many(items)
    assert caught.value.__notes__ == [f"in item {bad} of enqueue_many (counting from 0); nothing was enqueued"]
    assert await app.list_jobs() == []
    assert len(await app.enqueue_many(items[:bad])) == bad  # the store is usable afterwards


class Tuned(jobloom.Performer[Mail, None]):
    priority = 5
    max_attempts = 7
    delivery = "at_most_once"
    concurrency = 10

    @staticmethod
    def concurrency_key(payload: Mail) -> str:
        return "to:" + payload.to

    async def perform(self, payload: Mail) -> None:
        return None


async def test_jobs_with_default_options_take_the_performers_defaults(store_url: str) -> None:
    app = jobloom.App(store_url, performers=[Quick, Tuned], auto_migrate=True)
    try:
        for performer, payload, expected in (
            (Quick, {}, (0, Quick.max_attempts, "at_least_once", None)),
            (Tuned, Mail(to="x"), (5, 7, "at_most_once", "to:x")),
        ):
            plain = await app.enqueue(performer, payload)
            (many,) = await app.enqueue_many([(performer, payload)])
            for job in (plain, many, await app.get_job(plain.id), await app.get_job(many.id)):
                assert job.state == "queued" and job.unique_key is None
                assert (job.priority, job.max_attempts, job.delivery, job.concurrency_key) == expected
    finally:
        await app.close()


def test_enqueue_sync(store_url: str) -> None:
    app = jobloom.App(store_url, performers=[SendMail], auto_migrate=True)
    try:
        job = app.enqueue_sync(SendMail, Mail(to="sync"), priority=2)
        assert job.state == "queued" and job.priority == 2
        assert app.run_sync(app.get_job(job.id)).payload["to"] == "sync"
    finally:
        app.close_sync()


# -- bad input ------------------------------------------------------------------------------------

async def test_unknown_binding(app: jobloom.App) -> None:
    with pytest.raises(jobloom.UnknownBinding, match="'Nope'.*known bindings: Quick, SendMail"):
        await app.enqueue("Nope", {})


async def test_invalid_payload_names_the_field(app: jobloom.App) -> None:
    with pytest.raises(jobloom.InvalidPayload, match="field 'to'.*valid string.*got 42"):
        await app.enqueue(SendMail, {"to": 42})
    with pytest.raises(jobloom.InvalidPayload, match="field 'to'.*Field required"):
        await app.enqueue(SendMail, {})


async def test_payload_too_large_says_the_limit(app: jobloom.App) -> None:
    with pytest.raises(jobloom.PayloadTooLarge, match="limit is 131072 bytes"):
        await app.enqueue(SendMail, Mail(to="x" * 200_000))


async def test_invalid_options_say_what_is_accepted(app: jobloom.App) -> None:
    with pytest.raises(jobloom.InvalidOption, match="delay.*seconds >= 0"):
        await app.enqueue(SendMail, Mail(to="x"), delay=-1)
    with pytest.raises(jobloom.InvalidOption, match="delivery.*'at_least_once' or 'at_most_once'"):
        await app.enqueue(SendMail, Mail(to="x"), delivery="twice")
    with pytest.raises(jobloom.InvalidOption, match="max_attempts.*integer from 1 to 2147483647"):
        await app.enqueue(SendMail, Mail(to="x"), max_attempts=0)
    with pytest.raises(jobloom.InvalidOption, match="run_at.*timezone-aware"):
        await app.enqueue(SendMail, Mail(to="x"), run_at=datetime.now())


def test_invalid_performer_options_are_refused_at_app_creation(store_url: str) -> None:
    class Fast(jobloom.Performer[dict, None]):  # type: ignore[type-arg]
        rate_limit = "fast"

        async def perform(self, payload: dict) -> None:  # type: ignore[type-arg]
            return None

    with pytest.raises(jobloom.InvalidOption, match=r"rate_limit on Fast: 'fast'; expected 'N/s'"):
        jobloom.App(store_url, performers=[Fast])

    class Zero(jobloom.Performer[dict, None]):  # type: ignore[type-arg]
        concurrency = -1

        async def perform(self, payload: dict) -> None:  # type: ignore[type-arg]
            return None

    with pytest.raises(jobloom.InvalidOption, match="concurrency on Zero: -1"):
        jobloom.App(store_url, performers=[Zero])


async def test_get_job_of_a_missing_id(app: jobloom.App) -> None:
    with pytest.raises(jobloom.JobNotFound, match="no job with id 999999"):
        await app.get_job(999999)


async def test_list_jobs_filters(app: jobloom.App) -> None:
    a = await app.enqueue(SendMail, Mail(to="a"))
    b = await app.enqueue(Quick, {})
    await app.enqueue(SendMail, Mail(to="c"), delay=100)
    assert [j.id for j in await app.list_jobs(binding="Quick")] == [b.id]
    queued = await app.list_jobs(state="queued")
    assert {j.id for j in queued} == {a.id, b.id}
    assert len(await app.list_jobs(limit=2)) == 2
    with pytest.raises(jobloom.InvalidOption, match="state.*one of waiting"):
        await app.list_jobs(state="bogus")


async def test_one_callers_bad_job_in_a_coalesced_batch_fails_only_that_caller(store_url: str) -> None:
    """Enqueues made in one loop tick share a transaction; a job the store refuses fails only its caller."""
    import dataclasses
    import time as _time

    from jobloom.engine.enqueue import build_job

    app = jobloom.App(store_url, performers=[_Plain], auto_migrate=True)
    try:
        core = await app.stores.core()
        now = _time.time()
        good = build_job(app.spec(_Plain), {}, jobloom.EnqueueOptions(), now)
        bad = dataclasses.replace(good, payload='"\\ud800"')  # no store can hold a lone surrogate
        bad.payload = '"\ud800"'
        results = await asyncio.gather(core.enqueuer.submit(good), core.enqueuer.submit(bad),
                                       core.enqueuer.submit(dataclasses.replace(good)), return_exceptions=True)
        assert isinstance(results[1], Exception), results
        assert all(isinstance(r, jobloom.Job) for r in (results[0], results[2])), results
        assert {j.id for j in await app.list_jobs()} == {results[0].id, results[2].id}  # type: ignore[union-attr]
    finally:
        await app.close()


class _Plain(jobloom.Performer[dict[str, int], None]):
    async def perform(self, payload: dict[str, int]) -> None:
        return None


@pytest.fixture
def store_url(pooled_store_url: str) -> str:
    """This module runs through PgBouncer (transaction pooling) too."""
    return pooled_store_url
