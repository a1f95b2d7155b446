"""Schedule definitions: what is accepted, and what is refused at definition with the offending text."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import jobloom
from jobloom.schedules.schedule import InvalidSchedule, Schedule


class Report(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


def test_a_cron_schedule_with_its_defaults() -> None:
    s = Schedule("nightly-report", cron="0 3 * * *", performer=Report, payload={"day": "today"},
                 timezone="Europe/Berlin")
    assert s.binding == "Report"
    assert s.overlap == "skip" and s.catch_up == "latest"
    assert s.timing == "0 3 * * *" and s.target == "performer Report"
    assert s.stored_arguments


def test_an_interval_schedule_and_a_payload_function() -> None:
    s = Schedule("often", every=timedelta(seconds=30), performer="Report", payload=lambda t: {"at": t.isoformat()})
    assert s.timing == "every 30 s"
    assert not s.stored_arguments
    assert s.arguments(s.local(0.0)) == {"at": "1970-01-01T00:00:00+00:00"}


def test_six_fields_mean_a_leading_seconds_field() -> None:
    s = Schedule("fast", cron="*/10 * * * * *", performer=Report)
    assert s.next_tick(100.0) == 110.0


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"cron": "61 * * * *"}, "'61 * * * *'"),
    ({"cron": "* * * *"}, "it has 4"),
    ({"cron": "* * * * * * *"}, "it has 7"),
    ({"cron": "0 0 30 2 *"}, "never matches"),
    ({"cron": "0 3 * * mon-xyz"}, "'0 3 * * mon-xyz'"),
    ({"cron": ""}, "cron"),
    ({"cron": "0 3 * * *", "timezone": "Mars/Olympus_Mons"}, "'Mars/Olympus_Mons'"),
    ({"cron": "0 3 * * *", "timezone": ""}, "timezone"),
    ({"every": 0.5}, "at least 1 second"),
    ({"every": 1.5}, "whole number"),
    ({"every": "1m"}, "timedelta"),
    ({"cron": "* * * * *", "every": 5}, "exactly one of cron= and every="),
    ({}, "exactly one of cron= and every="),
    ({"cron": "* * * * *", "overlap": "queue"}, "'queue'"),
    ({"cron": "* * * * *", "catch_up": "some"}, "'some'"),
])
def test_invalid_definitions_are_refused_with_the_offending_text(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        Schedule("bad", performer=Report, **kwargs)
    assert fragment in str(info.value)
    assert "schedule 'bad'" in str(info.value)


def test_performer_or_flow_but_not_both_nor_neither() -> None:
    with pytest.raises(InvalidSchedule, match="exactly one of performer= and flow="):
        Schedule("x", cron="* * * * *")
    with pytest.raises(InvalidSchedule, match="input= goes with flow="):
        Schedule("x", cron="* * * * *", performer=Report, input={"a": 1})
    with pytest.raises(InvalidSchedule, match="name"):
        Schedule(" ", cron="* * * * *", performer=Report)


def test_invalid_schedule_is_an_invalid_option() -> None:
    with pytest.raises(jobloom.InvalidOption):
        Schedule("x", cron="nope", performer=Report)


def test_the_app_refuses_unknown_performers_bad_payloads_and_duplicate_names() -> None:
    with pytest.raises(jobloom.UnknownBinding):
        jobloom.App("sqlite:///unused.db", performers=[], schedules=[Schedule("x", cron="* * * * *", performer=Report)])

    class Typed(jobloom.Performer[int, None]):
        async def perform(self, payload: int) -> None:
            return None

    with pytest.raises(jobloom.InvalidPayload):
        jobloom.App("sqlite:///unused.db", performers=[Typed],
                    schedules=[Schedule("x", cron="* * * * *", performer=Typed, payload="not a number")])
    s = Schedule("x", cron="* * * * *", performer=Report, payload={})
    with pytest.raises(InvalidSchedule, match="two schedules"):
        jobloom.App("sqlite:///unused.db", performers=[Report], schedules=[s, s])


def test_stored_definitions_round_trip() -> None:
    s = Schedule("r", cron="15 4 * * 1-5", performer=Report, payload={"a": 1}, timezone="America/New_York",
                 overlap="allow", catch_up="all")
    back = Schedule.from_definition("r", s.definition_json())
    assert (back.cron, back.timezone, back.binding, back.payload, back.overlap, back.catch_up) == (
        "15 4 * * 1-5", "America/New_York", "Report", {"a": 1}, "allow", "all")
