"""A flow's definition as data, stored with each run (``jobloom_runs.spec``).

Every run stores what of its flow is data: each node's kind, binding, upstream nodes, options and
failure policy (``on_upstream_failure``, ``on_failure``, whether it has a ``when``). The coordinator
reads it to move the run on; a worker reads it to carry the run on with the graph it started with.

A flow built at run time (started without being declared on the app) is data only: its nodes take
``payload=`` values and its fan-outs ``items=`` lists, which are stored too, so any worker of any app
on the store runs it. A function (``input=``, ``over=``, ``key=``, ``when=``) cannot be stored: such
a flow is refused when it is started, with the node and the function named.

A declared flow whose definition changed while runs were in flight: each run keeps its graph (its
edges and options come from the store); a worker runs a node of it with the code it has only if the
node is still the node the run started with (same kind, performer, upstream nodes and failure
policy), and otherwise fails it with :func:`changed`'s error, which says what changed and the way out.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from jobloom.core.text import plain_json
from jobloom.flows.flow import UNSET, Flow, FlowError, Node, identity_input

if TYPE_CHECKING:
    from jobloom.core.rows import RunRow

MAX_NODES = 1000
"""The most nodes a flow built at run time may have."""
MAX_SPEC_BYTES = 1 << 20
"""The largest definition (its JSON, payloads and items included) a flow built at run time may have."""


def node_spec(node: Node, *, data: bool) -> dict[str, Any]:
    """What of ``node`` is data; ``data``: with its ``payload`` and fan-out ``items`` (a flow built at
    run time)."""
    d: dict[str, Any] = {"kind": node.kind, "after": list(node.after)}
    if node.kind == "subflow":
        assert node.subflow is not None
        d["flow"] = node.subflow.name
    else:
        d["binding"] = node.child_binding
    if node.upstream_failure != "skip":
        d["on_upstream_failure"] = node.upstream_failure
    if node.on_failure:
        d["on_failure"] = True
    if node.when is not None:
        d["when"] = True
    if node.options:
        d["options"] = dict(node.options)
    if data and node.payload is not UNSET:
        d["payload"] = node.payload
    if data and node.items is not None:
        d["items"] = list(node.items)
    return d


def flow_spec(flow: Flow, *, adhoc: bool) -> dict[str, Any]:
    """The definition stored with a run of ``flow`` (``adhoc``: built at run time, with its data)."""
    return {"adhoc": adhoc, "nodes": {n.name: node_spec(n, data=adhoc) for n in flow.nodes.values()}}


def spec_json(flow: Flow, *, adhoc: bool) -> str:
    """:func:`flow_spec` as JSON; a flow built at run time is bounded (nodes and bytes) and its
    payloads and items must be JSON."""
    if adhoc and len(flow.nodes) > MAX_NODES:
        raise FlowError(f"flow {flow.name!r} has {len(flow.nodes)} nodes; a flow started at run time has at "
                        f"most {MAX_NODES}")
    try:
        text = plain_json(flow_spec(flow, adhoc=adhoc))
    except ValueError as exc:
        bad = next((n for n in flow.nodes.values() if not _is_json(node_spec(n, data=adhoc))), None)
        where = f"node {bad.name!r} of " if bad is not None else ""
        raise FlowError(f"{where}flow {flow.name!r}: its payload, items and options must be JSON: {exc}") from None
    if adhoc and len(text.encode()) > MAX_SPEC_BYTES:
        raise FlowError(f"flow {flow.name!r}: its definition is {len(text.encode())} bytes of JSON; a flow started "
                        f"at run time has at most {MAX_SPEC_BYTES}")
    return text


def _is_json(value: Any) -> bool:
    try:
        plain_json(value)
    except ValueError:
        return False
    return True


def adhoc_problem(node: Node) -> str | None:
    """Why ``node`` cannot be part of a flow started at run time (None: it is data only)."""
    if node.kind == "subflow":
        return "is a sub-flow"
    if node.when is not None:
        return "has when=, a function"
    if node.key is not None:
        return "has key=, a function"
    if node.kind == "map" and node.items is None:
        return "has over=, a function (give items=[...])"
    if node.kind == "job" and node.payload is UNSET and node.input is not identity_input:
        return "has input=, a function (give payload=...)"
    return None


def check_adhoc(flow: Flow, known: set[str]) -> None:
    """Refuse a flow started at run time that is not data only, or that names a binding the app does
    not know (``known``), naming the node and what is wrong."""
    for node in flow.nodes.values():
        problem = adhoc_problem(node)
        if problem is not None:
            raise FlowError(
                f"node {node.name!r} of flow {flow.name!r} {problem}, which cannot be stored with a run: a flow "
                "that is not declared on the app (App(flows=[...])) is started from data only (payload=, "
                "items=); declare the flow on the app to use functions")
    flow.validate(known)


def load_spec(run: RunRow) -> dict[str, Any] | None:
    """The definition stored with ``run`` (None: a run started before definitions were stored)."""
    return None if run.spec is None else dict(json.loads(run.spec))


def flow_from_spec(name: str, spec: dict[str, Any]) -> Flow:
    """The flow a run started at run time stored (its nodes' payloads and items included)."""
    flow = Flow(name)
    for n, d in spec["nodes"].items():
        options = d.get("options", {})
        policy = d.get("on_upstream_failure", "skip")
        if d["kind"] == "map":
            flow.map(n, d["binding"], items=d.get("items", []), after=d["after"], on_upstream_failure=policy,
                     **options)
        elif d.get("on_failure"):
            flow.on_failure(d["binding"], name=n, **options)
        else:
            flow.node(n, d["binding"], after=d["after"], payload=d.get("payload", UNSET),
                      on_upstream_failure=policy, **options)
    return flow


_SAME = ("kind", "binding", "flow", "after", "on_upstream_failure", "on_failure")


def changed(run: RunRow, stored: dict[str, Any] | None, node: Node | None, name: str) -> str | None:
    """Why a worker cannot run node ``name`` of the declared flow's run ``run`` with the definition
    it has (``node``: its node there, None if gone; ``stored``: the node the run started with). None:
    it can."""
    if stored is None:  # the run started before definitions were stored
        return None if node is not None else f"flow {run.flow!r} has no node {name!r} (was the flow changed?)"
    if node is None:
        what = "is no longer in it"
    else:
        now = node_spec(node, data=False)
        diff = [k for k in _SAME if now.get(k) != stored.get(k)]
        if not diff:
            return None
        what = "; ".join(f"{k} is now {now.get(k)!r} (the run started with {stored.get(k)!r})" for k in diff)
    return (f"flow {run.flow!r} changed since run {run.id!r} started: node {name!r} {what}. A run carries on only "
            "with the graph it started with: deploy that definition again to finish it, or cancel the run and "
            "start a new one (a new flow name, declared beside the old one, lets old runs finish on the old "
            "definition)")
