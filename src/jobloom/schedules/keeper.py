"""Firing schedules: the housekeeper that fires due ticks (planned by :mod:`jobloom.schedules.planner`).

Every worker runs a :class:`SchedulerKeeper`; exactly one job is made per tick however many do.
The schedule's row in ``jobloom_schedules`` is the authority: a keeper plans from the row's
``last_tick`` outside any transaction (the payload functions are the user's code), then, in one
write transaction, locks the row, checks that ``last_tick`` is still what it planned from (else
another worker got there first and it does nothing), enqueues and moves ``last_tick`` on. The tick
is also the job's unique key (``schedule:NAME:2024-05-01T03:00:00Z``), a second line of defence.

Flows are started with ``App.start(flow, input, id=<the same key>)``, which returns the existing
run for an id it has seen, before the row is moved on: a crash in between starts the same run again,
which is harmless.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobloom.core.errors import JobloomError
from jobloom.core.queries import Q
from jobloom.core.rows import StoredScheduleRow
from jobloom.core.states import FINISHED_STATES
from jobloom.core.text import MAX_ERROR_BYTES, storable_text
from jobloom.engine import coordinator
from jobloom.engine.enqueue import build_job
from jobloom.engine.jobs import NewJob
from jobloom.schedules.planner import TickPlan, plan_ticks, tick_key
from jobloom.schedules.schedule import InvalidSchedule, Schedule

if TYPE_CHECKING:
    from jobloom.schedules.host import ScheduleHost
    from jobloom.store.base import Store, Tx

log = logging.getLogger("jobloom.schedules")

REFRESH = 5.0  # how often a worker re-reads the schedules (pause, resume, add from other processes)


# -- rows and listings --------------------------------------------------------------------------------


async def save_state(tx: Tx, row: StoredScheduleRow, now: float) -> None:
    """Store the row's firing state (``save_schedule_state``: everything but origin, definition and pause)."""
    state = {k: v for k, v in row._asdict().items() if k not in ("origin", "definition", "paused")}
    await tx.execute(Q.save_schedule_state, {**state, "now": now})


async def read_rows(store: Store) -> dict[str, StoredScheduleRow]:
    """Every stored schedule row, by name."""

    async def work(tx: Tx) -> list[StoredScheduleRow]:
        return await tx.fetch(Q.list_schedule_rows)

    return {r.name: r for r in await store.transact(work, exclusive=False)}


# -- firing -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Firing:
    schedule: Schedule
    row: StoredScheduleRow
    plan: TickPlan
    jobs: list[tuple[float, NewJob | str]] = field(default_factory=list)  # a job, or why there is none
    runs: list[tuple[float, str | None]] = field(default_factory=list)  # flow ticks: run id, or an error


class SchedulerKeeper:
    """The housekeeper that fires the app's schedules (declared in code or added at run time)."""

    name = "schedules"

    def __init__(self, host: ScheduleHost, refresh: float = REFRESH) -> None:
        self.host = host
        self.refresh = refresh
        self.synced = False
        self._due: dict[str, float] = {}
        self._refresh_at = 0.0
        self._runtime: dict[str, tuple[str, Schedule]] = {}

    def invalidate(self) -> None:
        """Re-read the schedules at the next pass (after a change made in this process)."""
        self._refresh_at = 0.0

    async def next_due(self, store: Store, now: float) -> float | None:
        """The earliest tick of an active schedule, or the next re-read (kept in memory)."""
        if not self.synced:
            return now
        return min([self._refresh_at, *self._due.values()])

    async def planned(self, store: Store, now: float) -> float | None:
        """The earliest tick of an active schedule (``now`` until the schedules were read)."""
        if not self.synced:
            return now
        return min(self._due.values(), default=None)

    async def run(self, store: Store, now: float) -> bool:
        """Fire the due ticks; return True if jobs were made."""
        app = self.host
        if not self.synced:
            await sync_code_schedules(app, store, now)
            self.synced = True
        rows = await read_rows(store)
        active = self._active(app, rows)
        self._due = {name: s.next_tick(rows[name].last_tick or now) for name, s in active.items()}
        self._refresh_at = now + self.refresh
        due = [name for name, when in self._due.items() if when <= now]
        if not due:
            return False
        firings = [self._prepare(app, active[name], rows[name], now) for name in due]
        made = await self._fire(app, store, firings, now)
        for f in firings:
            self._due[f.schedule.name] = f.plan.next_run
        return made

    def _active(self, app: ScheduleHost, rows: dict[str, StoredScheduleRow]) -> dict[str, Schedule]:
        """Unpaused schedules this app can fire: its own, and run-time ones for its performers."""
        out: dict[str, Schedule] = {}
        for name, row in rows.items():
            if row.paused:
                continue
            if name in app.schedules:
                out[name] = app.schedules[name]
                continue
            if row.origin != "runtime":
                continue
            cached = self._runtime.get(name)
            if cached is None or cached[0] != row.definition:
                try:
                    cached = (row.definition, Schedule.from_definition(name, row.definition))
                except JobloomError as exc:
                    log.warning("schedule %s cannot be read (%s)", name, exc)
                    continue
                self._runtime[name] = cached
            if cached[1].binding in app.specs:
                out[name] = cached[1]
        return out

    def _prepare(self, app: ScheduleHost, schedule: Schedule, row: StoredScheduleRow, now: float) -> _Firing:
        plan = plan_ticks(schedule, row.last_tick if row.last_tick is not None else now, now)
        firing = _Firing(schedule, row, plan)
        for tick in plan.fire:
            key = tick_key(schedule.name, tick)
            try:
                arguments = schedule.arguments(schedule.local(tick))
                if schedule.flow is None:
                    spec = app.spec(schedule.binding or "")
                    firing.jobs.append((tick, build_job(spec, arguments, schedule.options(key), now)))
                else:
                    firing.runs.append((tick, key))
            except Exception as exc:
                firing.jobs.append((tick, f"{type(exc).__name__}: {exc}"))
        return firing

    async def _fire(self, app: ScheduleHost, store: Store, firings: list[_Firing], now: float) -> bool:
        for f in firings:
            if f.runs:
                await _start_runs(app, f, now)

        async def work(tx: Tx) -> bool:
            made = False
            for f in firings:
                current = await tx.fetchone(Q.lock_schedule_row, {"name": f.schedule.name})
                if current is None:
                    continue
                if current.paused or current.last_tick != f.row.last_tick:
                    continue  # paused meanwhile, or another worker handled these ticks
                made = await _apply(tx, f, current, now) or made
            return made

        return await store.transact(work)


async def _unfinished_job(tx: Tx, job_id: int | None) -> bool:
    if job_id is None:
        return False
    row = await tx.fetchone(Q.schedule_job_state, {"id": job_id})
    return row is not None and row.state not in FINISHED_STATES  # a pruned job is finished


async def _apply(tx: Tx, f: _Firing, row: StoredScheduleRow, now: float) -> bool:
    """Enqueue the planned jobs under the row lock and move the row on."""
    made = False
    for tick, job in f.jobs:
        if isinstance(job, str):
            error = storable_text(f"tick {tick_key(f.schedule.name, tick)}: {job}", MAX_ERROR_BYTES)
            row = row._replace(last_error=error, last_error_at=now)
            log.warning("schedule %s could not fire: %s", f.schedule.name, job)
            continue
        if f.schedule.overlap == "skip" and await _unfinished_job(tx, row.last_job_id):
            row = row._replace(skipped=row.skipped + 1)
            continue
        [(job_id, created)] = await coordinator.enqueue(tx, [job], now)
        row = row._replace(last_job_id=job_id, last_run_at=now, fired=row.fired + (1 if created else 0))
        made = made or created
    for _tick, run_id in f.runs:
        if run_id is None:
            row = row._replace(skipped=row.skipped + 1)
        else:
            row = row._replace(last_run_id=run_id, last_run_at=now, fired=row.fired + 1)
    await save_state(tx, row._replace(last_tick=f.plan.handled, next_run=f.plan.next_run), now)
    return made


async def _start_runs(app: ScheduleHost, f: _Firing, now: float) -> None:
    """Start the flow runs of the planned ticks (idempotent by run id), honouring ``overlap``."""
    last = f.row.last_run_id
    done: list[tuple[float, str | None]] = []
    for tick, run_id in f.runs:
        assert run_id is not None
        try:
            if f.schedule.overlap == "skip" and last is not None:
                previous = await app.get_run(last)
                if previous.state == "running":
                    done.append((tick, None))
                    continue
            arguments = f.schedule.arguments(f.schedule.local(tick))
            await app.start(flow_of(app, f.schedule), arguments, id=run_id)
            done.append((tick, run_id))
            last = run_id
        except Exception as exc:
            f.jobs.append((tick, f"{type(exc).__name__}: {exc}"))
    f.runs = done


def flow_of(app: ScheduleHost, schedule: Schedule) -> Any:
    """The app's flow that ``schedule`` starts; ``InvalidSchedule`` if the app has no flow of that name."""
    flow = schedule.flow
    name = flow if isinstance(flow, str) else getattr(flow, "name", None)
    flows = app.flows
    if not isinstance(name, str) or name not in flows:
        raise InvalidSchedule(schedule.name, "flow", flow, f"not one of the app's flows ({', '.join(sorted(flows))})")
    return flows[name]


async def sync_code_schedules(app: ScheduleHost, store: Store, now: float) -> None:
    """Store a row for each schedule declared with the app (state kept; a changed definition replaced)."""
    rows = []
    for s in app.schedules.values():
        rows.append({"name": s.name, "origin": "code", "definition": s.definition_json(),
                     "last_tick": now, "next_run": s.next_tick(now), "now": now})

    async def work(tx: Tx) -> None:
        await tx.executemany(Q.sync_code_schedule, rows)

    if rows:
        await store.transact(work)




