"""Schedules: named periodic triggers (cron or fixed interval) that enqueue a job or start a flow.

A :class:`Schedule` is checked when it is defined: a bad cron expression, an unknown time zone or
a contradictory set of arguments is refused there, with the offending text. Its *ticks* (the
moments it fires) come from :meth:`Schedule.next_tick` and :meth:`Schedule.prev_tick`:

* ``cron``: 5 fields (minute hour day-of-month month day-of-week), or 6 with a leading seconds
  field (``"*/10 * * * * *"``: every ten seconds), read in ``timezone``. Parsing is croniter's.
  A wall-clock time that occurs twice when clocks go back fires once if the expression names its
  hours; a time skipped when clocks go forward fires at the first moment after the gap.
* ``every``: a fixed interval; ticks fall on multiples of it since the Unix epoch, so
  ``every=timedelta(minutes=15)`` fires at :00, :15, :30 and :45 of every hour (UTC).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jobloom.core.errors import InvalidOption, JobloomError
from jobloom.core.text import check_meta, check_tags, name_problem
from jobloom.engine.enqueue import EnqueueOptions

Overlap = Literal["skip", "allow"]
CatchUp = Literal["latest", "all", "none"]
OVERLAPS: tuple[str, ...] = ("skip", "allow")
CATCH_UPS: tuple[str, ...] = ("latest", "all", "none")


class InvalidSchedule(InvalidOption):
    """A schedule definition that cannot be used (its message names the schedule and the bad text)."""

    def __init__(self, name: str, option: str, value: object, expected: str) -> None:
        self.schedule = name
        self.option = option
        self.value = value
        JobloomError.__init__(self, f"invalid {option} on schedule {name!r}: {value!r}; {expected}")


class UnknownSchedule(JobloomError):
    """No schedule of that name is declared with the app or stored in the store."""

    def __init__(self, name: str, known: list[str] | None = None) -> None:
        self.name = name
        hint = f"; known schedules: {', '.join(sorted(known))}" if known else ""
        super().__init__(f"unknown schedule {name!r}{hint}")


def _zone(name: str, timezone: object) -> ZoneInfo:
    if not isinstance(timezone, str) or not timezone:
        raise InvalidSchedule(name, "timezone", timezone, "expected an IANA time zone name such as 'Europe/Berlin'")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(
            name, "timezone", timezone, "expected an IANA time zone name such as 'Europe/Berlin'"
        ) from None


_ALIASES = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}


def _check_cron(name: str, expr: object, zone: ZoneInfo) -> tuple[str, bool]:
    """The expression for croniter, and whether it has a seconds field; refused with croniter's reason."""
    expected = "expected 5 fields (minute hour day month weekday), or 6 with a leading seconds field"
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidSchedule(name, "cron", expr, expected)
    text = _ALIASES.get(expr.strip().lower(), " ".join(expr.split()))
    fields = text.split()
    if len(fields) not in (5, 6):
        raise InvalidSchedule(name, "cron", expr, f"{expected} (it has {len(fields)})")
    seconds = len(fields) == 6
    for field_name, field_text in zip(("second", *_FIELDS) if seconds else _FIELDS, fields, strict=True):
        problem = _field_problem(field_name, field_text)
        if problem is not None:
            raise InvalidSchedule(name, "cron", expr, problem)
    from croniter import croniter  # type: ignore[import-untyped]  # cron schedules only: 6 MB

    try:
        it = croniter(text, datetime(2000, 1, 1, tzinfo=zone), second_at_beginning=seconds)
        it.get_next(datetime)
    except Exception as exc:  # croniter raises several ValueError and TypeError kinds
        reason = str(exc) or type(exc).__name__
        if "failed to find" in reason:
            reason = "it never matches a date"
        raise InvalidSchedule(name, "cron", expr, reason) from None
    return text, seconds


_FIELDS = ("minute", "hour", "day", "month", "weekday")
_MAX = {"second": 59, "minute": 59, "hour": 23, "day": 31, "month": 12, "weekday": 6}
_MIN = {"day": 1, "month": 1}
_NAMES = {
    "month": {m: i for i, m in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), 1)},
    "weekday": {d: i for i, d in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))},
}


def _field_problem(field_name: str, text: str) -> str | None:
    """Why one cron field is refused although croniter would read it somehow: a reversed range
    (``30-10``) or a step on a single value (``5/2``); ``None`` when it is fine."""
    for item in text.split(","):
        base, slash, step = item.partition("/")
        if slash and base != "*" and "-" not in base:
            return (f"the {field_name} field has {item!r}: a step goes with a range or '*' "
                    f"(e.g. '{base}-{_MAX[field_name]}/{step}' or '*/{step}')")
        low, dash, high = base.partition("-")
        names = _NAMES.get(field_name, {})
        least, most = _MIN.get(field_name, 0), 7 if field_name == "weekday" else _MAX[field_name]
        for value in (low, high) if dash else (low,):
            if value.isdigit() and not least <= int(value) <= most:
                return f"the {field_name} field has {value}: it goes from {least} to {most}"
        if dash:
            a = names.get(low.upper(), int(low) if low.isdigit() else None)
            b = names.get(high.upper(), int(high) if high.isdigit() else None)
            if a is not None and b is not None and a > b:
                return f"the {field_name} field has {item!r}: a range goes from low to high"
    return None


def _check_every(name: str, every: object) -> float:
    if isinstance(every, timedelta):
        secs = every.total_seconds()
    elif isinstance(every, int | float) and not isinstance(every, bool):
        secs = float(every)
    else:
        raise InvalidSchedule(name, "every", every, "expected a timedelta or seconds")
    if not secs >= 1 or secs != secs:
        raise InvalidSchedule(name, "every", every, "expected an interval of at least 1 second")
    if secs != int(secs):
        raise InvalidSchedule(name, "every", every, "expected a whole number of seconds")
    return secs


def _binding_of(performer: object) -> str:
    if isinstance(performer, str):
        return performer
    return str(getattr(performer, "binding", None) or getattr(performer, "__name__", repr(performer)))


@dataclass(frozen=True, eq=False)
class Schedule:
    """A named periodic trigger, declared with the app (``App(..., schedules=[...])``) or added at run time.

    ``Schedule("nightly-report", cron="0 3 * * *", performer=Report, payload={...},
    timezone="Europe/Berlin")``. Exactly one of ``cron`` and ``every`` gives the ticks; exactly one of
    ``performer`` (with ``payload``) and ``flow`` (with ``input``) says what each tick does. The
    payload (or input) may be a function of the tick, ``lambda scheduled_at: {...}``, called with
    an aware datetime in ``timezone``.

    ``overlap="skip"`` (default) makes no new job while the previous one is unfinished;
    ``"allow"`` always does. After downtime, ``catch_up="latest"`` (default) makes one job for
    the missed ticks (the latest), ``"all"`` one per missed tick, ``"none"`` none: only ticks that
    are on time fire.
    """

    name: str
    cron: str | None = None
    every: timedelta | float | None = None
    performer: Any = None
    payload: Any = None
    flow: Any = None
    input: Any = None
    timezone: str = "UTC"
    overlap: Overlap = "skip"
    catch_up: CatchUp = "latest"
    tags: Sequence[str] | None = None
    meta: dict[str, Any] | None = None
    _zone: ZoneInfo = field(init=False, repr=False)
    _expr: str = field(init=False, repr=False)
    _seconds_field: bool = field(init=False, repr=False)
    _names_hours: bool = field(init=False, repr=False)
    _interval: float | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        name = self.name
        if (not isinstance(name, str) or not name.strip() or len(name) > 200 or name != name.strip()
                or name_problem(name, 4 * 200) is not None):
            raise InvalidSchedule(str(name), "name", name, "expected a non-empty name of at most 200 characters, "
                                  "without surrounding spaces, control characters or lone surrogates")
        zone = _zone(name, self.timezone)
        object.__setattr__(self, "_zone", zone)
        if (self.cron is None) == (self.every is None):
            raise InvalidSchedule(name, "cron/every", (self.cron, self.every), "give exactly one of cron= and every=")
        if self.cron is not None:
            text, seconds = _check_cron(name, self.cron, zone)
            object.__setattr__(self, "cron", " ".join(self.cron.split()))
            object.__setattr__(self, "_expr", text)
            object.__setattr__(self, "_seconds_field", seconds)
            object.__setattr__(self, "_names_hours", text.split()[2 if seconds else 1] != "*")
            object.__setattr__(self, "_interval", None)
        else:
            object.__setattr__(self, "_expr", "")
            object.__setattr__(self, "_seconds_field", False)
            object.__setattr__(self, "_names_hours", False)
            object.__setattr__(self, "_interval", _check_every(name, self.every))
        if (self.performer is None) == (self.flow is None):
            raise InvalidSchedule(name, "performer/flow", (self.performer, self.flow),
                                  "give exactly one of performer= and flow=")
        if self.performer is not None and self.input is not None:
            raise InvalidSchedule(name, "input", self.input, "input= goes with flow=; a performer takes payload=")
        if self.flow is not None:
            if self.input is None:
                raise InvalidSchedule(name, "input", None, "a flow schedule needs input= (data, or a function of "
                                      "the tick), as a performer schedule needs payload=")
            if self.payload is not None:
                raise InvalidSchedule(name, "payload", self.payload,
                                      "payload= goes with performer=; a flow takes input=")
        if self.performer is not None and not isinstance(self.performer, str | type):
            raise InvalidSchedule(name, "performer", self.performer, "expected a Performer class or a binding name")
        if self.overlap not in OVERLAPS:
            raise InvalidSchedule(name, "overlap", self.overlap, "expected 'skip' or 'allow'")
        if self.catch_up not in CATCH_UPS:
            raise InvalidSchedule(name, "catch_up", self.catch_up, "expected 'latest', 'all' or 'none'")
        if self.flow is not None and (self.tags is not None or self.meta is not None):
            raise InvalidSchedule(name, "tags/meta", (self.tags, self.meta),
                                  "tags= and meta= go with performer= (a flow's nodes declare their own)")
        tags = check_tags(self.tags, f"schedule {name!r}")
        object.__setattr__(self, "tags", None if tags is None else list(tags))
        check_meta(self.meta, f"schedule {name!r}")

    def options(self, unique_key: str) -> EnqueueOptions:
        """The enqueue options of a tick's job: the tick as unique key, the schedule's tags and meta."""
        return EnqueueOptions(unique_key=unique_key, tags=self.tags, meta=self.meta)

    # -- what it does -------------------------------------------------------------------------------

    @property
    def binding(self) -> str | None:
        """The performer's binding name (None for a flow schedule)."""
        return None if self.performer is None else _binding_of(self.performer)

    @property
    def target(self) -> str:
        """What a tick runs, for people: ``performer Report`` or ``flow pipeline``."""
        if self.performer is not None:
            return f"performer {self.binding}"
        return f"flow {getattr(self.flow, 'name', None) or getattr(self.flow, '__name__', repr(self.flow))}"

    @property
    def timing(self) -> str:
        """The cron expression, or ``every N s``."""
        return self.cron if self.cron is not None else f"every {self._interval:g} s"

    def arguments(self, scheduled_at: datetime) -> Any:
        """The payload (or flow input) for a tick: calls it if it is a function of the tick."""
        value = self.payload if self.flow is None else self.input
        return value(scheduled_at) if callable(value) else value

    @property
    def stored_arguments(self) -> bool:
        """Whether the payload (or input) is data that can be stored (not a function)."""
        return not callable(self.payload if self.flow is None else self.input)

    # -- ticks ----------------------------------------------------------------------------------------

    def local(self, ts: float) -> datetime:
        """Epoch seconds as an aware datetime in the schedule's time zone."""
        return datetime.fromtimestamp(ts, self._zone)

    def next_tick(self, after: float) -> float:
        """The first tick strictly after ``after`` (epoch seconds)."""
        if self._interval is not None:
            return (after // self._interval + 1) * self._interval
        it = self._cron_iter(after)
        while True:
            t = it.get_next(datetime)
            if not self._repeated_wall_time(t):
                return float(t.timestamp())

    def prev_tick(self, at: float) -> float:
        """The latest tick at or before ``at`` (epoch seconds)."""
        if self._interval is not None:
            return (at // self._interval) * self._interval
        it = self._cron_iter(at + (1.0 if self._seconds_field else 60.0))
        while True:
            t = it.get_prev(datetime)
            if t.timestamp() <= at and not self._repeated_wall_time(t):
                return float(t.timestamp())

    def _cron_iter(self, start: float) -> Any:
        # whole seconds: croniter steps from the start's second, and must not skip a tick for a fraction
        base = datetime.fromtimestamp(start, self._zone).replace(microsecond=0)
        from croniter import croniter  # cron schedules only: 6 MB

        return croniter(self._expr, base, second_at_beginning=self._seconds_field)

    def _repeated_wall_time(self, t: datetime) -> bool:
        """Whether ``t`` is the second occurrence of its wall-clock time (clocks went back), for an
        expression that names its hours: such a schedule fires once per wall-clock time."""
        if not self._names_hours:
            return False
        local = t.astimezone(self._zone)
        first = local.replace(fold=0)
        return first.utcoffset() != local.utcoffset() and first.timestamp() < local.timestamp()

    # -- storage --------------------------------------------------------------------------------------

    def to_definition(self) -> dict[str, Any]:
        """The definition as plain JSON values (stored for listings and for run-time schedules)."""
        arguments = self.payload if self.flow is None else self.input
        return {
            "cron": self.cron, "every": self._interval, "timezone": self.timezone, "binding": self.binding,
            "flow": None if self.flow is None else self.target.removeprefix("flow "),
            "arguments": arguments if self.stored_arguments else None,
            "arguments_from_tick": not self.stored_arguments,
            "overlap": self.overlap, "catch_up": self.catch_up,
        } | ({"tags": self.tags} if self.tags else {}) | ({"meta": self.meta} if self.meta else {})

    def definition_json(self, payload_json: str | None = None) -> str:
        """The stored form; ``payload_json`` is the payload already encoded by its performer."""
        data = self.to_definition()
        if payload_json is not None:
            data["arguments"] = json.loads(payload_json)
        return json.dumps(data, sort_keys=True, default=str)

    @classmethod
    def from_definition(cls, name: str, text: str) -> Schedule:
        """A performer schedule rebuilt from its stored definition (run-time schedules)."""
        data = json.loads(text)
        if data.get("flow") is not None or data.get("arguments_from_tick"):
            raise InvalidSchedule(name, "definition", text, "only performer schedules with data payloads are stored")
        return cls(
            name, cron=data.get("cron"), every=data.get("every"), performer=data["binding"],
            payload=data.get("arguments"), timezone=data.get("timezone") or "UTC",
            overlap=data.get("overlap") or "skip", catch_up=data.get("catch_up") or "latest",
            tags=data.get("tags"), meta=data.get("meta"),
        )


PayloadFactory = Callable[[datetime], Any]

__all__ = ["CATCH_UPS", "OVERLAPS", "CatchUp", "InvalidSchedule", "Overlap", "Schedule", "UnknownSchedule"]
