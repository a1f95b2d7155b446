"""Planning a schedule's ticks: which are due now, which were missed, and the key each tick's job
gets. Pure functions of the schedule, its last tick and the time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from jobloom.schedules.schedule import Schedule

MISFIRE_GRACE = 60.0  # catch_up="none": a tick later than this (or than its period) is missed


MAX_TICKS_PER_RUN = 100  # catch_up="all": ticks fired per pass; the rest on the next pass


@dataclass(frozen=True, slots=True)
class TickPlan:
    """What to do for one schedule now: ticks to fire (oldest first), and the new state."""

    fire: list[float]
    handled: float  # the latest tick dealt with (fired or passed over): the new ``last_tick``
    next_run: float  # when the schedule is next due (may be <= now when ``"all"`` has more to fire)


def plan_ticks(schedule: Schedule, last_tick: float, now: float, *, limit: int = MAX_TICKS_PER_RUN) -> TickPlan:
    """The ticks of ``schedule`` in ``(last_tick, now]`` to fire, under its ``catch_up`` policy.

    ``"all"`` fires every tick, at most ``limit`` per call; ``"latest"`` fires only the latest one
    (one job for a stretch of missed ticks); ``"none"`` fires a tick only if it is on time: no tick
    before it was missed, and it is no later than ``min(MISFIRE_GRACE, its period)``; after
    downtime, firing resumes with the next tick.
    """
    latest = schedule.prev_tick(now)
    if latest <= last_tick:
        return TickPlan([], last_tick, schedule.next_tick(max(last_tick, now)))
    if schedule.catch_up == "all":
        ticks: list[float] = []
        t = schedule.next_tick(last_tick)
        while t <= now and len(ticks) < limit:
            ticks.append(t)
            t = schedule.next_tick(t)
        return TickPlan(ticks, ticks[-1], t)
    following = schedule.next_tick(latest)
    if schedule.catch_up == "none":
        missed_some = schedule.next_tick(last_tick) < latest
        if missed_some or now - latest > min(MISFIRE_GRACE, following - latest):
            return TickPlan([], latest, following)
    return TickPlan([latest], latest, following)


def tick_key(name: str, tick: float) -> str:
    """The unique key of a tick's job (and the id of a tick's flow run)."""
    return f"schedule:{name}:{datetime.fromtimestamp(tick, UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"
