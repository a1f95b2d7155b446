"""Schedules on every store: one job per tick across racing workers, pause/resume/trigger, overlap,
catch-up, run-time definitions and listings. Keepers are driven with explicit times, so ticks are exact."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

import jobloom
from jobloom.schedules.keeper import SchedulerKeeper
from jobloom.schedules.planner import tick_key
from jobloom.schedules.schedule import InvalidSchedule, Schedule, UnknownSchedule
from tests.helpers import eventually


class Tick(jobloom.Performer[dict[str, Any], str]):
    async def perform(self, payload: dict[str, Any]) -> str:
        return str(payload.get("at"))


class Other(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


AppFactory = Callable[..., jobloom.App]


@pytest.fixture
async def make_app(store_url: str) -> AsyncIterator[AppFactory]:
    """Apps on the test's store (each its own connections, like separate workers); closed afterwards."""
    apps: list[jobloom.App] = []

    def make(*schedules: Schedule, performers: list[Any] | None = None) -> jobloom.App:
        app = jobloom.App(store_url, performers=performers or [Tick, Other], schedules=schedules,
                          auto_migrate=True, lease=1.0)
        apps.append(app)
        return app

    yield make
    for app in apps:
        await app.close()


def at_payload(t: datetime) -> dict[str, Any]:
    return {"at": t.isoformat()}


async def schedule_jobs(app: jobloom.App, name: str) -> list[jobloom.Job]:
    jobs = await app.list_jobs(binding="Tick", limit=10_000)
    return sorted((j for j in jobs if (j.unique_key or "").startswith(f"schedule:{name}:")), key=lambda j: j.id)


async def info(app: jobloom.App, name: str) -> Any:
    return next(i for i in await app.list_schedules() if i.name == name)


def base_time() -> float:
    return float(int(time.time())) + 0.2  # 0.2 s after a whole second: ticks are the whole seconds


async def test_racing_workers_make_exactly_one_job_per_tick(make_app: AppFactory) -> None:
    s = Schedule("race", every=1, performer=Tick, payload=at_payload, overlap="allow", catch_up="all")
    apps = [make_app(s) for _ in range(3)]
    keepers = [SchedulerKeeper(a) for a in apps]
    stores = [await a.store() for a in apps]
    t0 = base_time()
    await asyncio.gather(*(k.run(st, t0) for k, st in zip(keepers, stores, strict=True)))
    for step in range(1, 11):
        now = t0 + step
        await asyncio.gather(*(k.run(st, now + 0.001 * i)
                               for i, (k, st) in enumerate(zip(keepers, stores, strict=True))))
    jobs = await schedule_jobs(apps[0], "race")
    keys = [j.unique_key for j in jobs]
    assert len(keys) == len(set(keys)) == 10
    assert keys == [tick_key("race", t0 - 0.2 + step) for step in range(1, 11)]
    assert jobs[0].payload["at"] == datetime.fromtimestamp(t0 - 0.2 + 1, UTC).isoformat()
    assert (await info(apps[0], "race")).fired == 10


async def test_the_worker_loop_fires_schedules_on_its_timer(make_app: AppFactory) -> None:
    app = make_app(Schedule("loop", every=1, performer=Tick, payload=at_payload))
    worker = jobloom.Worker(app, grace=2.0)
    task = asyncio.create_task(worker.run())
    try:
        async def two_succeeded() -> bool:
            return sum(j.state == "succeeded" for j in await schedule_jobs(app, "loop")) >= 2

        await eventually(two_succeeded, timeout=15, what="two scheduled jobs run by the worker")
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)


async def test_pause_stops_firing_and_resume_starts_from_the_next_tick(make_app: AppFactory) -> None:
    app = make_app(Schedule("p", every=1, performer=Tick, payload=at_payload))
    keeper = SchedulerKeeper(app)
    t0 = base_time()
    await keeper.run(await app.store(), t0)
    paused = await app.pause_schedule("p")
    assert paused.paused and paused.next_run is None
    for step in range(1, 6):
        await keeper.run(await app.store(), t0 + step)
    assert await schedule_jobs(app, "p") == []
    resumed = await app.resume_schedule("p")
    assert not resumed.paused and resumed.next_run is not None
    resumed_at = time.time()
    await keeper.run(await app.store(), t0 + 7)
    jobs = await schedule_jobs(app, "p")
    assert len(jobs) == 1  # the ticks while paused are not made up
    assert jobs[0].unique_key == tick_key("p", t0 - 0.2 + 7) and t0 + 7 > resumed_at


async def test_trigger_runs_now_even_when_paused(make_app: AppFactory) -> None:
    app = make_app(Schedule("t", cron="0 3 * * *", performer=Tick, payload=at_payload, timezone="Europe/Berlin"))
    await app.pause_schedule("t")
    job = await app.trigger_schedule("t")
    assert job.binding == "Tick" and job.unique_key.startswith("schedule:t:manual:")
    assert job.payload["at"].endswith(("+01:00", "+02:00"))  # the tick, in the schedule's time zone
    listed = await info(app, "t")
    assert listed.last_job_id == job.id and listed.last_run is not None and listed.paused
    await app.drain()
    assert (await app.get_job(job.id)).state == "succeeded"


async def test_unknown_schedules_are_refused(make_app: AppFactory) -> None:
    app = make_app()
    for call in (app.pause_schedule, app.resume_schedule, app.trigger_schedule, app.remove_schedule):
        with pytest.raises(UnknownSchedule, match="'nope'"):
            await call("nope")


async def test_overlap_skip_waits_for_the_previous_job(make_app: AppFactory) -> None:
    app = make_app(Schedule("o", every=1, performer=Tick, payload=at_payload))
    keeper = SchedulerKeeper(app)
    t0 = base_time()
    await keeper.run(await app.store(), t0)
    await keeper.run(await app.store(), t0 + 1)
    await keeper.run(await app.store(), t0 + 2)
    await keeper.run(await app.store(), t0 + 3)
    assert len(await schedule_jobs(app, "o")) == 1
    assert (await info(app, "o")).skipped == 2
    await app.drain()
    await keeper.run(await app.store(), t0 + 4)
    jobs = await schedule_jobs(app, "o")
    assert [j.unique_key for j in jobs] == [tick_key("o", t0 - 0.2 + 1), tick_key("o", t0 - 0.2 + 4)]


async def test_overlap_allow_does_not_wait(make_app: AppFactory) -> None:
    app = make_app(Schedule("a", every=1, performer=Tick, payload=at_payload, overlap="allow"))
    keeper = SchedulerKeeper(app)
    t0 = base_time()
    for step in range(4):
        await keeper.run(await app.store(), t0 + step)
    assert len(await schedule_jobs(app, "a")) == 3


@pytest.mark.parametrize(("catch_up", "expected"), [("latest", [10]), ("all", list(range(1, 11))), ("none", [])])
async def test_catch_up_after_downtime(make_app: AppFactory, catch_up: str, expected: list[int]) -> None:
    app = make_app(Schedule("c", every=1, performer=Tick, payload=at_payload, overlap="allow", catch_up=catch_up))
    keeper = SchedulerKeeper(app)
    t0 = base_time()
    await keeper.run(await app.store(), t0)
    await keeper.run(await app.store(), t0 + 10)  # nothing ran for ten ticks
    jobs = await schedule_jobs(app, "c")
    assert [j.unique_key for j in jobs] == [tick_key("c", t0 - 0.2 + n) for n in expected]
    await keeper.run(await app.store(), t0 + 11)  # and on time again afterwards
    assert (await schedule_jobs(app, "c"))[-1].unique_key == tick_key("c", t0 - 0.2 + 11)


async def test_a_failing_payload_function_is_recorded_and_the_schedule_goes_on(make_app: AppFactory) -> None:
    calls: list[datetime] = []

    def payload(t: datetime) -> dict[str, Any]:
        calls.append(t)
        if len(calls) == 1:
            raise ValueError("no report for this day")
        return {"at": t.isoformat()}

    app = make_app(Schedule("e", every=1, performer=Tick, payload=payload))
    keeper = SchedulerKeeper(app)
    t0 = base_time()
    await keeper.run(await app.store(), t0)
    await keeper.run(await app.store(), t0 + 1)
    listed = await info(app, "e")
    assert "ValueError: no report for this day" in (listed.last_error or "")
    assert listed.last_error_at is not None and await schedule_jobs(app, "e") == []
    await keeper.run(await app.store(), t0 + 2)
    assert len(await schedule_jobs(app, "e")) == 1


async def test_schedules_added_at_run_time_are_fired_by_every_worker_app(make_app: AppFactory) -> None:
    adder, worker_app = make_app(), make_app()
    keeper = SchedulerKeeper(worker_app)
    t0 = base_time()
    await keeper.run(await worker_app.store(), t0)
    added = await adder.add_schedule(Schedule("rt", every=1, performer=Tick, payload={"at": "fixed"}))
    assert added.origin == "runtime" and added.timing == "every 1 s"
    await keeper.run(await worker_app.store(), t0 + 2)
    jobs = await schedule_jobs(worker_app, "rt")
    assert len(jobs) == 1 and jobs[0].payload == {"at": "fixed"}
    with pytest.raises(jobloom.JobloomError, match="replace=True"):
        await adder.add_schedule(Schedule("rt", every=5, performer=Tick, payload={}))
    await adder.add_schedule(Schedule("rt", every=3600, performer=Tick, payload={}), replace=True)
    assert (await info(worker_app, "rt")).timing == "every 3600 s"
    await adder.remove_schedule("rt")
    assert all(i.name != "rt" for i in await worker_app.list_schedules())


async def test_run_time_schedules_must_be_storable(make_app: AppFactory) -> None:
    app = make_app(Schedule("code", every=60, performer=Tick, payload={}))
    with pytest.raises(InvalidSchedule, match="must be data"):
        await app.add_schedule(Schedule("fn", every=60, performer=Tick, payload=at_payload))
    with pytest.raises(InvalidSchedule, match="declared with the app"):
        await app.add_schedule(Schedule("code", every=60, performer=Tick, payload={}))
    with pytest.raises(jobloom.UnknownBinding):
        await app.add_schedule(Schedule("x", every=60, performer="Missing", payload={}))
    with pytest.raises(InvalidSchedule, match="declared with the app"):
        await app.remove_schedule("code")


async def test_listing_shows_next_and_last_runs(make_app: AppFactory) -> None:
    app = make_app(
        Schedule("daily", cron="0 3 * * *", performer=Tick, payload={}, timezone="Europe/Berlin"),
        Schedule("fast", every=timedelta(seconds=1), performer=Other, payload={}, catch_up="all", overlap="allow"),
    )
    before = {i.name: i for i in await app.list_schedules()}
    assert set(before) == {"daily", "fast"}
    daily = before["daily"]
    assert daily.origin == "code" and daily.timezone == "Europe/Berlin" and daily.target == "performer Tick"
    assert daily.next_run is not None and daily.next_run.astimezone(ZoneInfo("Europe/Berlin")).hour == 3
    assert daily.last_run is None and daily.fired == 0
    keeper = SchedulerKeeper(app)
    t0 = base_time()
    await keeper.run(await app.store(), t0)
    await keeper.run(await app.store(), t0 + 1)
    fast = await info(app, "fast")
    assert (fast.fired, fast.catch_up, fast.overlap) == (1, "all", "allow")
    assert fast.last_run is not None and fast.next_run is not None
    assert fast.next_run.timestamp() == t0 - 0.2 + 2


async def test_a_bare_app_lists_stored_schedules(make_app: AppFactory, store_url: str) -> None:
    app = make_app(Schedule("daily", cron="0 3 * * *", performer=Tick, payload={}))
    await SchedulerKeeper(app).run(await app.store(), time.time())
    bare = jobloom.App(store_url, auto_migrate=True)
    try:
        [listed] = await bare.list_schedules()
        assert listed.name == "daily" and listed.origin == "code" and listed.timing == "0 3 * * *"
        await bare.pause_schedule("daily")
        assert (await info(app, "daily")).paused
    finally:
        await bare.close()


async def test_a_schedule_can_start_a_flow(store_url: str) -> None:
    flow = jobloom.Flow("nightly")
    flow.node("tick", Tick)
    app = jobloom.App(store_url, performers=[Tick], flows=[flow],
                      schedules=[Schedule("f", every=1, flow=flow, input=at_payload)], auto_migrate=True)
    try:
        keeper = SchedulerKeeper(app)
        t0 = base_time()
        await keeper.run(await app.store(), t0)
        await keeper.run(await app.store(), t0 + 1)
        listed = await info(app, "f")
        assert listed.last_run_id == tick_key("f", t0 - 0.2 + 1) and listed.fired == 1
        run = await app.get_run(listed.last_run_id)
        assert run.flow == "nightly" and list(run.nodes) == ["tick"]
    finally:
        await app.close()


def test_the_command_line_lists_pauses_resumes_and_triggers(store_url: str, tmp_path: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import sys

    from typer.testing import CliRunner

    from jobloom.cli.main import cli

    (tmp_path / "schedapp.py").write_text(
        "import jobloom\n"
        "from tests.conformance.test_schedules import Tick\n"
        f"app = jobloom.App({store_url!r}, performers=[Tick], auto_migrate=True, schedules=[\n"
        "    jobloom.Schedule('nightly', cron='0 3 * * *', performer=Tick, payload={}, timezone='Europe/Berlin')])\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "schedapp", raising=False)
    runner = CliRunner()

    def invoke(*args: str, code: int = 0) -> str:
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.output

    invoke("migrate", "--app", "schedapp:app")  # the store must exist before anything lists it
    listed = json.loads(invoke("schedules", "list", "--app", "schedapp:app", "--json"))
    assert [(s["name"], s["timing"], s["paused"]) for s in listed] == [("nightly", "0 3 * * *", False)]
    assert json.loads(invoke("schedules", "pause", "nightly", "--app", "schedapp:app", "--json"))[0]["paused"]
    by_url = json.loads(invoke("schedules", "list", "--url", store_url, "--json"))
    assert by_url[0]["paused"] and by_url[0]["origin"] == "code"
    assert not json.loads(invoke("schedules", "resume", "nightly", "--url", store_url, "--json"))[0]["paused"]
    assert "queued" in invoke("schedules", "trigger", "nightly", "--app", "schedapp:app")
    assert "nightly" in invoke("schedules", "list", "--app", "schedapp:app")


@pytest.fixture
def store_url(pooled_store_url: str) -> str:
    """This module runs through PgBouncer (transaction pooling) too."""
    return pooled_store_url
