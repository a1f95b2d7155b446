"""Expiry: a job not started by its expiry never starts; it ends expired, counted in the stats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jobloom
from jobloom.core.queries import Q
from jobloom.store.base import Tx
from jobloom.testing import TestClock
from tests.conformance.test_projector import project_all


class Held(jobloom.Performer[dict[str, Any], None]):
    """Concurrency 0: every job of it waits queued, as under a full binding."""

    concurrency = 0

    async def perform(self, payload: dict[str, Any]) -> None:
        raise AssertionError("an expired job never runs")


class Flaky(jobloom.Performer[dict[str, Any], None]):
    """Always fails; its retries come a minute later."""

    backoff = jobloom.Backoff.fixed(60)

    async def perform(self, payload: dict[str, Any]) -> None:
        raise RuntimeError("down")


class Fresh(jobloom.Performer[dict[str, Any], None]):
    """Jobs that are worth nothing after 30 s: the performer's default expiry."""

    concurrency = 0
    expires_in = 30

    async def perform(self, payload: dict[str, Any]) -> None: ...


@pytest.fixture
async def clocked(store_url: str):
    clock = TestClock()
    app = jobloom.App(store_url, performers=[Held, Flaky, Fresh], auto_migrate=True, clock=clock)
    yield app, clock
    await app.close()


async def test_a_job_not_started_by_its_expiry_ends_expired_and_is_counted(clocked: Any) -> None:
    app, clock = clocked
    job = await app.enqueue(Held, {}, expires_in=5)
    at = await app.enqueue(Held, {}, expires_at=datetime.fromtimestamp(app.now() + 8, UTC))
    await clock.advance(4.9)
    assert (await app.get_job(job.id)).state == "queued"
    await clock.advance(0.1)  # its expiry: it never starts
    gone = await app.get_job(job.id)
    assert (gone.state, gone.attempt, gone.started_at) == ("expired", 0, None)
    assert gone.finished_at is not None and "expired" in (gone.error or "")
    assert (await app.get_job(at.id)).state == "queued"
    await clock.advance(3.1)  # past the other's (a datetime: to the microsecond)
    assert (await app.get_job(at.id)).state == "expired"
    await project_all(await app.store())
    figures = (await app.stats(since=timedelta(hours=1))).bindings["Held"]
    assert (figures.enqueued, figures.expired, figures.started) == (2, 2, 0)


async def test_a_retry_whose_backoff_ends_past_the_expiry_ends_the_job(clocked: Any) -> None:
    app, _ = clocked
    job = await app.enqueue(Flaky, {}, expires_in=30)
    assert await app.drain() == 1  # attempt 1 fails; its retry would come at 60 s, past the expiry at 30
    done = await app.get_job(job.id)
    assert (done.state, done.attempt) == ("expired", 1)
    assert "its retry would come at or past its expiry" in (done.error or "")
    assert [a.outcome for a in await app.attempts(job.id)] == ["failed"]
    kept = await app.enqueue(Flaky, {}, expires_in=120)  # a retry before the expiry is scheduled as usual
    await app.drain()
    assert (await app.get_job(kept.id)).state == "scheduled"


async def test_the_performers_expires_in_is_the_default(clocked: Any) -> None:
    app, clock = clocked
    default = await app.enqueue(Fresh, {})
    longer = await app.enqueue(Fresh, {}, expires_in=60)
    await clock.advance(30)
    assert [(await app.get_job(j.id)).state for j in (default, longer)] == ["expired", "queued"]


async def test_claim_takes_no_job_past_its_expiry(clocked: Any) -> None:
    """The cycle's sweep runs before dispatch; claim holds the rule alone too (a job committed past its
    expiry after the sweep read the table)."""
    app, _ = clocked
    job = await app.enqueue(Held, {}, expires_in=5)
    store = await app.store()

    async def claim(now: float) -> list[int]:
        async def work(tx: Tx) -> list[int]:
            rows = await tx.fetch(Q.claim, {"ids": [job.id], "worker": "w", "lease_expires": now + 30, "now": now})
            return [r.id for r in rows]

        return await store.transact(work)

    assert await claim(app.now() + 5) == []  # at its expiry: too late
    assert (await app.get_job(job.id)).state == "queued"
    assert await claim(app.now() + 4.9) == [job.id]


@pytest.mark.parametrize(("options", "field", "says"), [
    ({"expires_in": 0}, "expires_in", "seconds > 0"),
    ({"expires_in": -1}, "expires_in", "seconds >= 0"),
    ({"expires_in": 5, "expires_at": 10**10}, "expires_in", "not both"),
    ({"expires_at": datetime(2000, 1, 1, tzinfo=UTC)}, "expires_at", "a moment after now"),
    ({"expires_at": datetime(2100, 1, 1)}, "expires_at", "timezone-aware"),
    ({"expires_in": 5, "delay": 10}, "expires_in", "a moment after the job's first run"),
])
async def test_bad_expiry_options_name_field_value_and_binding(
    clocked: Any, options: dict[str, Any], field: str, says: str
) -> None:
    app, _ = clocked
    with pytest.raises(jobloom.InvalidOption) as caught:
        await app.enqueue(Held, {}, **options)
    assert caught.value.option == field and says in str(caught.value) and "Held" in str(caught.value)
    assert await app.list_jobs() == []


def test_a_performer_expires_in_is_checked() -> None:
    class Bad(jobloom.Performer[dict[str, Any], None]):
        expires_in = -3

        async def perform(self, payload: dict[str, Any]) -> None: ...

    with pytest.raises(jobloom.InvalidOption, match="expires_in on Bad"):
        jobloom.App("sqlite:///unused.db", performers=[Bad])


async def test_why_not_running_names_the_expiry_and_why_an_expired_job_never_ran(clocked: Any) -> None:
    from jobloom.app.diagnose import why_not_running

    app, clock = clocked
    job = await app.enqueue(Held, {}, expires_in=5)
    d = await why_not_running(app, job.id)
    assert d.codes[-1] == "expires" and d.reasons[-1].until is not None
    await clock.advance(5)
    gone = await why_not_running(app, job.id)
    assert gone.state == "expired" and gone.codes == ("expired",)
    assert gone.reasons[0].text.startswith("It never ran: it had not started by its expiry at ")
    retried = await app.enqueue(Flaky, {}, expires_in=30)
    await app.drain()
    assert "its retry would have come at or past its expiry" in (await why_not_running(app, retried.id)).reasons[0].text


async def test_a_job_waiting_for_an_expired_one_is_skipped_or_run_as_it_says(clocked: Any) -> None:
    app, clock = clocked
    first = await app.enqueue(Held, {}, expires_in=5)
    skipped = await app.enqueue(Flaky, {}, depends_on=[first.id])
    runs = await app.enqueue(Fresh, {}, depends_on=[first.id], on_dependency_failure="run", expires_in=60)
    await clock.advance(5)
    assert (await app.get_job(first.id)).state == "expired"
    assert (await app.get_job(skipped.id)).state == "skipped"
    assert (await app.get_job(runs.id)).state == "queued"  # released: it runs whatever its dependency did
