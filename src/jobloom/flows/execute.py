"""The worker's side of flows: building node payloads from upstream results, running fan-out and
sub-flow nodes. This is where user code of a flow (``input=``, ``over=``) runs, never in the coordinator.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from jobloom.core.codecs import decoded
from jobloom.core.errors import InvalidOption, UnknownBinding, shown
from jobloom.core.queries import Q, Query
from jobloom.core.rows import ChildRow, NodeResultRow, RunJobRow, RunRow
from jobloom.core.signals import Permanent, Skip, Snooze
from jobloom.core.states import ACTIVE_STATES, RUN_RESUMABLE_STATES
from jobloom.engine.coalesce import Coalescer
from jobloom.engine.enqueue import EnqueueOptions, build_job, insert_in
from jobloom.engine.steps import FOREVER, Suspended
from jobloom.flows import spec
from jobloom.flows.api import node_options, start_run
from jobloom.flows.flow import Flow, FlowError, Node, UpstreamFailed, child_name_problem
from jobloom.flows.runs import CHILDREN_DONE, FAILURE_STATES, SUBFLOW_DONE, insert_children, like_prefix, top_node

if TYPE_CHECKING:
    from jobloom.core.types import Job
    from jobloom.engine.jobs import Claimed
    from jobloom.flows.host import FlowHost
    from jobloom.store.base import Tx

NEVER = 1e18  # unique_until of a spawned child: its id is unique for good
NOT_HERE_SNOOZE = 30.0  # seconds a node of a flow this worker cannot run is put back for another worker

log = logging.getLogger("jobloom.flows")


def not_here(c: Claimed, why: str) -> Snooze:
    """Put back a node this worker cannot run (a flow or a binding its app does not declare, on a store
    shared with another app), for a worker that can: snoozed, so no attempt is spent; after the
    binding's ``max_snoozes`` it fails, naming the snoozes."""
    log.warning("job %s (node %r of run %r): %s; put back for %g s for a worker that can run it",
                c.id, c.node, c.run_id, why, NOT_HERE_SNOOZE)
    return Snooze(NOT_HERE_SNOOZE)


class NodeContexts:
    """Reads what flow nodes need to start (their run, upstream results and fan-out children).

    The nodes a worker starts in one loop tick (one cycle's claims) are read together: one read
    transaction, with their runs in one batch and every node's upstream results in another. Runs are
    not kept between ticks, so nothing here relies on a run id never being started again.
    """

    def __init__(self, host: FlowHost) -> None:
        self.host = host
        self._calls: Coalescer[Claimed, _Loaded | None] = Coalescer(self._load)

    async def load(self, c: Claimed) -> _Loaded | None:
        """The run row, upstream results and upstream fan-out children of node job ``c`` (None: no such run)."""
        return await self._calls.submit(c)

    async def _load(self, jobs: list[Claimed]) -> list[_Loaded | None]:
        store = await self.host.store()
        return await store.transact(lambda tx: self._read(tx, jobs), exclusive=False)

    async def _read(self, tx: Tx, jobs: list[Claimed]) -> list[_Loaded | None]:
        run_ids = sorted({c.run_id for c in jobs if c.run_id is not None})
        runs: dict[str, RunRow] = {
            r[0].id: decoded(tx.codec, r[0], "input", f"input of run {r[0].id!r}")
            for r in await tx.fetch_batch([(Q.get_run, {"id": i}) for i in run_ids]) if r}
        found = [(c, runs.get(c.run_id or "")) for c in jobs]
        ups = [[] if run is None else _ups(run, c) for c, run in found]
        queries: list[tuple[Query[Any], dict[str, Any] | None]] = []
        for (c, run), node_ups in zip(found, ups, strict=True):
            if run is not None:
                queries.append((Q.node_results, {"run_id": c.run_id, "nodes": node_ups}))
                queries += [(Q.children_of, {"run_id": c.run_id, "prefix": like_prefix(up)}) for up in node_ups]
        answers = iter(await tx.fetch_batch(queries))
        out: list[_Loaded | None] = []
        for (_, run), node_ups in zip(found, ups, strict=True):
            if run is None:
                out.append(None)
            else:
                results = [decoded(tx.codec, r, "result", f"result of node {r.node!r} of run {run.id!r}")
                           for r in next(answers)]
                out.append((run, results, [(up, _child(tx, r)) for up in node_ups for r in next(answers)]))
        return out


def _ups(run: RunRow, c: Claimed) -> list[str]:
    """The upstream nodes of node job ``c`` in ``run``'s graph (a fan-out child: its node's)."""
    graph: dict[str, list[str]] = json.loads(run.graph)
    return graph.get(top_node(c.node) or "", [])


_Loaded = tuple[RunRow, list[NodeResultRow], list[tuple[str, ChildRow]]]
"""A node job's run, its upstream nodes' results, and each upstream fan-out's children."""


async def _context(contexts: NodeContexts, c: Claimed) -> tuple[Flow, Node, Any, dict[str, Any], int]:
    app = contexts.host
    loaded = await contexts.load(c)
    if loaded is None:
        raise Permanent(f"run {c.run_id!r} of node {c.node!r} no longer exists")
    run, results, children = loaded
    flow, node = _node_of(app, run, c)
    up: dict[str, Any] = {}
    for r in results:  # an upstream that did not succeed: a node with on_upstream_failure="run" sees how
        if r.state != "succeeded":
            up[r.node or ""] = UpstreamFailed(r.state, r.error)
        else:
            up[r.node or ""] = None if r.result is None else json.loads(r.result)
    for name in {up_name for up_name, _ in children}:
        if not isinstance(up.get(name), UpstreamFailed):
            up[name] = fanout_summary([child for up_name, child in children if up_name == name])
    inp = json.loads(run.input)
    _when(node, inp, up)
    return flow, node, inp, up, int(run.depth)


def _when(node: Node, inp: Any, up: dict[str, Any]) -> None:
    """Skip the node (``Skip``: it ends ``skipped``) when its ``when=`` says so; a ``when=`` that raises
    fails it."""
    if node.when is None:
        return
    try:
        go = node.when(inp, up)
    except Exception as exc:
        raise Permanent(f"when of node {node.name!r} raised {type(exc).__name__}: {exc}") from exc
    if not go:
        raise Skip(f"when= of node {node.name!r} was false")


async def _failures(host: FlowHost, run_id: str | None) -> dict[str, str | None]:
    """What an on_failure node's payload says: the run's nodes that failed it, with their errors."""
    store = await host.store()

    async def read(tx: Tx) -> list[RunJobRow]:
        return await tx.fetch(Q.run_jobs, {"run_id": run_id})

    rows = await store.transact(read, exclusive=False)
    return {r.node: r.error for r in rows
            if r.node is not None and top_node(r.node) == r.node and r.state in FAILURE_STATES}


def _node_of(app: FlowHost, run: RunRow, c: Claimed) -> tuple[Flow, Node]:
    """The flow and node a worker runs node job ``c`` of ``run`` with: the definition stored with a run
    started at run time; the app's declared flow otherwise, if the node is still the one the run
    started with. A node this worker's app cannot run is put back for another worker (``not_here``)."""
    name = top_node(c.node) or ""
    stored = spec.load_spec(run)
    if stored is not None and stored.get("adhoc"):
        flow = spec.flow_from_spec(run.flow, stored)
        try:
            app.spec(flow.nodes[name].child_binding)
        except UnknownBinding:
            raise not_here(c, f"this worker has no performer {flow.nodes[name].child_binding!r}") from None
        return flow, flow.nodes[name]
    declared = app.flows.get(run.flow)
    if declared is None:
        raise not_here(c, f"this worker does not know flow {run.flow!r}")
    node = declared.nodes.get(name)
    problem = spec.changed(run, None if stored is None else stored["nodes"].get(name), node, name)
    if problem is not None:
        raise Permanent(problem)
    assert node is not None
    return declared, node


def _child(tx: Tx, row: ChildRow) -> ChildRow:
    """A fan-out child's end with its result decoded."""
    return decoded(tx.codec, row, "result", f"result of fan-out child {row.node!r}")


def fanout_summary(children: list[ChildRow]) -> dict[str, Any]:
    """What downstream nodes see of a fan-out (``children`` in the order they were made, item order):
    counts, and results in item order (None where failed)."""
    ordered = children
    return {
        "total": len(ordered),
        "succeeded": sum(1 for r in ordered if r.state == "succeeded"),
        "failed": sum(1 for r in ordered if r.state != "succeeded"),
        "results": [None if r.result is None else json.loads(r.result) for r in ordered],
    }


async def node_payload(contexts: NodeContexts, c: Claimed) -> str:
    """Build a node's payload with its ``input`` function; a function that raises fails the node."""
    _, node, inp, up, _ = await _context(contexts, c)
    app = contexts.host
    if node.on_failure:
        return app.spec(node.child_binding).dump_payload({"failed": await _failures(app, c.run_id)}, check_keys=False)
    try:
        value = node.input(inp, up)
    except Exception as exc:
        raise Permanent(f"input of node {node.name!r} raised {type(exc).__name__}: {exc}") from exc
    return app.spec(node.child_binding).dump_payload(value, check_keys=False)


async def run_map(contexts: NodeContexts, c: Claimed) -> Any:
    """A fan-out node: create its children once, then wait until all have finished."""
    _, node, inp, up, _ = await _context(contexts, c)
    app = contexts.host
    try:
        items = list(node.over(inp, up)) if node.over else []
    except Exception as exc:
        raise Permanent(f"over of node {node.name!r} raised {type(exc).__name__}: {exc}") from exc
    spec = app.spec(node.child_binding)
    now = app.now()
    jobs = []
    for name, item in zip(_child_names(node, items), items, strict=True):
        job = build_job(spec, item, node_options(node), now)
        job.run_id, job.node = c.run_id, f"{node.name}:{name}"  # unique in the run: made once
        jobs.append(job)
    store = await app.store()

    async def spawn(tx: Tx) -> tuple[str | None, list[ChildRow]]:
        run = await tx.fetchone(Q.lock_run, {"id": c.run_id})  # a cancel or deadline of the run waits
        if run is None or run.state != "running":
            return None if run is None else run.state, []
        await insert_children(tx, jobs, now)
        made = await tx.fetch(Q.children_of, {"run_id": c.run_id, "prefix": like_prefix(node.name)})
        return run.state, [_child(tx, r) for r in made]

    state, children = await store.transact(spawn)
    if state != "running":
        raise Permanent(f"run {c.run_id!r} is {state or 'gone'}: the children of {node.name!r} are not made")
    await store.notify()
    if all(r.state not in ACTIVE_STATES for r in children):
        return fanout_summary(children)
    raise Suspended(FOREVER, wait=CHILDREN_DONE)


def _child_names(node: Node, items: list[Any]) -> list[str]:
    """The fan-out children's names after ``node:``: the item's index, or its ``key``."""
    if node.key is None:
        return [str(i) for i in range(len(items))]
    names: dict[str, int] = {}
    for i, item in enumerate(items):
        try:
            name = node.key(item)
        except Exception as exc:
            raise Permanent(f"key of node {node.name!r} raised {type(exc).__name__} on item {i}: {exc}") from exc
        problem = child_name_problem(name)
        if problem is not None:
            raise Permanent(f"key of node {node.name!r} gave {shown(name)} for item {i}: expected {problem}")
        if name in names:
            raise Permanent(f"key of node {node.name!r} gave {name!r} for items {names[name]} and {i}: "
                            "keys must be unique within the fan-out")
        names[name] = i
    return list(names)


async def run_subflow(contexts: NodeContexts, c: Claimed) -> Any:
    """A sub-flow node: start the child run once, then finish when it ends, with its nodes' results."""
    _, node, inp, up, depth = await _context(contexts, c)
    app = contexts.host
    assert node.subflow is not None
    child_id = f"{c.run_id}/{node.name}"
    try:
        child_input = node.input(inp, up)
    except Exception as exc:
        raise Permanent(f"input of node {node.name!r} raised {type(exc).__name__}: {exc}") from exc
    try:
        run = await start_run(app, node.subflow, child_input, run_id=child_id, parent_job_id=c.id, depth=depth + 1,
                              parent_run_id=c.run_id)
    except FlowError as exc:
        raise Permanent(str(exc)) from exc
    if run.state == "succeeded":
        return {name: n.result for name, n in run.nodes.items()}
    if run.state in RUN_RESUMABLE_STATES:
        raise Permanent(f"sub-flow run {child_id!r} {run.state}: {run.error}")
    raise Suspended(FOREVER, wait=SUBFLOW_DONE)


def run_spawner(app: FlowHost, c: Claimed) -> Callable[..., Awaitable[Job]]:
    """``ctx.spawn`` of a job of a flow run: the child is a job of the same run, named
    ``<node>/<child id>`` (unique in the run: the same child id again returns the same job). Its node
    settles only once the children it spawned have finished (see ``jobloom.flows.runs.on_finished``)."""

    async def spawn(parent_id: int, child_id: str, performer: Any, payload: Any, **options: Any) -> Job:
        problem = child_name_problem(child_id)
        if problem is not None:
            raise InvalidOption("child_id", child_id, f"{problem} (it names the child in its run)")
        job = build_job(app.spec(performer), payload, EnqueueOptions(**options), app.now())
        job.unique_key, job.unique_until = f"spawn:{parent_id}:{child_id}", NEVER
        job.run_id, job.node = c.run_id, f"{c.node}/{child_id}"
        store = await app.store()

        async def work(tx: Tx) -> Job:
            run = await tx.fetchone(Q.lock_run, {"id": c.run_id})  # the run first: a cancel waits, or wins
            if run is None or run.state != "running":
                raise Permanent(f"run {c.run_id!r} is {'gone' if run is None else run.state}: "
                                f"child {child_id!r} of node {c.node!r} is not spawned")
            return (await insert_in(tx, [job]))[0]

        spawned = await store.transact(work)
        await store.notify()
        return spawned

    return spawn
