"""jobloom.testing on every store: a test clock drives delays, backoff, sleeps, schedules and deadlines
without waiting; assertion helpers on enqueued jobs."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

import jobloom
from jobloom.testing import TestClock, assert_enqueued, assert_not_enqueued, enqueued

START = datetime(2030, 1, 1, 0, 30, tzinfo=UTC)  # half past: hourly ticks at 01:00 and 02:00


@dataclass
class Mail:
    to: str
    subject: str = "hello"


class SendMail(jobloom.Performer[Mail, str]):
    async def perform(self, payload: Mail) -> str:
        return f"sent to {payload.to}"


class FlakyOnce(jobloom.Performer[dict[str, Any], str]):
    max_attempts = 2
    backoff = jobloom.Backoff.fixed(3600)

    async def perform(self, payload: dict[str, Any]) -> str:
        if self.ctx.attempt == 1:
            raise RuntimeError("upstream down")
        return "ok"


class AlwaysFails(jobloom.Performer[dict[str, Any], None]):
    max_attempts = 4
    backoff = jobloom.Backoff.fixed(600)

    async def perform(self, payload: dict[str, Any]) -> None:
        raise RuntimeError("no")


class Nap(jobloom.Performer[dict[str, Any], float]):
    async def perform(self, payload: dict[str, Any]) -> float:
        await self.sleep("nap", 86400)
        return self.ctx.attempt


class Tick(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Slow(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        await self.wait_for_event("never")


class RetryNow(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        if self.ctx.attempt == 1:
            raise jobloom.Retry(0)
        return self.ctx.attempt


class SnoozeNow(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        if self.ctx.attempt == 1:
            raise jobloom.Snooze(0)
        return self.ctx.attempt


PERFORMERS = [SendMail, FlakyOnce, AlwaysFails, Nap, Tick, Slow, RetryNow, SnoozeNow]


@pytest.fixture
async def clocked(store_url: str):
    clock = TestClock(START)
    app = jobloom.App(store_url, performers=PERFORMERS, auto_migrate=True, clock=clock,
                      schedules=[jobloom.Schedule("hourly", every=3600, performer=Tick, payload={})])
    yield clock, app
    await app.close()


@pytest.mark.serial  # a time bound: the test clock's promise is that an hour costs no real time
async def test_a_one_hour_backoff_is_tested_in_milliseconds(clocked: tuple[TestClock, jobloom.App]) -> None:
    clock, app = clocked
    began = time.monotonic()
    job = await app.enqueue(FlakyOnce, {})
    await app.drain()
    retrying = await app.get_job(job.id)
    assert retrying.state == "scheduled" and retrying.run_ts == START.timestamp() + 3600
    await clock.advance(3599)
    assert (await app.get_job(job.id)).state == "scheduled"
    await clock.advance(1)
    done = await app.get_job(job.id)
    assert done.state == "succeeded" and done.attempt == 2 and done.finished_ts == START.timestamp() + 3600
    assert time.monotonic() - began < 3.0


@pytest.mark.parametrize("frozen", [True, False], ids=["test_clock", "real_clock"])
async def test_drain_runs_what_its_own_reports_made_due_at_once(store_url: str, frozen: bool) -> None:
    clock = TestClock(START) if frozen else None
    app = jobloom.App(store_url, performers=PERFORMERS, auto_migrate=True, clock=clock)
    try:
        again = await app.enqueue(RetryNow, {})
        snoozed = await app.enqueue(SnoozeNow, {})
        assert await app.drain() == 4  # each job's first attempt, its due-now retry or snooze's attempt
        for job, spent in ((again, 2), (snoozed, 1)):  # a snooze spends no attempt
            done = await app.get_job(job.id)
            assert (done.state, done.result, done.attempts_spent) == ("succeeded", 2, spent)
    finally:
        await app.close()


async def test_advance_stops_at_every_moment_on_the_way(clocked: tuple[TestClock, jobloom.App]) -> None:
    clock, app = clocked
    job = await app.enqueue(AlwaysFails, {})
    assert await clock.advance(1500) == 3  # at 0, 600 and 1200 s: each retry after its own backoff
    assert (await app.get_job(job.id)).state == "scheduled"
    await clock.advance(300)
    failed = await app.get_job(job.id)
    assert failed.state == "failed" and failed.attempt == 4 and failed.finished_ts == START.timestamp() + 1800


async def test_an_hourly_schedule_fires_twice_in_two_hours(clocked: tuple[TestClock, jobloom.App]) -> None:
    clock, app = clocked
    await app.drain()  # reads the schedules: the first tick is at 01:00
    assert await app.list_jobs(binding="Tick") == []
    await clock.advance(7200)
    ticks = await app.list_jobs(binding="Tick")
    assert [j.state for j in ticks] == ["succeeded", "succeeded"]
    assert sorted(j.unique_key for j in ticks) == ["schedule:hourly:2030-01-01T01:00:00Z",
                                                   "schedule:hourly:2030-01-01T02:00:00Z"]


async def test_jump_runs_nothing_and_schedules_catch_up(clocked: tuple[TestClock, jobloom.App]) -> None:
    clock, app = clocked
    await app.drain()
    job = await app.enqueue(SendMail, Mail("a@example.com"), delay=60)
    clock.jump(7200)
    assert (await app.get_job(job.id)).state == "scheduled"
    await app.drain()  # due schedules too: one job for the missed ticks (catch_up="latest")
    assert (await app.get_job(job.id)).state == "succeeded"
    assert [j.unique_key for j in await app.list_jobs(binding="Tick")] == ["schedule:hourly:2030-01-01T02:00:00Z"]
    with pytest.raises(jobloom.InvalidOption, match="not before"):
        clock.set(START)


async def test_a_durable_sleep_of_a_day_ends_when_the_day_has_passed(clocked: tuple[TestClock, jobloom.App]) -> None:
    clock, app = clocked
    job = await app.enqueue(Nap, {})
    await app.drain()
    assert (await app.get_job(job.id)).state == "scheduled"
    await clock.advance(86400)
    done = await app.get_job(job.id)
    assert done.state == "succeeded" and done.finished_ts == START.timestamp() + 86400


async def test_delays_and_assertions(clocked: tuple[TestClock, jobloom.App]) -> None:
    clock, app = clocked
    await app.enqueue(SendMail, Mail("a@example.com"), delay=600)
    await app.enqueue(SendMail, Mail("b@example.com", subject="bye"))
    [a] = await assert_enqueued(app, SendMail, payload={"to": "a@example.com"})
    assert a.state == "scheduled"
    await assert_enqueued(app, SendMail, payload=Mail("b@example.com", subject="bye"))
    await assert_enqueued(app, SendMail, count=2)
    await assert_not_enqueued(app, SendMail, payload={"to": "c@example.com"})
    with pytest.raises(AssertionError, match=r"found 0\. SendMail jobs there: .*a@example\.com"):
        await assert_enqueued(app, SendMail, payload={"to": "c@example.com"})
    with pytest.raises(AssertionError, match="expected no such SendMail job"):
        await assert_not_enqueued(app, SendMail, payload=Mail("b@example.com", subject="bye"))
    with pytest.raises(AssertionError):
        await assert_enqueued(app, SendMail, payload=Mail("b@example.com"))  # a whole payload must be equal
    await app.drain()
    await assert_enqueued(app, SendMail, payload={"to": "a@example.com"})  # not due yet
    await assert_not_enqueued(app, SendMail, payload={"to": "b@example.com"})
    await assert_enqueued(app, SendMail, payload={"to": "b@example.com"}, state="succeeded")
    await clock.advance(600)
    await assert_not_enqueued(app, SendMail)
    assert len(await enqueued(app, SendMail, state="succeeded")) == 2
    with pytest.raises(jobloom.UnknownBinding):
        await assert_enqueued(app, "Nope")


async def test_the_app_and_its_stored_times_read_the_clock(clocked: tuple[TestClock, jobloom.App]) -> None:
    clock, app = clocked
    assert app.now() == START.timestamp()
    job = await app.enqueue(SendMail, Mail("a@example.com"))
    assert job.created_ts == START.timestamp()
    clock.jump(5)
    await app.drain()
    done = await app.get_job(job.id)
    assert done.started_ts == done.finished_ts == START.timestamp() + 5


async def test_a_run_deadline_passes_on_the_test_clock(store_url: str) -> None:
    clock = TestClock(START)
    flow = jobloom.Flow("waits", deadline=3600)
    flow.node("slow", Slow, input=lambda inp, up: {})
    app = jobloom.App(store_url, performers=PERFORMERS, flows=[flow], auto_migrate=True, clock=clock)
    try:
        run = await app.start(flow, {})
        await app.drain()
        assert (await app.get_run(run.id)).state == "running"
        await clock.advance(3600)
        assert (await app.get_run(run.id)).state == "running"  # at its deadline, not past it
        await clock.advance(0.5)
        ended = await app.get_run(run.id)
        assert ended.state == "failed" and ended.error == "deadline passed"
    finally:
        await app.close()


def test_a_sync_test_drives_the_clock_through_the_apps_loop(store_url: str) -> None:
    clock = TestClock(START)
    app = jobloom.App(store_url, performers=PERFORMERS, auto_migrate=True, clock=clock)
    try:
        job = app.enqueue_sync(FlakyOnce, {})
        app.run_sync(app.drain())
        assert app.run_sync(app.get_job(job.id)).state == "scheduled"
        assert app.run_sync(clock.advance(3600)) == 1
        assert app.run_sync(app.get_job(job.id)).state == "succeeded"
    finally:
        app.close_sync()
