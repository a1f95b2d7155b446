"""The schedule operations of :class:`jobloom.App`: add, remove, pause, resume, trigger and list
schedules, reading and writing their rows in ``jobloom_schedules``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jobloom.core.errors import JobloomError
from jobloom.core.queries import Q
from jobloom.core.rows import StoredScheduleRow
from jobloom.engine import coordinator
from jobloom.engine.enqueue import build_job
from jobloom.schedules.keeper import SchedulerKeeper, flow_of, read_rows, save_state
from jobloom.schedules.schedule import InvalidSchedule, Schedule, UnknownSchedule


class _Default:
    """The payload of a trigger given none: the schedule's own."""

    def __repr__(self) -> str:
        return "<the schedule's payload>"


DEFAULT: Any = _Default()
"""``trigger_schedule``'s payload when none is given: the schedule's own."""

if TYPE_CHECKING:
    from jobloom.schedules.host import ScheduleHost
    from jobloom.store.base import Store, Tx


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """One schedule as :meth:`jobloom.App.list_schedules` shows it."""

    name: str
    origin: str  # where it was defined: "code" (declared with an app) or "runtime" (added with add_schedule)
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


def _info(name: str, schedule: Schedule | None, row: StoredScheduleRow | None, origin: str, now: float) -> ScheduleInfo:
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


def check_schedules(host: ScheduleHost, schedules: Iterable[Schedule]) -> dict[str, Schedule]:
    """The schedules declared with an app, checked (names, performers, flows, payloads) and by name."""
    out: dict[str, Schedule] = {}
    for s in schedules:
        if not isinstance(s, Schedule):
            raise InvalidSchedule(str(s), "schedules", s, "expected jobloom.Schedule objects")
        if s.name in out:
            raise InvalidSchedule(s.name, "name", s.name, "two schedules have this name")
        if s.flow is not None:
            flow_of(host, s)
        else:
            spec = host.spec(s.binding or "")
            if s.stored_arguments:
                spec.dump_payload(s.payload)  # a bad payload is refused now, not at the first tick
        out[s.name] = s
    return out


class ScheduleOps:
    """The schedule operations of an app (``App.add_schedule``, ``App.list_schedules``, ...), and the
    housekeeper that fires its schedules."""

    def __init__(self, host: ScheduleHost) -> None:
        self.host = host
        self.keeper = SchedulerKeeper(host)

    @property
    def schedules(self) -> Mapping[str, Schedule]:
        """The schedules declared with the app."""
        return self.host.schedules

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
        spec = self.host.spec(schedule.binding or "")
        definition = schedule.definition_json(spec.dump_payload(schedule.payload))
        store = await self.host.store()
        now = store.now()

        async def work(tx: Tx) -> None:
            existing = await tx.fetchone(Q.lock_schedule_row, {"name": schedule.name})
            if existing is not None and not replace:
                raise JobloomError(f"schedule {schedule.name!r} exists; add_schedule(..., replace=True) replaces it")
            if existing is not None:
                await tx.execute(Q.replace_runtime_schedule,
                                 {"name": schedule.name, "definition": definition, "now": now})
                return
            await tx.execute(Q.insert_schedule_row, {
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
        store = await self.host.store()

        async def work(tx: Tx) -> int:
            return await tx.execute(Q.delete_schedule_row, {"name": name})

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

    async def trigger_schedule(self, name: str, payload: Any = DEFAULT) -> Any:
        """Run a schedule now, paused or not, whatever its overlap policy: returns the job (or flow run).
        ``payload``: the job's payload (or the run's input) instead of the schedule's."""
        store = await self.host.store()
        now = store.now()
        row = await self._ensure_row(store, name, now)
        schedule = self.schedules.get(name) or _runtime_schedule(name, row)
        key = f"schedule:{name}:manual:{datetime.fromtimestamp(now, UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}"
        arguments = schedule.arguments(schedule.local(now)) if payload is DEFAULT else payload
        if schedule.flow is not None:
            run = await self.host.start(flow_of(self.host, schedule), arguments, id=key)

            async def record_run(tx: Tx) -> None:
                current = await tx.fetchone(Q.lock_schedule_row, {"name": name})
                assert current is not None
                await save_state(tx, current._replace(last_run_id=key, last_run_at=now, fired=current.fired + 1), now)

            await store.transact(record_run)
            return run
        job = build_job(self.host.spec(schedule.binding or ""), arguments, schedule.options(key), now)

        async def work(tx: Tx) -> int:
            current = await tx.fetchone(Q.lock_schedule_row, {"name": name})
            assert current is not None
            [(job_id, _)] = await coordinator.enqueue(tx, [job], now)
            await save_state(tx, current._replace(last_job_id=job_id, last_run_at=now, fired=current.fired + 1), now)
            return job_id

        job_id = await store.transact(work)
        await store.notify()
        return await self.host.get_job(job_id)

    async def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule: the app's and the stored ones, with next run, last run and last error."""
        store = await self.host.store()
        rows = await read_rows(store)
        now = store.now()
        out = []
        for name in sorted(set(rows) | set(self.schedules)):
            row = rows.get(name)
            schedule = self.schedules.get(name)
            # where it was defined, the same whichever app or bare store lists it
            origin = "code" if schedule is not None else row.origin if row is not None else "code"
            out.append(_info(name, schedule, row, origin, now))
        return out

    # -- helpers ------------------------------------------------------------------------------------

    async def _schedule_info(self, name: str) -> ScheduleInfo:
        for info in await self.list_schedules():
            if info.name == name:
                return info
        raise UnknownSchedule(name, sorted(self.schedules))

    async def _schedules_changed(self, store: Store) -> None:
        self.keeper.invalidate()
        await store.notify()

    async def _ensure_row(self, store: Store, name: str, now: float) -> StoredScheduleRow:
        schedule = self.schedules.get(name)

        async def work(tx: Tx) -> StoredScheduleRow | None:
            if schedule is not None:
                await tx.execute(Q.insert_schedule_row, {
                    "name": name, "origin": "code", "definition": schedule.definition_json(), "last_tick": now,
                    "next_run": schedule.next_tick(now), "now": now,
                })
            return await tx.fetchone(Q.get_schedule_row, {"name": name})

        row = await store.transact(work)
        if row is None:
            raise UnknownSchedule(name, sorted(self.schedules))
        return row

    async def _set_paused(self, name: str, paused: bool) -> None:
        store = await self.host.store()
        now = store.now()
        await self._ensure_row(store, name, now)

        async def work(tx: Tx) -> None:
            row = await tx.fetchone(Q.lock_schedule_row, {"name": name})
            assert row is not None
            if bool(row.paused) == paused:
                return
            timing = self.schedules.get(name) or _timing_only(name, row.definition)
            # resuming starts from now: the ticks missed while paused are not owed
            last_tick = row.last_tick if paused else now
            next_run = None if paused or timing is None else timing.next_tick(now)
            await tx.execute(Q.set_schedule_paused,
                             {"name": name, "paused": paused, "last_tick": last_tick, "next_run": next_run, "now": now})

        await store.transact(work)
        await self._schedules_changed(store)


def _runtime_schedule(name: str, row: StoredScheduleRow) -> Schedule:
    if row.origin != "runtime":
        raise JobloomError(f"schedule {name!r} is declared by another app: trigger it through that app")
    return Schedule.from_definition(name, row.definition)
