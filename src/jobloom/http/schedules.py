"""``/v1/schedules``: list the schedules, pause, resume and trigger one."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from fastapi.responses import Response

from jobloom.core.errors import UnknownBinding
from jobloom.core.types import Job, Run
from jobloom.http import schemas as s
from jobloom.http.context import Context, json_response
from jobloom.http.encode import dumps, job_json, plain, run_dict
from jobloom.http.jobs import ERRORS
from jobloom.schedules.schedule import UnknownSchedule

Name = Annotated[str, Path(description="The schedule's name.")]
MAX_SCHEDULE_NAME = 200


def _checked(name: str) -> str:
    if not name or len(name) > MAX_SCHEDULE_NAME or "\x00" in name:
        raise UnknownSchedule(name)
    return name


def router(ctx: Context) -> APIRouter:
    """The schedules routes."""
    api = APIRouter(prefix="/v1/schedules", tags=["schedules"], responses=ERRORS)
    read, operate = (ctx.guarded(n) for n in ("read", "operate"))
    app = ctx.app

    @api.get("", response_model=s.SchedulesOut, **read)
    async def list_schedules() -> Response:
        """Every schedule: the app's and those stored at run time, with next and last run."""
        return json_response(dumps({"schedules": plain(await app.list_schedules())}))

    @api.post("/{name}/pause", response_model=s.ScheduleOut, **operate)
    async def pause_schedule(name: Name) -> Response:
        """Stop firing a schedule until it is resumed."""
        return json_response(dumps(plain(await app.pause_schedule(_checked(name)))))

    @api.post("/{name}/resume", response_model=s.ScheduleOut, **operate)
    async def resume_schedule(name: Name) -> Response:
        """Fire a paused schedule again from its next tick."""
        return json_response(dumps(plain(await app.resume_schedule(_checked(name)))))

    @api.post("/{name}/trigger", status_code=201, response_model=s.TriggerOut, **operate)
    async def trigger_schedule(name: Name) -> Response:
        """Run a schedule now, paused or not: the job (or run) it made."""
        _checked(name)
        made: Any
        try:
            made = await app.trigger_schedule(name)
        except UnknownBinding as exc:
            if not ctx.named:
                raise
            await ctx.spec(exc.binding)  # a bare store: the schedule's binding by name
            made = await app.trigger_schedule(name)
        if isinstance(made, Job):
            return json_response(f'{{"job":{job_json(made)}}}'.encode(), 201)
        assert isinstance(made, Run)
        return json_response(dumps({"run": run_dict(made)}), 201)

    return api
