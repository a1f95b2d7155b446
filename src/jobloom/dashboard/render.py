"""The dashboard's templates (Jinja2, autoescaped) and the filters they format values with: times with
their zone, ages, durations, JSON."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jinja2 import Environment, PackageLoader, select_autoescape

STATE_ORDER = ("queued", "scheduled", "waiting", "running", "failed", "stalled", "cancelled", "expired",
               "succeeded", "skipped")
"""States in the order the pages list them."""


def as_datetime(value: Any) -> datetime | None:
    """A datetime (aware) from a datetime or epoch seconds; None stays None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromtimestamp(float(value), UTC)


def when(value: Any, zone: str | None = None) -> str:
    """A moment with its time zone: ``2026-12-01 04:43:10 UTC`` (in ``zone`` when given)."""
    moment = as_datetime(value)
    if moment is None:
        return "—"
    if zone and zone != "UTC":
        try:
            local = moment.astimezone(ZoneInfo(zone))
            return local.strftime("%Y-%m-%d %H:%M:%S ") + f"{zone} (UTC{local.strftime('%z')})"
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(value: Any) -> str:
    """ISO 8601 for a ``<time datetime>`` attribute."""
    moment = as_datetime(value)
    return "" if moment is None else moment.isoformat()


def seconds(value: float | None) -> str:
    """A duration: ``850 ms``, ``4.2 s``, ``3 min 5 s``, ``2 h 4 min``."""
    if value is None:
        return "—"
    v = float(value)
    if abs(v) < 1:
        return f"{v * 1000:.3g} ms"
    if abs(v) < 60:
        return f"{v:.3g} s"
    if abs(v) < 3600:
        return f"{int(v // 60)} min {int(v % 60)} s"
    return f"{int(v // 3600)} h {int(v % 3600 // 60)} min"


def ago(value: Any, now: float | None = None) -> str:
    """How long ago (or in how long) a moment is: ``4.2 s ago``, ``in 3 min 5 s``."""
    moment = as_datetime(value)
    if moment is None:
        return "—"
    delta = (now if now is not None else time.time()) - moment.timestamp()
    return f"{seconds(delta)} ago" if delta >= 0 else f"in {seconds(-delta)}"


def pretty(value: Any) -> str:
    """JSON, indented."""
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def build_environment() -> Environment:
    """The templates of ``jobloom/dashboard/templates`` with the filters above."""
    env = Environment(loader=PackageLoader("jobloom.dashboard", "templates"), autoescape=select_autoescape(),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(when=when, iso=iso, seconds=seconds, ago=ago, pretty=pretty)
    env.globals["STATE_ORDER"] = STATE_ORDER
    return env


__all__ = ["STATE_ORDER", "ago", "as_datetime", "build_environment", "iso", "pretty", "seconds", "when"]
