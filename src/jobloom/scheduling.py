"""Firing schedules: which ticks are due (a pure function), and the housekeeper that fires them.

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

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from . import coordinator
from .client import EnqueueOptions, build_job
from .coordinator import NewJob
from .errors import JobloomError
from .schedule import InvalidSchedule, Schedule, UnknownSchedule
from .states import FINISHED_STATES
from .text import MAX_ERROR_BYTES, storable_text

if TYPE_CHECKING:
    from .app import App
    from .housekeeping import Housekeeper
    from .performer import PerformerSpec
    from .store.base import Store, Tx
    from .types import Job

log = logging.getLogger("jobloom.schedules")

REFRESH = 5.0  # how often a worker re-reads the schedules (pause, resume, add from other processes)
MISFIRE_GRACE = 60.0  # catch_up="none": a tick later than this (or than its period) is missed
MAX_TICKS_PER_RUN = 100  # catch_up="all": ticks fired per pass; the rest on the next pass
_COLUMNS = ("name", "origin", "definition", "paused", "last_tick", "next_run", "last_run_at", "last_job_id",
            "last_run_id", "last_error", "last_error_at", "fired", "skipped")


# -- the pure part ------------------------------------------------------------------------------------


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


# -- rows and listings --------------------------------------------------------------------------------


@dataclass(slots=True)
class ScheduleRow:
    """A schedule's stored state (``jobloom_schedules``)."""

    name: str
    origin: str
    definition: str
    paused: bool
    last_tick: float | None
    next_run: float | None
    last_run_at: float | None
    last_job_id: int | None
    last_run_id: str | None
    last_error: str | None
    last_error_at: float | None
    fired: int
    skipped: int

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> ScheduleRow:
        """From a row of the ``*_schedule_row(s)`` queries."""
        values = dict(zip(_COLUMNS, row, strict=True))
        values["paused"] = bool(values["paused"])
        return cls(**values)

    def state(self) -> dict[str, Any]:
        """The parameters of ``save_schedule_state``."""
        return {k: getattr(self, k) for k in _COLUMNS if k not in ("origin", "definition", "paused")}


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """One schedule as :meth:`SchedulingMixin.list_schedules` shows it."""

    name: str
    origin: str  # "code" (declared with the app), "runtime" (added with add_schedule) or "stored"
    timing: str
    timezone: str
    target: str
    overlap: str
    catch_up: str
    paused: bool
    next_run: datetime | None
    last_run: datetime | None
    last_job_id: int | None
    last_run_id: str | None
    last_error: str | None
    last_error_at: datetime | None
    fired: int
    skipped: int


def _dt(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def _timing_only(name: str, definition: str) -> Schedule | None:
    """A schedule with the stored timing, to compute ticks where the definition is not known in code."""
    try:
        data = json.loads(definition)
        return Schedule(name, cron=data.get("cron"), every=data.get("every"), performer=data.get("binding") or "?",
                        timezone=data.get("timezone") or "UTC")
    except (JobloomError, ValueError, TypeError):
        return None


def _info(name: str, schedule: Schedule | None, row: ScheduleRow | None, origin: str, now: float) -> ScheduleInfo:
    data = json.loads(row.definition) if row is not None else schedule.to_definition() if schedule else {}
    timing = schedule if schedule is not None else _timing_only(name, row.definition) if row else None
    next_run = None
    if timing is not None and not (row is not None and row.paused):
        next_run = timing.next_tick(row.last_tick if row is not None and row.last_tick is not None else now)
    target = schedule.target if schedule is not None else (
        f"performer {data.get('binding')}" if data.get("binding") else f"flow {data.get('flow')}")
    return ScheduleInfo(
        name=name, origin=origin, timing=timing.timing if timing else "?",
        timezone=data.get("timezone") or "UTC", target=target, overlap=data.get("overlap") or "skip",
        catch_up=data.get("catch_up") or "latest", paused=bool(row and row.paused), next_run=_dt(next_run),
        last_run=_dt(row.last_run_at if row else None), last_job_id=row.last_job_id if row else None,
        last_run_id=row.last_run_id if row else None, last_error=row.last_error if row else None,
        last_error_at=_dt(row.last_error_at if row else None), fired=row.fired if row else 0,
        skipped=row.skipped if row else 0,
    )


async def read_rows(store: Store) -> dict[str, ScheduleRow]:
    """Every stored schedule row, by name."""

    async def work(tx: Tx) -> list[tuple[Any, ...]]:
        return await tx.fetch("list_schedule_rows")

    return {r[0]: ScheduleRow.from_row(r) for r in await store.transact(work, exclusive=False)}


# -- firing -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Firing:
    schedule: Schedule
    row: ScheduleRow
    plan: TickPlan
    jobs: list[tuple[float, NewJob | str]] = field(default_factory=list)  # a job, or why there is none
    runs: list[tuple[float, str | None]] = field(default_factory=list)  # flow ticks: run id, or an error


class SchedulerKeeper:
    """The housekeeper that fires the app's schedules (declared in code or added at run time)."""

    name = "schedules"

    def __init__(self, refresh: float = REFRESH) -> None:
        self.refresh = refresh
        self.synced = False
        self._due: dict[str, float] = {}
        self._refresh_at = 0.0
        self._runtime: dict[str, tuple[str, Schedule]] = {}

    def invalidate(self) -> None:
        """Re-read the schedules at the next pass (after a change made in this process)."""
        self._refresh_at = 0.0

    async def next_due(self, app: App, now: float) -> float | None:
        """The earliest tick of an active schedule, or the next re-read (kept in memory)."""
        if not self.synced:
            return now
        return min([self._refresh_at, *self._due.values()])

    async def run(self, app: App, now: float) -> bool:
        """Fire the due ticks; return True if jobs were made."""
        store = await app.store()
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

    def _active(self, app: App, rows: dict[str, ScheduleRow]) -> dict[str, Schedule]:
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

    def _prepare(self, app: App, schedule: Schedule, row: ScheduleRow, now: float) -> _Firing:
        plan = plan_ticks(schedule, row.last_tick if row.last_tick is not None else now, now)
        firing = _Firing(schedule, row, plan)
        for tick in plan.fire:
            key = tick_key(schedule.name, tick)
            try:
                arguments = schedule.arguments(schedule.local(tick))
                if schedule.flow is None:
                    spec = app.spec(schedule.binding or "")
                    firing.jobs.append((tick, build_job(spec, arguments, EnqueueOptions(unique_key=key), now)))
                else:
                    firing.runs.append((tick, key))
            except Exception as exc:
                firing.jobs.append((tick, f"{type(exc).__name__}: {exc}"))
        return firing

    async def _fire(self, app: App, store: Store, firings: list[_Firing], now: float) -> bool:
        for f in firings:
            if f.runs:
                await _start_runs(app, f, now)

        async def work(tx: Tx) -> bool:
            made = False
            for f in firings:
                current = await tx.fetchone("lock_schedule_row", {"name": f.schedule.name})
                if current is None:
                    continue
                row = ScheduleRow.from_row(current)
                if row.paused or row.last_tick != f.row.last_tick:
                    continue  # paused meanwhile, or another worker handled these ticks
                made = await _apply(tx, f, row, now) or made
            return made

        return await store.transact(work)


async def _unfinished_job(tx: Tx, job_id: int | None) -> bool:
    if job_id is None:
        return False
    row = await tx.fetchone("schedule_job_state", {"id": job_id})
    return row is not None and row[0] not in FINISHED_STATES  # a pruned job is finished


async def _apply(tx: Tx, f: _Firing, row: ScheduleRow, now: float) -> bool:
    """Enqueue the planned jobs under the row lock and move the row on."""
    made = False
    for tick, job in f.jobs:
        if isinstance(job, str):
            row.last_error = storable_text(f"tick {tick_key(f.schedule.name, tick)}: {job}", MAX_ERROR_BYTES)
            row.last_error_at = now
            log.warning("schedule %s could not fire: %s", f.schedule.name, job)
            continue
        if f.schedule.overlap == "skip" and await _unfinished_job(tx, row.last_job_id):
            row.skipped += 1
            continue
        [(job_id, created)] = await coordinator.enqueue(tx, [job], now)
        row.last_job_id, row.last_run_at = job_id, now
        row.fired += 1 if created else 0
        made = made or created
    for _tick, run_id in f.runs:
        if run_id is None:
            row.skipped += 1
        else:
            row.last_run_id, row.last_run_at = run_id, now
            row.fired += 1
    row.last_tick, row.next_run = f.plan.handled, f.plan.next_run
    await tx.execute("save_schedule_state", {**row.state(), "now": now})
    return made


async def _start_runs(app: App, f: _Firing, now: float) -> None:
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
            await app.start(_flow_of(app, f.schedule), arguments, id=run_id)
            done.append((tick, run_id))
            last = run_id
        except Exception as exc:
            f.jobs.append((tick, f"{type(exc).__name__}: {exc}"))
    f.runs = done


def _flow_of(app: App, schedule: Schedule) -> Any:
    flow = schedule.flow
    name = flow if isinstance(flow, str) else getattr(flow, "name", None)
    flows: dict[str, Any] = getattr(app, "flows", {}) or {}
    if name not in flows:
        raise InvalidSchedule(schedule.name, "flow", flow, f"not one of the app's flows ({', '.join(sorted(flows))})")
    return flows[name]


async def sync_code_schedules(app: App, store: Store, now: float) -> None:
    """Store a row for each schedule declared with the app (state kept; a changed definition replaced)."""
    rows = []
    for s in app.schedules.values():
        rows.append({"name": s.name, "origin": "code", "definition": s.definition_json(),
                     "last_tick": now, "next_run": s.next_tick(now), "now": now})

    async def work(tx: Tx) -> None:
        await tx.executemany("sync_code_schedule", rows)

    if rows:
        await store.transact(work)


# -- the App's schedule API -------------------------------------------------------------------------


class SchedulingMixin:
    """Schedule and stats methods of :class:`jobloom.App` (mixed in; see ``_init_scheduling``)."""

    if TYPE_CHECKING:
        specs: dict[str, PerformerSpec]
        housekeepers: list[Housekeeper]

        async def store(self) -> Store:
            """The app's store (see App)."""

        def spec(self, performer: Any) -> PerformerSpec:
            """A performer's spec (see App)."""

        async def get_job(self, job_id: int) -> Job:
            """A job (see App)."""

    schedules: dict[str, Schedule]
    scheduler: SchedulerKeeper

    def _init_scheduling(self, schedules: Iterable[Schedule] = ()) -> None:
        """Check the declared schedules and register the housekeepers (called by ``App.__init__``)."""
        from .projector import Projector
        from .retention import RetentionKeeper

        self.schedules = {}
        for s in schedules:
            if not isinstance(s, Schedule):
                raise InvalidSchedule(str(s), "schedules", s, "expected jobloom.Schedule objects")
            if s.name in self.schedules:
                raise InvalidSchedule(s.name, "name", s.name, "two schedules have this name")
            self._check_schedule(s)
            self.schedules[s.name] = s
        self.scheduler = SchedulerKeeper()
        self.housekeepers.extend([self.scheduler, RetentionKeeper(), Projector()])

    def _check_schedule(self, s: Schedule) -> None:
        if s.flow is not None:
            _flow_of(self, s)  # type: ignore[arg-type]
        else:
            spec = self.spec(s.binding or "")
            if s.stored_arguments:
                spec.dump_payload(s.payload)  # a bad payload is refused now, not at the first tick

    async def add_schedule(self, schedule: Schedule, *, replace: bool = False) -> ScheduleInfo:
        """Add a schedule at run time: stored, so every worker of the store fires it (within seconds).

        Its payload must be data (a function cannot be stored), and its performer one of the app's.
        A schedule of that name already stored is refused unless ``replace=True`` (its state is kept).
        """
        if schedule.flow is not None:
            raise InvalidSchedule(schedule.name, "flow", schedule.flow,
                                  "schedules added at run time enqueue a performer; declare flow schedules "
                                  "with the app")
        if not schedule.stored_arguments:
            raise InvalidSchedule(schedule.name, "payload", schedule.payload,
                                  "a schedule added at run time is stored: its payload must be data, not a function")
        if schedule.name in self.schedules:
            raise InvalidSchedule(schedule.name, "name", schedule.name, "a schedule declared with the app has it")
        spec = self.spec(schedule.binding or "")
        definition = schedule.definition_json(spec.dump_payload(schedule.payload))
        store = await self.store()
        now = store.now()

        async def work(tx: Tx) -> None:
            existing = await tx.fetchone("lock_schedule_row", {"name": schedule.name})
            if existing is not None and not replace:
                raise JobloomError(f"schedule {schedule.name!r} exists; add_schedule(..., replace=True) replaces it")
            if existing is not None:
                await tx.execute("replace_runtime_schedule",
                                 {"name": schedule.name, "definition": definition, "now": now})
                return
            await tx.execute("insert_schedule_row", {
                "name": schedule.name, "origin": "runtime", "definition": definition, "last_tick": now,
                "next_run": schedule.next_tick(now), "now": now,
            })

        await store.transact(work)
        await self._schedules_changed(store)
        return await self._schedule_info(schedule.name)

    async def remove_schedule(self, name: str) -> None:
        """Remove a schedule added at run time (one declared with the app is paused instead)."""
        if name in self.schedules:
            raise InvalidSchedule(name, "name", name, "declared with the app: remove it there, or pause it")
        store = await self.store()

        async def work(tx: Tx) -> int:
            return await tx.execute("delete_schedule_row", {"name": name})

        if not await store.transact(work):
            raise UnknownSchedule(name, sorted(self.schedules))
        await self._schedules_changed(store)

    async def pause_schedule(self, name: str) -> ScheduleInfo:
        """Stop firing a schedule (a job already made runs on) until :meth:`resume_schedule`."""
        await self._set_paused(name, True)
        return await self._schedule_info(name)

    async def resume_schedule(self, name: str) -> ScheduleInfo:
        """Fire a paused schedule again from its next tick (ticks while paused are not made up)."""
        await self._set_paused(name, False)
        return await self._schedule_info(name)

    async def trigger_schedule(self, name: str) -> Any:
        """Run a schedule now, paused or not, whatever its overlap policy: returns the job (or flow run)."""
        store = await self.store()
        now = store.now()
        row = await self._ensure_row(store, name, now)
        schedule = self.schedules.get(name) or _runtime_schedule(name, row)
        key = f"schedule:{name}:manual:{datetime.fromtimestamp(now, UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}"
        arguments = schedule.arguments(schedule.local(now))
        if schedule.flow is not None:
            run = await self.start(_flow_of(self, schedule), arguments, id=key)  # type: ignore[attr-defined,arg-type]

            async def record_run(tx: Tx) -> None:
                current = await tx.fetchone("lock_schedule_row", {"name": name})
                assert current is not None
                r = ScheduleRow.from_row(current)
                r.last_run_id, r.last_run_at, r.fired = key, now, r.fired + 1
                await tx.execute("save_schedule_state", {**r.state(), "now": now})

            await store.transact(record_run)
            return run
        job = build_job(self.spec(schedule.binding or ""), arguments, EnqueueOptions(unique_key=key), now)

        async def work(tx: Tx) -> int:
            current = await tx.fetchone("lock_schedule_row", {"name": name})
            assert current is not None
            r = ScheduleRow.from_row(current)
            [(job_id, _)] = await coordinator.enqueue(tx, [job], now)
            r.last_job_id, r.last_run_at, r.fired = job_id, now, r.fired + 1
            await tx.execute("save_schedule_state", {**r.state(), "now": now})
            return job_id

        job_id = await store.transact(work)
        await store.notify()
        return await self.get_job(job_id)

    async def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule: the app's and the stored ones, with next run, last run and last error."""
        store = await self.store()
        rows = await read_rows(store)
        now = store.now()
        out = []
        for name in sorted(set(rows) | set(self.schedules)):
            row = rows.get(name)
            schedule = self.schedules.get(name)
            origin = "code" if schedule is not None else row.origin if row is not None else "code"
            if schedule is None and row is not None and row.origin == "code":
                origin = "stored"  # declared by another version or app: this app does not know it
            out.append(_info(name, schedule, row, origin, now))
        return out

    async def stats(self, binding: str | None = None, since: Any = None) -> Any:
        """Counts and run-time percentiles from the read model (see :func:`jobloom.projector.read_stats`)."""
        from .projector import read_stats

        return await read_stats(await self.store(), binding=binding, since=since)

    # -- helpers ------------------------------------------------------------------------------------

    async def _schedule_info(self, name: str) -> ScheduleInfo:
        for info in await self.list_schedules():
            if info.name == name:
                return info
        raise UnknownSchedule(name, sorted(self.schedules))

    async def _schedules_changed(self, store: Store) -> None:
        self.scheduler.invalidate()
        await store.notify()

    async def _ensure_row(self, store: Store, name: str, now: float) -> ScheduleRow:
        schedule = self.schedules.get(name)

        async def work(tx: Tx) -> tuple[Any, ...] | None:
            if schedule is not None:
                await tx.execute("insert_schedule_row", {
                    "name": name, "origin": "code", "definition": schedule.definition_json(), "last_tick": now,
                    "next_run": schedule.next_tick(now), "now": now,
                })
            return await tx.fetchone("get_schedule_row", {"name": name})

        row = await store.transact(work)
        if row is None:
            raise UnknownSchedule(name, sorted(self.schedules))
        return ScheduleRow.from_row(row)

    async def _set_paused(self, name: str, paused: bool) -> None:
        store = await self.store()
        now = store.now()
        await self._ensure_row(store, name, now)

        async def work(tx: Tx) -> None:
            current = await tx.fetchone("lock_schedule_row", {"name": name})
            assert current is not None
            row = ScheduleRow.from_row(current)
            if row.paused == paused:
                return
            timing = self.schedules.get(name) or _timing_only(name, row.definition)
            # resuming starts from now: the ticks missed while paused are not owed
            last_tick = row.last_tick if paused else now
            next_run = None if paused or timing is None else timing.next_tick(now)
            await tx.execute("set_schedule_paused",
                             {"name": name, "paused": paused, "last_tick": last_tick, "next_run": next_run, "now": now})

        await store.transact(work)
        await self._schedules_changed(store)


def _runtime_schedule(name: str, row: ScheduleRow) -> Schedule:
    if row.origin != "runtime":
        raise JobloomError(f"schedule {name!r} is declared by another app: trigger it through that app")
    return Schedule.from_definition(name, row.definition)


__all__ = ["REFRESH", "ScheduleInfo", "ScheduleRow", "SchedulerKeeper", "SchedulingMixin", "TickPlan", "plan_ticks",
           "tick_key"]
