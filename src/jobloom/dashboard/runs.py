"""The runs pages: runs by flow and state, and a run's page with its DAG drawn (each node linking to
its job, fan-out children summarized); cancel and resume."""

from __future__ import annotations

from collections import Counter
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobloom.core.errors import JobloomError
from jobloom.core.states import RUN_FINISHED_STATES
from jobloom.core.types import NodeState, Run
from jobloom.dashboard import reads
from jobloom.dashboard.dag import DagNode, render_dag_svg
from jobloom.dashboard.session import Session
from jobloom.dashboard.web import Dashboard, Form

PAGE_SIZE = 50
"""Runs per page."""
RUN_STATES = ("running", "cancelling", "failing", "succeeded", "failed", "cancelled")
"""The states a run filter offers."""


def _parent(name: str) -> str | None:
    """The node a fan-out child (``resize:3``) or a spawned child (``resize/x``) belongs to."""
    for sep in (":", "/"):
        if sep in name:
            return name.split(sep, 1)[0]
    return None


def children_summary(children: list[NodeState]) -> str:
    """``"5 children: 3 succeeded, 2 running"``."""
    counts = Counter(c.state for c in children)
    parts = ", ".join(f"{n} {state}" for state, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f"{len(children)} child{'ren' if len(children) != 1 else ''}: {parts}"


def dag_of(graph: dict[str, list[str]], run: Run, base: str) -> str:
    """The run's DAG as SVG: one box per node of its graph, coloured by the node's state."""
    children: dict[str, list[NodeState]] = {}
    for name, node in run.nodes.items():
        parent = _parent(name)
        if parent is not None and name not in graph:
            children.setdefault(parent, []).append(node)
    nodes = []
    for name in graph:
        state = run.nodes.get(name)
        kids = children.get(name)
        nodes.append(DagNode(
            key=name, label=name, state=state.state if state else "waiting",
            href=f"{base}/jobs/{state.job_id}" if state else None,
            summary=children_summary(kids) if kids else None,
        ))
    edges = [(up, name) for name, ups in graph.items() for up in ups]
    return render_dag_svg(nodes, edges)


async def run_values(d: Dashboard, run_id: str, base: str) -> dict[str, Any] | None:
    """What a run's page shows; None if there is no such run."""
    row = await reads.run_row(await d.app.store(), run_id)
    if row is None:
        return None
    run = await d.app.get_run(run_id)
    graph = reads.graph_of(row)
    nodes = sorted(run.nodes.values(), key=lambda n: n.job_id)
    return {"run": run, "svg": dag_of(graph, run, base), "nodes": nodes, "finished": run.state in RUN_FINISHED_STATES,
            "can_resume": run.state in ("failed", "cancelled"), "can_cancel": run.state not in RUN_FINISHED_STATES}


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
