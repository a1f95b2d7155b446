"""``/v1/runs``: start a run of one of the app's flows, read runs, cancel and resume them."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from jobloom.core.errors import InvalidOption, JobloomError
from jobloom.core.text import MAX_KEY_BYTES, MAX_NAME_BYTES, check_name
from jobloom.core.types import Run
from jobloom.flows.flow import UNSET, Flow, FlowError
from jobloom.flows.runs import RunNotFound
from jobloom.http import schemas as s
from jobloom.http.context import Context, json_response
from jobloom.http.encode import dumps, run_dict
from jobloom.http.jobs import ERRORS, reads

RunState = Literal["running", "cancelling", "failing", "succeeded", "failed", "cancelled"]
RunId = Annotated[str, Path(description="The run's id.")]


def router(ctx: Context) -> APIRouter:
    """The runs routes."""
    api = APIRouter(prefix="/v1/runs", tags=["runs"], responses=ERRORS)
    read, enqueue, operate = (ctx.guarded(n) for n in ("read", "enqueue", "operate"))
    app = ctx.app

    @api.post("", status_code=201, response_model=s.RunOut | s.RunStartedOut, **enqueue,
              responses={200: {"model": s.RunStartedOut, "description": "A run with that id existed (to a token "
                                                                        "without read)"}})
    async def start_run(request: Request, body: s.RunBody) -> Response:
        """Start a run of the app's flow ``flow`` (the same ``id`` again returns the same run). A token
        without ``read`` gets the run's id and state only (``RunStartedOut``), 200 if it existed."""
        check_name("flow", body.flow, MAX_NAME_BYTES)
        flow = app.flows.get(body.flow)
        if body.definition is not None:
            flow = await _given(body.flow, body.definition)
        elif flow is None:
            known = ", ".join(sorted(app.flows)) or "none (serve the app with --app to start runs)"
            err = FlowError(f"unknown flow {body.flow!r}; this app's flows: {known}")
            err.api_field = "flow"  # type: ignore[attr-defined]
            raise err
        if reads(request.state.token):
            run = await start(flow, body)
            return json_response(dumps(run_dict(run)), 201)
        existed = body.id is not None and await run_exists(body.id)
        if not existed:
            run = await start(flow, body)
        else:
            run = await app.get_run(check_name("id", body.id or "", MAX_KEY_BYTES))
        shown = {"id": run.id, "flow": run.flow, "state": run.state, "existed": existed}
        return json_response(dumps(shown), 200 if existed else 201)

    async def start(flow: Flow, body: s.RunBody) -> Run:
        try:
            return await app.start(flow, body.input, id=body.id, deadline=body.deadline)
        except (FlowError, InvalidOption) as exc:
            if body.definition is not None and getattr(exc, "api_field", None) is None:
                exc.api_field = "definition"  # type: ignore[union-attr]
            raise

    async def _given(name: str, definition: s.FlowDefinition) -> Flow:
        """The flow a request gives as data, its bindings checked (a bare store's: by their stored rules)."""
        for i, node in enumerate(definition.nodes):
            try:
                spec = await ctx.spec(node.binding)
            except JobloomError as exc:
                exc.api_field = f"definition.nodes[{i}].binding"  # type: ignore[attr-defined]
                raise
            given = [("payload", node.payload)] if "payload" in node.model_fields_set else []
            given += [(f"items[{j}]", item) for j, item in enumerate(node.items or [])]
            for where, value in given:  # every payload now, not when its node would run
                try:
                    spec.validate_payload(value, check_keys=False)
                except JobloomError as exc:
                    exc.api_field = f"definition.nodes[{i}].{where}"  # type: ignore[attr-defined]
                    raise
        return flow_of(name, definition)

    async def run_exists(run_id: str) -> bool:
        try:
            await app.get_run(check_name("id", run_id, MAX_KEY_BYTES))
        except RunNotFound:
            return False
        return True

    @api.get("", response_model=s.RunsOut, **read)
    async def list_runs(
        flow: Annotated[str | None, Query(description="Only runs of this flow.")] = None,
        state: Annotated[RunState | None, Query(description="Only runs in this state.")] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        cursor: Annotated[str | None, Query(description="The next_cursor of the page before.")] = None,
    ) -> Response:
        """Runs, newest first; follow ``next_cursor`` for the next page (null: this was the last)."""
        if flow is not None:
            check_name("flow", flow, MAX_NAME_BYTES)
        if cursor is not None:
            check_name("cursor", cursor, MAX_KEY_BYTES)
        runs = await app.list_runs(flow, state, limit + 1, before=cursor)
        more = len(runs) > limit
        page = runs[:limit]
        return json_response(dumps({"runs": [run_dict(r) for r in page], "next_cursor": page[-1].id if more else None}))

    @api.get("/{run_id}", response_model=s.RunOut, **read)
    async def get_run(run_id: RunId) -> Response:
        """One run with its nodes."""
        check_name("id", run_id, MAX_KEY_BYTES)
        return json_response(dumps(run_dict(await app.get_run(run_id))))

    @api.post("/{run_id}/cancel", response_model=s.RunOut, **operate)
    async def cancel_run(run_id: RunId) -> Response:
        """Cancel a run: unstarted nodes at once, running ones are asked to stop."""
        check_name("id", run_id, MAX_KEY_BYTES)
        return json_response(dumps(run_dict(await app.cancel_run(run_id))))

    @api.post("/{run_id}/resume", response_model=s.RunOut, **operate)
    async def resume_run(run_id: RunId) -> Response:
        """Run a failed or cancelled run again, keeping the nodes that succeeded."""
        check_name("id", run_id, MAX_KEY_BYTES)
        return json_response(dumps(run_dict(await app.resume_run(run_id))))

    return api


_OPTIONS = ("priority", "max_attempts", "delivery", "concurrency_key", "delay", "tags", "meta")


def flow_of(name: str, definition: s.FlowDefinition) -> Flow:
    """A :class:`Flow` of the nodes and edges a request gives; a node that cannot be made names its field."""
    flow = _named(name)
    ups = {n.name: list(n.after) for n in definition.nodes}
    for i, (up, down) in enumerate(definition.edges):
        if down not in ups:
            raise _at(FlowError(f"edge {[up, down]!r} ends at {down!r}, which is not a node of the definition"),
                      f"definition.edges[{i}]")
        ups[down].append(up)
    for i, n in enumerate(definition.nodes):
        options = {k: v for k in _OPTIONS if (v := getattr(n, k)) is not None}
        after = list(dict.fromkeys(ups[n.name]))
        policy = n.on_upstream_failure or "skip"
        given = "payload" in n.model_fields_set
        try:
            if n.on_failure:
                if after or given or n.items is not None or n.on_upstream_failure is not None:
                    raise FlowError(f"node {n.name!r}: an on_failure node takes no after, edge, payload, items "
                                    "or on_upstream_failure")
                flow.on_failure(n.binding, name=n.name, **options)
            elif n.items is not None:
                if given:
                    raise FlowError(f"node {n.name!r}: a fan-out (items) takes no payload")
                flow.map(n.name, n.binding, items=n.items, after=after, on_upstream_failure=policy, **options)
            else:
                flow.node(n.name, n.binding, after=after, payload=n.payload if given else UNSET,
                          on_upstream_failure=policy, **options)
        except FlowError as exc:
            raise _at(exc, f"definition.nodes[{i}]") from None
    return flow


def _named(name: str) -> Flow:
    try:
        return Flow(name)
    except FlowError as exc:
        raise _at(exc, "flow") from None


def _at(exc: FlowError, field: str) -> FlowError:
    exc.api_field = field  # type: ignore[attr-defined]
    return exc
