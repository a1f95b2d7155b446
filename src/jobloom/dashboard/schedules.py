"""The schedules page: each schedule's next and last run (in its time zone), last job or run, skipped
ticks and last error; pause, resume and trigger."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobloom.core.types import Job, Run
from jobloom.dashboard.session import Session
from jobloom.dashboard.web import Dashboard, Form


def routes(d: Dashboard) -> list[Route]:
    """The schedules page, its live part, and pause, resume and trigger."""
    app = d.app

    async def page(request: Request, session: Session) -> Response:
        return d.html(request, "schedules.html", session, active="schedules", schedules=await app.list_schedules())

    async def live(request: Request, session: Session) -> Response:
        return d.html(request, "schedules_live.html", session, schedules=await app.list_schedules())

    async def pause(request: Request, session: Session, form: Form) -> Response:
        info = await app.pause_schedule(request.path_params["name"])
        return d.back(request, form, done=f"schedule {info.name} paused")

    async def resume(request: Request, session: Session, form: Form) -> Response:
        info = await app.resume_schedule(request.path_params["name"])
        return d.back(request, form, done=f"schedule {info.name} resumed")

    async def trigger(request: Request, session: Session, form: Form) -> Response:
        name = request.path_params["name"]
        made = await app.trigger_schedule(name)
        what = f"job {made.id}" if isinstance(made, Job) else f"run {made.id}" if isinstance(made, Run) else "it"
        return d.back(request, form, done=f"schedule {name} triggered: {what}")

    return [Route("/schedules", d.page(page)), Route("/schedules/live", d.page(live)),
            Route("/schedules/{name:path}/pause", d.action(pause), methods=["POST"]),
            Route("/schedules/{name:path}/resume", d.action(resume), methods=["POST"]),
            Route("/schedules/{name:path}/trigger", d.action(trigger), methods=["POST"])]
