"""The runs pages: runs by flow and state, and a run's page with its DAG drawn (each node linking to
its job, fan-out children summarized); cancel and resume."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobloom.core.errors import JobloomError
from jobloom.core.states import RUN_FINISHED_STATES, RUN_RESUMABLE_STATES
from jobloom.dashboard.dag import flow_dag, render_dag_svg
from jobloom.dashboard.session import Session
from jobloom.dashboard.web import Dashboard, Form
from jobloom.flows.runs import RunNotFound

PAGE_SIZE = 50
"""Runs per page."""
RUN_STATES = ("running", "cancelling", "failing", "succeeded", "failed", "cancelled")
"""The states a run filter offers."""


async def run_values(d: Dashboard, run_id: str, base: str) -> dict[str, Any] | None:
    """What a run's page shows (its DAG drawn, its nodes); None if there is no such run."""
    try:
        run = await d.app.get_run(run_id)
    except RunNotFound:
        return None
    nodes, edges = flow_dag(run, job_href=lambda job_id: f"{base}/jobs/{job_id}")
    listed = sorted(run.nodes.values(), key=lambda n: n.job_id)
    return {"run": run, "page_url": f"/runs/{quote(run.id)}", "svg": render_dag_svg(nodes, edges), "nodes": listed,
            "finished": run.state in RUN_FINISHED_STATES, "can_resume": run.state in RUN_RESUMABLE_STATES,
            "can_cancel": run.state not in RUN_FINISHED_STATES}


def routes(d: Dashboard) -> list[Route]:
    """The runs list, a run's page and live part, cancel and resume."""
    app = d.app

    async def listing(request: Request, session: Session) -> Response:
        q = request.query_params
        flow, state, before = (q.get("flow") or None), (q.get("state") or None), (q.get("before") or None)
        problem: str | None = None
        try:
            runs = await app.list_runs(flow, state, PAGE_SIZE + 1, before=before)
        except JobloomError as exc:
            runs, problem = [], str(exc).splitlines()[0]
        more = len(runs) > PAGE_SIZE
        runs = runs[:PAGE_SIZE]
        kept = {k: v for k, v in (("flow", flow), ("state", state)) if v}
        next_url = "/runs?" + urlencode({**kept, "before": runs[-1].id}) if more and runs else None
        values: dict[str, Any] = {"runs": runs, "flows": sorted(app.flows), "flow": flow or "", "state": state or "",
                                  "states": RUN_STATES, "next_url": next_url}
        if problem:
            values["problem"] = problem
        return d.html(request, "runs.html", session, active="runs", **values)

    async def page(request: Request, session: Session) -> Response:
        run_id = request.path_params["run_id"]
        values = await run_values(d, run_id, d.url(request, ""))
        if values is None:
            return d.html(request, "missing.html", session, 404, active="runs", what=f"run {run_id}")
        return d.html(request, "run.html", session, active="runs", **values)

    async def live(request: Request, session: Session) -> Response:
        run_id = request.path_params["run_id"]
        values = await run_values(d, run_id, d.url(request, ""))
        if values is None:
            return d.html(request, "missing.html", session, 404, what=f"run {run_id}")
        return d.html(request, "run_live.html", session, **values)

    async def cancel(request: Request, session: Session, form: Form) -> Response:
        run = await app.cancel_run(request.path_params["run_id"])
        return d.back(request, form, done=f"run {run.id} is {run.state}")

    async def resume(request: Request, session: Session, form: Form) -> Response:
        run = await app.resume_run(request.path_params["run_id"])
        return d.back(request, form, done=f"run {run.id} resumed: {run.state}")

    return [Route("/runs", d.page(listing)), Route("/runs/{run_id:path}/live", d.page(live)),
            Route("/runs/{run_id:path}/cancel", d.action(cancel), methods=["POST"]),
            Route("/runs/{run_id:path}/resume", d.action(resume), methods=["POST"]),
            Route("/runs/{run_id:path}", d.page(page))]
