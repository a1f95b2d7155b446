"""Flows: DAGs of jobs declared once and started many times.

A node names a performer, its upstream nodes (``after=``) and how its payload is built from the
run's input and the upstream results (``input=lambda inp, up: ...``) or given as data (``payload=``).
``Flow.map`` fans out over a list; ``Flow.subflow`` runs another flow as one node;
``Flow.on_failure`` declares a node that runs only when the run fails. Definitions are checked when
the app is built (or, for a flow built at run time, when it is started): a cycle, an unknown
upstream, an unknown performer or a duplicate name is refused with the names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobloom.core.errors import JobloomError, shown
from jobloom.core.options import MAX_DELAY, finite
from jobloom.core.text import MAX_NAME_BYTES, check_meta, check_tags, name_problem
from jobloom.engine.performer import Performer

InputFn = Callable[[Any, dict[str, Any]], Any]
WhenFn = Callable[[Any, dict[str, Any]], Any]
MAX_DEPTH = 8
UPSTREAM_FAILURE = ("skip", "run")
"""What a node does when an upstream node did not succeed: it is skipped (the default), or it runs."""

#: Internal bindings that run fan-out and sub-flow nodes.
MAP_BINDING = "jobloom.map"
SUBFLOW_BINDING = "jobloom.subflow"
INTERNAL_BINDINGS = frozenset({MAP_BINDING, SUBFLOW_BINDING})
"""jobloom's own bindings (no performer of the app's): listings leave them out unless asked for."""


class FlowError(JobloomError):
    """A flow definition or a run request that cannot be accepted."""


def identity_input(inp: Any, up: dict[str, Any]) -> Any:
    """A node's ``input`` when none is given: the run's input as it is."""
    return inp


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()
"""No ``payload=`` given: the payload is built by ``input=``."""


@dataclass(frozen=True, slots=True)
class UpstreamFailed:
    """What ``up[name]`` holds, for a node declared with ``on_upstream_failure="run"``, in place of the
    result of an upstream node that did not succeed: its ``state`` (``failed``, ``skipped``, ...) and
    its ``error``."""

    state: str
    error: str | None


def _constant(value: Any) -> InputFn:
    def given(inp: Any, up: dict[str, Any]) -> Any:
        return value

    return given


@dataclass(eq=False)
class Node:
    """One node of a flow: a job (``kind="job"``), a fan-out (``"map"``) or a sub-flow (``"subflow"``)."""

    flow: Flow
    name: str
    performer: type[Performer[Any, Any]] | str | None
    after: list[str]
    input: InputFn
    kind: str = "job"
    over: InputFn | None = None
    subflow: Flow | None = None
    key: Callable[[Any], Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    payload: Any = UNSET
    items: list[Any] | None = None
    when: WhenFn | None = None
    upstream_failure: str = "skip"
    on_failure: bool = False

    @property
    def binding(self) -> str:
        """The binding whose jobs run this node."""
        if self.kind == "map":
            return MAP_BINDING
        if self.kind == "subflow":
            return SUBFLOW_BINDING
        p = self.performer
        assert p is not None
        return p if isinstance(p, str) else (p.binding or p.__name__)

    @property
    def child_binding(self) -> str:
        """For a fan-out node: the binding of its children."""
        p = self.performer
        assert p is not None
        return p if isinstance(p, str) else (p.binding or p.__name__)


_NODE_OPTIONS = frozenset({"priority", "max_attempts", "delivery", "concurrency_key", "delay", "tags", "meta"})


class Flow:
    """A named DAG of nodes: ``flow = jobloom.Flow("publish-image")``, then ``flow.node(...)``.

    ``deadline``: the default deadline (seconds, a positive finite number) of every run of the flow;
    ``App.start(..., deadline=...)`` overrides it.
    """

    def __init__(self, name: str, *, deadline: float | None = None) -> None:
        problem = name_problem(name, MAX_NAME_BYTES)
        if problem is not None:
            raise FlowError(f"a flow needs a name: {problem}; got {shown(name)}")
        self.name = name
        self.deadline = None if deadline is None else finite(
            "deadline", deadline, minimum=0.0, above=True, maximum=MAX_DELAY)
        self.nodes: dict[str, Node] = {}

    def _add(self, node: Node) -> Node:
        if node.name in self.nodes:
            raise FlowError(f"flow {self.name!r} already has a node named {node.name!r}")
        problem = name_problem(node.name, MAX_NAME_BYTES)
        if problem is None and (":" in node.name or "/" in node.name):
            problem = "a name without ':' or '/'"
        if problem is not None:
            raise FlowError(f"node name {shown(node.name)} in flow {self.name!r}: expected {problem}")
        bad = set(node.options) - _NODE_OPTIONS
        if bad:
            raise FlowError(
                f"node {node.name!r} in flow {self.name!r}: unknown option(s) {', '.join(sorted(bad))}; "
                f"nodes take {', '.join(sorted(_NODE_OPTIONS))} (not unique_key)"
            )
        where = f"node {node.name!r} in flow {self.name!r}"
        if node.upstream_failure not in UPSTREAM_FAILURE:
            raise FlowError(f"{where}: on_upstream_failure must be \"skip\" or \"run\"; "
                            f"got {shown(node.upstream_failure)}")
        if node.when is not None and not callable(node.when):
            raise FlowError(f"{where}: when must be a function of (input, upstream); got {node.when!r}")
        check_tags(node.options.get("tags"), where)
        check_meta(node.options.get("meta"), where)
        self.nodes[node.name] = node
        return node

    @staticmethod
    def _names(after: Sequence[Node | str] | None) -> list[str]:
        return [a.name if isinstance(a, Node) else a for a in (after or [])]

    def node(
        self,
        name: str,
        performer: type[Performer[Any, Any]] | str,
        *,
        after: Sequence[Node | str] | None = None,
        input: InputFn | None = None,
        payload: Any = UNSET,
        when: WhenFn | None = None,
        on_upstream_failure: str = "skip",
        **options: Any,
    ) -> Node:
        """A job node: runs ``performer`` with ``input(run_input, upstream_results)`` as payload, or with
        ``payload`` (a JSON value, given as data: what a flow built at run time uses).

        ``when=lambda inp, up: ...``: the node is ``skipped`` when it returns false (evaluated by the
        worker, just before the node would run). ``on_upstream_failure="run"``: the node runs once its
        upstream nodes finished, whatever their states; ``up`` holds an :class:`UpstreamFailed` for
        each that did not succeed (default ``"skip"``: it is skipped).
        """
        node = Node(self, name, performer, self._names(after), self._input(name, input, payload), options=options,
                    payload=payload, when=when, upstream_failure=on_upstream_failure)
        return self._add(node)

    def _input(self, name: str, input: InputFn | None, payload: Any) -> InputFn:
        if payload is UNSET:
            return input or identity_input
        if input is not None:
            raise FlowError(f"node {name!r} in flow {self.name!r}: give input= or payload=, not both")
        return _constant(payload)

    def on_failure(
        self, performer: type[Performer[Any, Any]] | str, *, name: str = "on_failure", **options: Any,
    ) -> Node:
        """A node that runs only when the run fails (some node failed, for good), once every other node
        finished; its payload is ``{"failed": {node: error}}``. On a run that does not fail it is
        ``skipped``; the run still ends ``failed`` once it finished, whatever its outcome."""
        return self._add(Node(self, name, performer, [], identity_input, options=options, on_failure=True))

    def map(
        self,
        name: str,
        performer: type[Performer[Any, Any]] | str,
        *,
        over: InputFn | None = None,
        items: Sequence[Any] | None = None,
        after: Sequence[Node | str] | None = None,
        key: Callable[[Any], Any] | None = None,
        when: WhenFn | None = None,
        on_upstream_failure: str = "skip",
        **options: Any,
    ) -> Node:
        """A fan-out: one child job ``name:i`` per item of ``over(run_input, upstream_results)``.

        ``key=lambda item: ...`` names the children ``name:<key>`` instead: keys must be unique within
        the fan-out and valid names without ``:`` or ``/`` (otherwise the fan-out node fails, naming the
        item). Downstream nodes receive ``{"total", "succeeded", "failed", "results"}`` (results in item
        order) once every child has finished, whatever their outcomes. ``items=[...]`` instead of
        ``over=`` fans out over a list given as data. ``when=`` and ``on_upstream_failure=`` as for
        :meth:`node`.
        """
        if key is not None and not callable(key):
            raise FlowError(f"node {name!r} in flow {self.name!r}: key must be a function of an item; got {key!r}")
        if (over is None) == (items is None):
            raise FlowError(f"node {name!r} in flow {self.name!r}: give over= (a function) or items= (a list)")
        if over is None:
            listed = list(items or [])
            over = _constant(listed)
        node = Node(self, name, performer, self._names(after), identity_input, kind="map", over=over, options=options,
                    key=key, items=None if items is None else list(items), when=when,
                    upstream_failure=on_upstream_failure)
        return self._add(node)

    def subflow(
        self,
        name: str,
        flow: Flow,
        *,
        after: Sequence[Node | str] | None = None,
        input: InputFn | None = None,
        when: WhenFn | None = None,
        on_upstream_failure: str = "skip",
    ) -> Node:
        """A node that starts ``flow`` as a child run and finishes with it (result: its nodes' results).
        ``when=`` and ``on_upstream_failure=`` as for :meth:`node`."""
        return self._add(Node(self, name, None, self._names(after), input or identity_input, kind="subflow",
                              subflow=flow, when=when, upstream_failure=on_upstream_failure))

    # -- checks -----------------------------------------------------------------------------------

    def validate(self, bindings: set[str]) -> None:
        """Refuse an empty flow, unknown upstreams, unknown performers and cycles, naming what is wrong."""
        if not self.nodes:
            raise FlowError(f"flow {self.name!r} has no nodes: a run of it could never finish")
        for node in self.nodes.values():
            for up in node.after:
                if up not in self.nodes:
                    raise FlowError(
                        f"node {node.name!r} in flow {self.name!r} is after {up!r}, which is not in the flow"
                    )
                if self.nodes[up].on_failure:
                    raise FlowError(f"node {node.name!r} in flow {self.name!r} is after {up!r}, an on_failure "
                                    "node: it runs only when the run fails, after every other node")
            if node.kind != "subflow" and node.child_binding not in bindings:
                raise FlowError(
                    f"node {node.name!r} in flow {self.name!r} names performer {node.child_binding!r}, "
                    "which the app does not know"
                )
        cycle = self._cycle()
        if cycle:
            raise FlowError(f"flow {self.name!r} has a cycle: {' -> '.join(cycle)}")
        self._check_depth(0)

    def _check_depth(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise FlowError(f"flow {self.name!r}: sub-flows nest deeper than {MAX_DEPTH}")
        for node in self.nodes.values():
            if node.subflow is not None:
                node.subflow._check_depth(depth + 1)

    def _cycle(self) -> list[str] | None:
        color: dict[str, int] = {}
        stack: list[str] = []

        def visit(name: str) -> list[str] | None:
            color[name] = 1
            stack.append(name)
            for up in self.nodes[name].after:
                if color.get(up) == 1:
                    return [*stack[stack.index(up):], up]
                if up not in color:
                    found = visit(up)
                    if found:
                        return found
            stack.pop()
            color[name] = 2
            return None

        for name in self.nodes:
            if name not in color:
                found = visit(name)
                if found:
                    return list(reversed(found))
        return None

    def downstream(self) -> dict[str, list[str]]:
        """Each node's direct downstream nodes."""
        down: dict[str, list[str]] = {n: [] for n in self.nodes}
        for node in self.nodes.values():
            for up in node.after:
                down[up].append(node.name)
        return down

    def graph(self) -> dict[str, list[str]]:
        """The run graph stored with each run: node -> upstream nodes."""
        return {n.name: list(n.after) for n in self.nodes.values()}

    def __repr__(self) -> str:
        return f"Flow({self.name!r}, nodes={list(self.nodes)})"


def child_name_problem(name: object) -> str | None:
    """Why ``name`` cannot follow ``node:`` or ``node/`` in a job's node name (None: it can)."""
    problem = name_problem(name, MAX_NAME_BYTES)
    if problem is None and (":" in name or "/" in name):  # type: ignore[operator]
        problem = "a name without ':' or '/'"
    return problem
