"""Tick computation: cron and interval ticks, time zones and DST, and the catch-up policies."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from jobloom.schedules.planner import MISFIRE_GRACE, plan_ticks, tick_key
from jobloom.schedules.schedule import Schedule

BERLIN = ZoneInfo("Europe/Berlin")


def ts(*args: int, tz: Any = UTC) -> float:
    return datetime(*args, tzinfo=tz).timestamp()


def ticks(s: Schedule, start: float, n: int) -> list[datetime]:
    out, t = [], start
    for _ in range(n):
        t = s.next_tick(t)
        out.append(s.local(t))
    return out


def test_cron_ticks_are_read_in_the_time_zone() -> None:
    s = Schedule("n", cron="0 3 * * *", performer="P", timezone="Europe/Berlin")
    [first] = ticks(s, ts(2024, 1, 10, 12), 1)
    assert first == datetime(2024, 1, 11, 3, tzinfo=BERLIN)
    assert first.astimezone(UTC).hour == 2


def test_next_tick_is_strictly_after_and_prev_tick_at_or_before() -> None:
    s = Schedule("m", cron="*/5 * * * *", performer="P")
    at = ts(2024, 1, 1, 10, 5)
    assert s.next_tick(at) == ts(2024, 1, 1, 10, 10)
    assert s.prev_tick(at) == at
    assert s.prev_tick(at - 0.5) == ts(2024, 1, 1, 10, 0)
    assert s.next_tick(at - 0.5) == at


def test_seconds_field_ticks_every_second() -> None:
    s = Schedule("s", cron="* * * * * *", performer="P")
    assert s.next_tick(1000.25) == 1001.0
    assert s.prev_tick(1000.25) == 1000.0


def test_interval_ticks_fall_on_multiples_since_the_epoch() -> None:
    s = Schedule("i", every=timedelta(minutes=15), performer="P")
    assert s.local(s.next_tick(ts(2024, 1, 1, 10, 7, 30))) == datetime(2024, 1, 1, 10, 15, tzinfo=UTC)
    assert s.prev_tick(ts(2024, 1, 1, 10, 15)) == ts(2024, 1, 1, 10, 15)


def test_a_wall_time_skipped_when_clocks_go_forward_fires_once_after_the_gap() -> None:
    s = Schedule("d", cron="30 2 * * *", performer="P", timezone="Europe/Berlin")
    got = ticks(s, ts(2024, 3, 30, 12, tz=BERLIN), 3)
    assert [t.date().day for t in got] == [31, 1, 2]
    assert got[0] == datetime(2024, 3, 31, 3, 0, tzinfo=BERLIN)


def test_a_wall_time_repeated_when_clocks_go_back_fires_once_for_named_hours() -> None:
    s = Schedule("d", cron="30 2 * * *", performer="P", timezone="Europe/Berlin")
    got = ticks(s, ts(2024, 10, 26, 12, tz=BERLIN), 3)
    assert [t.strftime("%m-%d %H:%M") for t in got] == ["10-27 02:30", "10-28 02:30", "10-29 02:30"]
    assert s.prev_tick(ts(2024, 10, 27, 4, tz=BERLIN)) == got[0].timestamp()


def test_sub_hourly_schedules_keep_elapsed_time_through_the_repeated_hour() -> None:
    s = Schedule("h", cron="*/30 * * * *", performer="P", timezone="Europe/Berlin")
    got = ticks(s, ts(2024, 10, 27, 1, 50, tz=BERLIN), 5)
    gaps = {b.timestamp() - a.timestamp() for a, b in itertools.pairwise(got)}
    assert gaps == {1800.0}


def every_second(**kw: Any) -> Schedule:
    return Schedule("t", every=1, performer="P", **kw)


def test_nothing_due_before_the_next_tick() -> None:
    plan = plan_ticks(every_second(), 100.0, 100.7)
    assert plan.fire == [] and plan.handled == 100.0 and plan.next_run == 101.0


def test_one_due_tick_fires_in_every_policy() -> None:
    for catch_up in ("latest", "all", "none"):
        plan = plan_ticks(every_second(catch_up=catch_up), 100.0, 101.02)
        assert plan.fire == [101.0], catch_up
        assert plan.handled == 101.0 and plan.next_run == 102.0


def test_catch_up_latest_fires_one_job_for_the_missed_ticks() -> None:
    plan = plan_ticks(every_second(catch_up="latest"), 100.0, 110.5)
    assert plan.fire == [110.0] and plan.handled == 110.0 and plan.next_run == 111.0


def test_catch_up_all_fires_every_missed_tick_in_bounded_passes() -> None:
    s = every_second(catch_up="all")
    plan = plan_ticks(s, 100.0, 110.5)
    assert plan.fire == [float(t) for t in range(101, 111)]
    big = plan_ticks(s, 100.0, 500.5, limit=50)
    assert big.fire == [float(t) for t in range(101, 151)]
    assert big.handled == 150.0 and big.next_run == 151.0  # due again at once
    rest = plan_ticks(s, big.handled, 500.5, limit=1000)
    assert rest.fire[0] == 151.0 and rest.fire[-1] == 500.0


def test_catch_up_none_fires_only_a_tick_that_is_on_time() -> None:
    s = Schedule("t", every=60, performer="P", catch_up="none")
    assert plan_ticks(s, 540.0, 600.0 + 5).fire == [600.0]
    assert plan_ticks(s, 540.0, 600.0 + 59.5).fire == [600.0]  # within min(grace, period)
    hourly = Schedule("h", every=3600, performer="P", catch_up="none")
    late = plan_ticks(hourly, 3600.0, 7200.0 + MISFIRE_GRACE + 1)
    assert late.fire == [] and late.handled == 7200.0 and late.next_run == 10800.0


def test_catch_up_none_after_downtime_waits_for_the_next_tick() -> None:
    plan = plan_ticks(every_second(catch_up="none"), 100.0, 110.5)
    assert plan.fire == [] and plan.handled == 110.0 and plan.next_run == 111.0
    assert plan_ticks(every_second(catch_up="none"), plan.handled, 111.01).fire == [111.0]


def test_tick_keys_are_utc_and_stable() -> None:
    assert tick_key("nightly", ts(2024, 5, 1, 3)) == "schedule:nightly:2024-05-01T03:00:00Z"


@pytest.mark.parametrize("expr", ["@daily", "@hourly", "@weekly"])
def test_aliases(expr: str) -> None:
    s = Schedule("a", cron=expr, performer="P")
    assert s.next_tick(ts(2024, 1, 1, 0, 30)) > ts(2024, 1, 1, 0, 30)
