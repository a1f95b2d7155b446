"""The flow operations of :class:`jobloom.App`: start runs, read them, cancel and resume them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobloom.core.codecs import IDENTITY, Codec, decoded
from jobloom.core.errors import UnknownBinding
from jobloom.core.options import MAX_DELAY, finite
from jobloom.core.queries import Q
from jobloom.core.rows import RunJobRow, RunRow, RunsJobRow
from jobloom.core.text import MAX_KEY_BYTES, check_name, plain_json
from jobloom.core.types import NodeState, Run, to_datetime
from jobloom.engine.enqueue import EnqueueOptions, build_job
from jobloom.engine.jobs import NewJob
from jobloom.engine.telemetry import EnqueueTold
from jobloom.flows import runs, spec, stop
from jobloom.flows.flow import MAP_BINDING, MAX_DEPTH, SUBFLOW_BINDING, Flow, FlowError, Node

if TYPE_CHECKING:
    from jobloom.flows.host import FlowHost
    from jobloom.store.base import Tx


def run_from(row: RunRow, jobs: Sequence[RunJobRow | RunsJobRow], codec: Codec = IDENTITY) -> Run:
    """A run as the API shows it, from its row and its nodes' jobs (inputs and results decoded with ``codec``)."""
    row = decoded(codec, row, "input", f"input of run {row.id!r}", soft=True)
    jobs = [decoded(codec, r, "result", f"result of job {r.id}", soft=True) for r in jobs]
    nodes = {
        r.node: NodeState(name=r.node, job_id=r.id, state=r.state, attempt=r.attempt,
                          result=None if r.result is None else json.loads(r.result), error=r.error)
        for r in sorted(jobs, key=lambda r: r.id) if r.node is not None
    }
    return Run(
        id=row.id, flow=row.flow, state=row.state, input=json.loads(row.input), deadline=to_datetime(row.deadline),
        parent_job_id=row.parent_job_id, error=row.error, created_at=to_datetime(row.created_at),  # type: ignore[arg-type]
        finished_at=to_datetime(row.finished_at), nodes=nodes, graph=json.loads(row.graph),
    )


async def _read_run(tx: Tx, run_id: str) -> Run:
    row = await tx.fetchone(Q.get_run, {"id": run_id})
    if row is None:
        raise runs.RunNotFound(run_id)
    jobs = await tx.fetch(Q.run_jobs, {"run_id": run_id})
    return run_from(row, jobs, tx.codec)


def _node_jobs(app: FlowHost, flow: Flow, inp: Any, run_id: str, now: float) -> list[NewJob]:
    jobs = []
    for node in flow.nodes.values():
        root = not node.after and not node.on_failure  # an on_failure node waits for the run to fail
        if node.kind == "job":
            payload = ""
            if root and node.when is None:  # a node with a when= is decided, and built, by its worker
                try:
                    value = node.input(inp, {})
                except Exception as exc:
                    raise FlowError(
                        f"cannot start flow {flow.name!r}: input of node {node.name!r} raised "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                payload = app.spec(node.child_binding).dump_payload(value, check_keys=False)
            job = build_job(app.spec(node.child_binding), None, node_options(node), now, payload_json=payload)
        else:
            job = NewJob(binding=node.binding, payload="", priority=0, run_at=now, state="queued", max_attempts=1,
                         delivery="at_least_once", timeout=None, unique_key=None, unique_until=None,
                         concurrency_key=None, created_at=now)
        if not root:
            job.state = "waiting"
        job.run_id, job.node = run_id, node.name
        jobs.append(job)
    return jobs


async def start_run(
    app: FlowHost, flow: Flow, inp: Any, *, run_id: str | None = None, deadline: float | None = None,
    parent_job_id: int | None = None, depth: int = 0, parent_run_id: str | None = None,
) -> Run:
    """Insert a run and its nodes in one transaction (or return the run that has that id).

    ``deadline``: seconds, or the flow's default (``Flow(name, deadline=...)``). ``parent_run_id``: of a
    sub-flow run, whose parent run must still be running for it to start."""
    spec_text = _spec_of(app, flow)
    if depth > MAX_DEPTH:
        raise FlowError(f"sub-flows nest deeper than {MAX_DEPTH}")
    run_id = uuid.uuid4().hex if run_id is None else check_name("id", run_id, MAX_KEY_BYTES)
    if deadline is None:
        deadline = flow.deadline
    if deadline is not None:
        deadline = finite("deadline", deadline, minimum=0.0, above=True, maximum=MAX_DELAY)
    now = app.now()
    try:
        input_json = plain_json(inp)
    except ValueError as exc:
        raise FlowError(f"the input of flow {flow.name!r} must be JSON: {exc}") from None
    jobs = _node_jobs(app, flow, inp, run_id, now)
    store = await app.store()

    async def work(tx: Tx) -> Run:
        await runs.start_run(
            tx, run_id=run_id, flow=flow.name, input_json=input_json, graph=flow.graph(), deadline=deadline,
            parent_job_id=parent_job_id, depth=depth, jobs=jobs, now=now, parent_run_id=parent_run_id,
            spec=spec_text,
        )
        try:
            return await _read_run(tx, run_id)
        except runs.RunNotFound:
            raise FlowError(f"run {parent_run_id!r} is no longer running: its sub-flow run {run_id!r} "
                            "is not started") from None

    with EnqueueTold(app.telemetry, jobs) as told:  # the nodes carry the starter's trace: their attempts continue it
        run = await store.transact(work)
        told.done(None)
    await store.notify()
    return run


def _spec_of(app: FlowHost, flow: Flow) -> str:
    """The definition to store with a run of ``flow``: a declared flow's, or that of a flow built at
    run time (data only, its bindings known to the app)."""
    declared = app.flows.get(flow.name)
    if declared is not None and declared is not flow:
        raise FlowError(f"flow {flow.name!r} is declared on this app as another Flow object: start the declared "
                        "one, or give a flow built at run time a name of its own")
    if declared is None:
        known: set[str] = set()
        for node in flow.nodes.values():
            if node.kind != "subflow":
                try:
                    app.spec(node.child_binding)
                except UnknownBinding:
                    continue
                known.add(node.child_binding)
        spec.check_adhoc(flow, known)
    return spec.spec_json(flow, adhoc=declared is None)


class FlowOps:
    """The flow operations of an app (``App.start``, ``App.get_run``, ...), on its store."""

    def __init__(self, host: FlowHost) -> None:
        self.host = host

    async def start(self, flow: Flow, input: Any, *, id: str | None = None,
                    deadline: float | None = None) -> Run:
        """Start a run of ``flow`` with ``input``; the same ``id`` again returns the same run.

        ``flow``: one of the app's flows, or a flow built now from data (``payload=``, ``items=``; not
        declared on the app): its definition is stored with the run, so any worker carries it on.

        ``deadline`` (seconds, a positive finite number; default: the flow's ``deadline``): past it, the
        run is stopped and fails (see docs/how-to/flows.md). An ``input``
        function of a root node that raises refuses the run (``FlowError``); one of a later node
        fails that node with the error when it would run.
        """
        return await start_run(self.host, flow, input, run_id=id, deadline=deadline)

    async def get_run(self, run_id: str) -> Run:
        """A run, with each node's state, attempts and result."""
        store = await self.host.store()

        async def work(tx: Tx) -> Run:
            return await _read_run(tx, run_id)

        return await store.transact(work, exclusive=False)

    async def list_runs(self, flow: str | None = None, state: str | None = None, limit: int = 100,
                        before: str | None = None) -> list[Run]:
        """Runs, newest first, optionally filtered by flow name and state; ``before``: the id of the last
        run of the page before (the runs after it in this order; none if that run no longer exists)."""
        store = await self.host.store()

        async def work(tx: Tx) -> list[Run]:
            rows = await tx.fetch(Q.list_runs, {"flow": flow, "state": state, "limit": limit, "before": before})
            jobs: dict[str, list[RunsJobRow]] = {r.id: [] for r in rows}
            if jobs:  # every listed run's nodes in one query
                for j in await tx.fetch(Q.runs_jobs, {"run_ids": list(jobs)}):
                    jobs[j.run_id or ""].append(j)
            return [run_from(r, jobs[r.id], tx.codec) for r in rows]

        return await store.transact(work, exclusive=False)

    async def cancel_run(self, run_id: str) -> Run:
        """Cancel a run and its sub-flow runs: nodes that have not started are cancelled, running ones
        are asked to stop. The run is ``cancelling`` until none of its jobs runs, then ``cancelled``."""
        store = await self.host.store()

        async def work(tx: Tx) -> Run:
            await stop.cancel_run(tx, run_id, store.now())
            return await _read_run(tx, run_id)

        run = await store.transact(work)
        await store.notify()
        return run

    async def resume_run(self, run_id: str) -> Run:
        """Run a failed or cancelled run again, keeping the nodes that succeeded; its deadline (if it
        had one) is armed again: now plus the run's deadline length."""
        store = await self.host.store()

        async def work(tx: Tx) -> Run:
            await runs.resume_run(tx, run_id, store.now())
            return await _read_run(tx, run_id)

        run = await store.transact(work)
        await store.notify()
        return run


def flow_bindings(flows: dict[str, Flow]) -> list[str]:
    """The internal bindings that the app's workers run: fan-outs always (a flow started at run time
    may have one), sub-flows if one of the app's flows has one."""
    kinds = {n.kind for f in _all_flows(flows.values()) for n in f.nodes.values()}
    return [MAP_BINDING, *([SUBFLOW_BINDING] if "subflow" in kinds else [])]


def _all_flows(flows: Any) -> list[Flow]:
    out: list[Flow] = []
    todo = list(flows)
    while todo:
        f = todo.pop()
        if f in out:
            continue
        out.append(f)
        todo.extend(n.subflow for n in f.nodes.values() if n.subflow is not None)
    return out


def register_flows(flows: Any, bindings: set[str]) -> dict[str, Flow]:
    """Validate the app's flows (and their sub-flows) and index them by name."""
    out: dict[str, Flow] = {}
    for flow in _all_flows(flows):
        if not isinstance(flow, Flow):
            raise FlowError(f"flows must be jobloom.Flow objects; got {flow!r}")
        if flow.name in out and out[flow.name] is not flow:
            raise FlowError(f"two flows are named {flow.name!r}")
        flow.validate(bindings)
        out[flow.name] = flow
    return out


def node_options(node: Node) -> EnqueueOptions:
    """The enqueue options a node declares."""
    o = node.options
    return EnqueueOptions(delay=o.get("delay"), priority=o.get("priority"), concurrency_key=o.get("concurrency_key"),
                          max_attempts=o.get("max_attempts"), delivery=o.get("delivery"), tags=o.get("tags"),
                          meta=o.get("meta"))
