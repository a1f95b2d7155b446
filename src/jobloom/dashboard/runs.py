"""The runs pages: runs by flow and state with their duration and jobs per state, and a run's page with
its DAG drawn (each node linking to its job), its result, duration and jobs per state, fan-out children
counted by state and listed a page at a time, and why a fan-out with failed children succeeded; cancel
and resume."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobloom.core.errors import JobloomError
from jobloom.core.states import RUN_FINISHED_STATES, RUN_RESUMABLE_STATES
from jobloom.core.types import NodeState
from jobloom.dashboard import reads
from jobloom.dashboard.dag import flow_dag, render_dag_svg
from jobloom.dashboard.session import Session
from jobloom.dashboard.web import Dashboard, Form

PAGE_SIZE = 50
"""Runs per page."""
RUN_STATES = ("running", "cancelling", "failing", "succeeded", "failed", "cancelled")
"""The states a run filter offers."""


CHILD_PAGE = 100
"""Fan-out or spawned children listed per page on a run's page (the others are counted by state)."""
FAILED = frozenset({"failed", "stalled", "cancelled"})


@dataclass(frozen=True, slots=True)
class Group:
    """A node's fan-out or spawned children: how many in each state, and the page of them listed."""

    node: str
    total: int
    states: list[tuple[str, int]]
    page: list[NodeState]
    page_no: int
    pages: int

    @property
    def failed(self) -> int:
        """Children that ended without succeeding (failed, stalled or cancelled)."""
        return sum(n for s, n in self.states if s in FAILED)


def run_facts(view: reads.RunView, now: float, shown: str | None = None, page_no: int = 1) -> dict[str, Any]:
    """What a run's page shows of its nodes: the flow's own nodes, each node's children counted by state
    (``shown``'s children listed: page ``page_no`` of :data:`CHILD_PAGE`, read as such), the jobs per
    state, the run's duration, and its result (the results of the nodes nothing depends on)."""
    run = view.run
    tops = sorted(run.nodes.values(), key=lambda n: n.job_id)
    groups = []
    for name, states in sorted(view.children.items()):
        total = sum(states.values())
        pages = max(1, -(-total // CHILD_PAGE))
        at = min(max(1, page_no), pages) if name == shown else 1
        groups.append(Group(name, total, states.most_common(), view.page if name == shown else [], at, pages))
    counts: Counter[str] = Counter(n.state for n in tops)
    for states in view.children.values():
        counts.update(states)
    upstream = {u for ups in run.graph.values() for u in ups}
    end = run.finished_at.timestamp() if run.finished_at else now
    return {"tops": tops, "groups": groups, "counts": counts.most_common(),
            "duration": max(0.0, end - run.created_at.timestamp()),
            "result": {n.name: n.result for n in tops if n.name not in upstream and n.state == "succeeded"},
            "failed_children": [g for g in groups if g.failed and run.nodes.get(g.node) is not None
                                and run.nodes[g.node].state == "succeeded"]}


async def run_values(d: Dashboard, run_id: str, base: str, shown: str | None = None,
                     page_no: int = 1) -> dict[str, Any] | None:
    """What a run's page shows (its DAG drawn, its nodes); None if there is no such run. The run's children
    are counted and paged by the store, never read all at once."""
    store = await d.app.store()
    view = await reads.run_view(store, run_id, shown, (max(1, page_no) - 1) * CHILD_PAGE, CHILD_PAGE)
    if view is None:
        return None
    run = view.run
    nodes, edges = flow_dag(run, job_href=lambda job_id: f"{base}/jobs/{job_id}", counted=view.children)
    return {"run": run, "page_url": f"/runs/{quote(run.id)}", "svg": render_dag_svg(nodes, edges),
            "finished": run.state in RUN_FINISHED_STATES, "can_resume": run.state in RUN_RESUMABLE_STATES,
            "can_cancel": run.state not in RUN_FINISHED_STATES, "shown": shown,
            **run_facts(view, store.now(), shown, page_no)}


def _page_no(text: str | None) -> int:
    return int(text) if text and text.isdigit() and 0 < int(text) < 10**9 else 1


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
        now = (await app.store()).now()
        facts = {r.id: (Counter(n.state for n in r.nodes.values()).most_common(),
                        max(0.0, (r.finished_at.timestamp() if r.finished_at else now) - r.created_at.timestamp()))
                 for r in runs}
        values: dict[str, Any] = {"runs": runs, "flows": sorted(app.flows), "flow": flow or "", "state": state or "",
                                  "states": RUN_STATES, "next_url": next_url, "facts": facts}
        if problem:
            values["problem"] = problem
        return d.html(request, "runs.html", session, active="runs", **values)

    async def page(request: Request, session: Session) -> Response:
        run_id, q = request.path_params["run_id"], request.query_params
        values = await run_values(d, run_id, d.url(request, ""), q.get("node") or None, _page_no(q.get("page")))
        if values is None:
            return d.html(request, "missing.html", session, 404, active="runs", what=f"run {run_id}")
        return d.html(request, "run.html", session, active="runs", **values)

    async def live(request: Request, session: Session) -> Response:
        run_id, q = request.path_params["run_id"], request.query_params
        values = await run_values(d, run_id, d.url(request, ""), q.get("node") or None, _page_no(q.get("page")))
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
