"""The coordinator's side of flows: starting runs, moving nodes on when upstream finishes, ending runs.

Written once against :class:`~jobloom.store.Tx` and free of user code: the run's graph is stored
with the run, and node payloads are built by the worker that runs the node. Every change to a run
first locks the run's row, so when the last two upstream nodes finish at the same moment on two
workers, the downstream node is queued exactly once. Locks follow the order that
:mod:`jobloom.engine.coordinator` documents: runs (in id order), then their jobs (in id order).

The work per finished node does not grow with the size of its run: it reads the states of the
run's top-level nodes and whether a fan-out sibling is still active (an index of active run jobs),
never the results or every child of a fan-out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobloom.core.errors import InvalidTransition, JobloomError
from jobloom.core.queries import Q, Query
from jobloom.core.rows import NodeStateRow, RunRow
from jobloom.core.states import (
    ACTIVE_STATES,
    FINISHED_STATES,
    RUN_FINISHED_STATES,
    RUN_RESUMABLE_STATES,
    RUN_RUNNING,
    RUN_STOPPING,
)
from jobloom.engine.coordinator import enqueue as insert_jobs
from jobloom.engine.coordinator import insert_tags
from jobloom.engine.jobs import NewJob, emit, event
from jobloom.store.base import Tx

CHILDREN_DONE = "jobloom.children"  # what a fan-out node waits for
SUBFLOW_DONE = "jobloom.subflow"  # what a sub-flow node waits for




def top_node(node: str | None) -> str | None:
    """A fan-out child ``name:3`` and a spawned child ``name/receipt`` belong to node ``name``."""
    if node is None:
        return None
    for i, ch in enumerate(node):
        if ch in ":/":
            return node[:i]
    return node


def spawn_owner(node: str) -> str | None:
    """The node that spawned ``node`` (``name/receipt`` -> ``name``; ``name:3/x`` -> ``name:3``)."""
    return node.rsplit("/", 1)[0] if "/" in node else None


def spawn_range(node: str) -> dict[str, str]:
    """The bounds of what ``node`` spawned, in byte order: ``name/`` < child < ``name0``."""
    return {"lo": node + "/", "hi": node + "0"}


def spawned_outcome(rows: Sequence[NodeStateRow]) -> tuple[bool, str | None]:
    """From ``spawned_of`` records: whether a spawned child is still active, and the error of a node one
    of whose spawned children did not succeed (None: all that finished succeeded)."""
    active = any(r.state in ACTIVE_STATES for r in rows)
    failed = [r.node for r in rows if r.state not in ACTIVE_STATES and r.state != "succeeded"]
    return active, (f"spawned child {failed[0]!r} did not succeed" if failed else None)


def like_prefix(node: str) -> str:
    """A LIKE pattern matching the fan-out children of ``node``."""
    escaped = node.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + ":%"


def child_range(node: str) -> dict[str, str]:
    """The bounds of the fan-out children of ``node`` in byte order: ``name:`` < child < ``name;``."""
    return {"lo": node + ":", "hi": node + ";"}


CHILD_CHUNK = 1000


async def insert_children(tx: Tx, jobs: Sequence[NewJob], now: float) -> int:
    """Insert fan-out children that do not exist yet (a node is unique in its run), a chunk per
    statement, with their events; the number inserted now."""
    inserted = 0
    for start in range(0, len(jobs), CHILD_CHUNK):
        rows = [job.params(tx.codec) for job in jobs[start:start + CHILD_CHUNK]]
        new = await tx.fetch(Q.insert_children, {"rows": json.dumps(rows)})
        await emit(tx, [event(now, r.id, r.binding, "enqueued") for r in new])
        if jobs[0].tags:  # the children of one node share its tags
            await insert_tags(tx, [(r.id, jobs[0].tags) for r in new])
        inserted += len(new)
    return inserted


async def start_run(
    tx: Tx,
    *,
    run_id: str,
    flow: str,
    input_json: str,
    graph: dict[str, list[str]],
    deadline: float | None,
    parent_job_id: int | None,
    depth: int,
    jobs: Sequence[NewJob],
    now: float,
    parent_run_id: str | None = None,
    spec: str | None = None,
) -> bool:
    """Insert a run and its node jobs atomically; False if a run with that id exists (nothing inserted),
    or if the parent run (of a sub-flow run) is no longer running: a child run never outlives it.

    ``deadline``: its length in seconds (the run is due at ``now + deadline``)."""
    if parent_run_id is not None:  # the parent's row first (the lock order): its cancel waits, or wins
        parent = await tx.fetchone(Q.lock_run, {"id": parent_run_id})
        if parent is None or parent.state != RUN_RUNNING:
            return False
    inserted = await tx.execute(Q.insert_run, {
        "id": run_id, "flow": flow, "input": tx.codec.encode(input_json), "graph": json.dumps(graph),
        "deadline": None if deadline is None else now + deadline, "deadline_seconds": deadline,
        "parent_job_id": parent_job_id, "depth": depth, "now": now, "spec": spec,
    })
    if not inserted:
        return False
    await insert_jobs(tx, jobs, now)
    return True


Move = tuple[Query[Any] | str, dict[str, Any], str | None]
"""A named statement that moves jobs (or a run) on, its parameters, and the event of the jobs it moves
(None: no event; its rows are not jobs that moved)."""
"""A statement on a run's jobs or its row, its parameters, and the event its returned jobs record."""


async def on_finished(tx: Tx, finished: Sequence[tuple[int, str, str | None, str]], now: float) -> None:
    """Nodes reached a terminal state: queue ready downstream nodes, skip failed branches, settle nodes
    waiting for what they spawned, end runs.

    Every run concerned is locked and read in one batch (in run id order, as every transaction that
    locks several runs does): the states of its top-level nodes, for each fan-out with a child
    finished here whether another child is still active, and for each node with a spawned child
    finished here its state and what it spawned. Every move that follows goes out in one more batch.
    A run whose top-level nodes are all done is asked once more whether a fan-out child or a spawned
    child of it is still active (a node cancelled or failed with children running): it ends only when
    none is. A node settled here (its last spawned child finished) moves its run on in turn.
    """
    by_run: dict[str, list[tuple[str | None, str]]] = {}
    for _, run_id, node, state in finished:
        by_run.setdefault(run_id, []).append((node, state))
    asked = _asked(by_run)
    read = _read(asked, iter(await tx.fetch_batch(asked.queries)), now)
    moves: list[Move] = []
    ending: list[tuple[RunRow, dict[str | None, str]]] = []
    for run, states in read.runs:
        moves += _moves(run, by_run[run.id], states, read.done, now)
        if run_settled(run, states):
            ending.append((run, states))
    if ending:
        active = await tx.fetch_batch([(Q.run_child_active, {"run_id": run.id}) for run, _ in ending])
        for (run, states), rows in zip(ending, active, strict=True):
            if not rows:
                moves += end_run(run, states, now)
    await apply_moves(tx, moves, now)
    if read.settle:  # the settled nodes finished: their downstream, their run, their own owner move on
        results = await apply_moves(tx, read.settle, now)
        settled = [(r.id, str(params["run_id"]), str(params["node"]), str(params["state"]))
                   for (_, params, _), rows in zip(read.settle, results, strict=True) for r in rows]
        if settled:
            await on_finished(tx, settled, now)


@dataclass
class _Asked:
    """What :func:`on_finished` reads in its first batch: per run (in run id order) its lock and node
    states, then for each fan-out ``parents`` whether a child is active, for each spawning node of
    ``owners`` its state and what it spawned."""

    order: list[str]
    queries: list[tuple[Query[Any], dict[str, Any] | None]] = field(default_factory=list)
    parents: list[tuple[str, str]] = field(default_factory=list)
    owners: list[tuple[str, str]] = field(default_factory=list)


def _asked(by_run: dict[str, list[tuple[str | None, str]]]) -> _Asked:
    """The first batch's reads for the nodes that finished, by run."""
    asked = _Asked(sorted(by_run))
    for run_id in asked.order:
        asked.queries += [(Q.lock_run, {"id": run_id}), (Q.node_states, {"run_id": run_id})]
        nodes = [n for n, _ in by_run[run_id] if n is not None]
        for parent in sorted({n.split(":", 1)[0] for n in nodes if ":" in n and "/" not in n}):
            asked.parents.append((run_id, parent))
            asked.queries.append((Q.child_active, {"run_id": run_id, **child_range(parent)}))
        for owner in sorted({spawn_owner(n) or "" for n in nodes if "/" in n}):
            asked.owners.append((run_id, owner))
            asked.queries += [(Q.node_results, {"run_id": run_id, "nodes": [owner]}),
                              (Q.spawned_of, {"run_id": run_id, **spawn_range(owner)})]
    return asked


@dataclass
class _Read:
    """The first batch, understood: each run found with its node states, the fan-outs none of whose
    children is active any more, and the moves that settle waiting nodes whose spawned children are done."""

    runs: list[tuple[RunRow, dict[str | None, str]]] = field(default_factory=list)
    done: set[tuple[str, str]] = field(default_factory=set)
    settle: list[Move] = field(default_factory=list)


def _read(asked: _Asked, reads: Iterator[list[Any]], now: float) -> _Read:
    """What the first batch's results (in the order :func:`_asked` asked them) say."""
    out = _Read()
    for run_id in asked.order:
        found, states = next(reads), {r.node: r.state for r in next(reads)}
        for rid, parent in asked.parents:
            if rid == run_id and not next(reads):
                out.done.add((run_id, parent))
        for rid, owner in asked.owners:
            if rid == run_id:
                owner_rows, spawned = next(reads), next(reads)
                busy, error = spawned_outcome(spawned)
                if owner_rows and owner_rows[0].state == "waiting" and not busy:
                    state = "failed" if error else "succeeded"
                    out.settle.append((Q.settle_node, {"run_id": run_id, "node": owner, "state": state,
                                                       "error": error, "now": now}, state))
        if found:
            out.runs.append((found[0], states))
    return out


def _moves(
    run: RunRow, nodes: list[tuple[str | None, str]], states: dict[str | None, str],
    done: set[tuple[str, str]], now: float,
) -> list[Move]:
    """What ``nodes`` reaching their states moves on in ``run`` (``states``: its top-level nodes' states,
    updated; ``done``: the (run, fan-out node) pairs none of whose children is active)."""
    run_id = run.id
    graph: dict[str, list[str]] = json.loads(run.graph)
    down: dict[str, list[str]] = {n: [] for n in graph}
    for n, ups in graph.items():
        for up in ups:
            down[up].append(n)
    moves: list[Move] = []
    woken: set[str] = set()
    anyway = policy(run).anyway
    for node, _ in nodes:
        if node is None or "/" in node:  # a spawned child: its owner is settled by on_finished
            continue
        if ":" in node:  # a fan-out child: wake its parent once all children are done
            parent = node.split(":", 1)[0]
            if (run_id, parent) in done and parent not in woken:
                woken.add(parent)
                moves.append((Q.wake_node, {"run_id": run_id, "node": parent, "now": now}, "queued"))
            continue
        for d, move in _downstream(node, graph, down, states, anyway, running=run.state == RUN_RUNNING):
            states[d] = move  # the run is locked: a node seen waiting is still waiting
            moves.append(_move(run_id, d, move, node, now))
    return moves


def _move(run_id: str, node: str, to: str, upstream: str, now: float) -> Move:
    if to == "queued":
        return (Q.queue_waiting, {"run_id": run_id, "node": node, "now": now}, "queued")
    return (Q.skip_waiting, {"run_id": run_id, "node": node, "now": now,
                             "reason": f"skipped: upstream node {upstream!r} did not succeed"}, "skipped")


def _downstream(
    node: str, graph: dict[str, list[str]], down: dict[str, list[str]], states: dict[str | None, str],
    anyway: frozenset[str], *, running: bool,
) -> list[tuple[str, str]]:
    """A pure plan: the waiting nodes that ``node`` finishing moves on, and where to (``queued`` or
    ``skipped``), in order. A node is queued once every upstream succeeded, or (``anyway``: declared
    with ``on_upstream_failure="run"``) once every upstream finished; otherwise an upstream that did not
    succeed skips it, and the skip goes on downstream. Nodes are queued only while the run runs."""
    plan: list[tuple[str, str]] = []
    seen = dict(states)
    todo = list(down.get(node, []))
    while todo:
        d = todo.pop(0)
        if seen.get(d) != "waiting":
            continue
        ups = [seen.get(u) for u in graph[d]]
        if all(u == "succeeded" for u in ups) or (d in anyway and not any(u in ACTIVE_STATES for u in ups)):
            if running:
                plan.append((d, "queued"))
                seen[d] = "queued"
        elif d not in anyway and any(u is not None and u not in ACTIVE_STATES and u != "succeeded" for u in ups):
            plan.append((d, "skipped"))
            seen[d] = "skipped"
            todo.extend(down.get(d, []))
    return plan


@dataclass(frozen=True)
class Policy:
    """What a run's stored definition says of its nodes' failure paths: the nodes that run whatever
    their upstream's outcome (``anyway``) and those that run only when the run fails (``handlers``)."""

    anyway: frozenset[str] = frozenset()
    handlers: frozenset[str] = frozenset()


def policy(run: RunRow) -> Policy:
    """The failure paths of ``run``'s nodes (none for a run started before definitions were stored)."""
    if run.spec is None:
        return Policy()
    nodes: dict[str, dict[str, Any]] = json.loads(run.spec)["nodes"]
    return Policy(frozenset(n for n, d in nodes.items() if d.get("on_upstream_failure") == "run"),
                  frozenset(n for n, d in nodes.items() if d.get("on_failure")))


FAILURE_STATES = FINISHED_STATES - {"succeeded", "skipped"}
"""The states of a node that fail its run: failed, stalled, cancelled... (a ``skipped`` node does not:
its upstream failed, which fails the run, or its ``when=`` was false)."""


def run_settled(run: RunRow, states: dict[str | None, str]) -> bool:
    """Whether none of ``run``'s jobs is active but its ``on_failure`` nodes waiting for the run's end."""
    handlers = policy(run).handlers if run.state == RUN_RUNNING else frozenset()
    return not any(s in ACTIVE_STATES and not (s == "waiting" and n in handlers) for n, s in states.items())


def end_run(run: RunRow, states: dict[str | None, str], now: float, *, wake: bool = True) -> list[Move]:
    """Ending ``run`` once none of its jobs is active (``states``: at least its top-level nodes'), and
    waking the job that waits for it (unless ``wake`` is False: the caller settles that job)."""
    run_id, state, parent_job_id = run.id, run.state, run.parent_job_id
    if not run_settled(run, states):
        return []
    moves: list[Move] = []
    if state == RUN_RUNNING:
        top = {n: s for n, s in states.items() if n is not None and ":" not in n and "/" not in n}
        failed = sorted(n for n, s in top.items() if s in FAILURE_STATES)
        waiting = sorted(n for n in policy(run).handlers if top.get(n) == "waiting")
        if waiting and failed:  # the run fails: its on_failure nodes run first
            for n in waiting:
                states[n] = "queued"
            return [(Q.queue_waiting, {"run_id": run_id, "node": n, "now": now}, "queued") for n in waiting]
        for n in waiting:  # the run does not fail: they are skipped
            states[n] = "skipped"
            moves.append((Q.skip_waiting, {"run_id": run_id, "node": n, "now": now,
                                           "reason": "skipped: the run did not fail"}, "skipped"))
        error = f"nodes did not succeed: {', '.join(failed)}" if failed else None
        moves.append((Q.set_run_state, {"id": run_id, "state": "failed" if failed else "succeeded", "error": error,
                                        "finished_at": now}, None))
    elif state in RUN_STOPPING:
        moves.append((Q.set_run_state, {"id": run_id, "state": RUN_STOPPING[state], "error": run.error,
                                        "finished_at": now}, None))
    else:
        return []
    if parent_job_id is not None and wake:  # its job is locked first: the wake-up and its report are serialized
        moves.append((Q.lock_job, {"id": parent_job_id}, None))
        moves.append((Q.wake_suspended, {"id": parent_job_id, "now": now}, "queued"))
    return moves


async def apply_moves(tx: Tx, moves: list[Move], now: float) -> list[list[Any]]:
    """Run the moves in one batch and record an event for every job they moved; their records."""
    if not moves:
        return []
    results = await tx.fetch_batch([(query, params) for query, params, _ in moves])
    await emit(tx, [event(now, r.id, r.binding, kind, r.attempt)
                    for (_, _, kind), rows in zip(moves, results, strict=True) if kind is not None for r in rows])
    return results


async def wait_over(tx: Tx, wait: str, run_id: str, node: str) -> bool | None:
    """Whether a suspending node's run-level wait is already over: its children or its sub-run ended
    (None: ``wait`` names an event, which the engine looks up itself)."""
    if wait == CHILDREN_DONE:  # its children exist: it made them
        return not await tx.fetch(Q.child_active, {"run_id": run_id, **child_range(node)})
    if wait == SUBFLOW_DONE:
        child = await tx.fetchone(Q.get_run, {"id": f"{run_id}/{node}"})
        return child is not None and child.state in RUN_FINISHED_STATES
    return None


async def resume_run(tx: Tx, run_id: str, now: float) -> int:
    """Run a failed (or cancelled) run again: succeeded nodes are kept, the rest run again, and the
    deadline is armed again for the run's deadline length from ``now``."""
    run = await tx.fetchone(Q.lock_run, {"id": run_id})
    if run is None:
        raise RunNotFound(run_id)
    if run.state not in RUN_RESUMABLE_STATES:
        raise InvalidTransition(0, run.state, f"resume run {run_id!r}")
    jobs = await tx.fetch(Q.run_jobs, {"run_id": run_id})
    if any(r.state in ACTIVE_STATES for r in jobs):
        raise InvalidTransition(0, "still stopping", f"resume run {run_id!r}")
    graph: dict[str, list[str]] = json.loads(run.graph)
    states = {r.node: r.state for r in jobs}
    handlers = policy(run).handlers  # they wait for the run's end again
    reset = 0
    for job in jobs:
        job_id, node, state, attempt, binding = job.id, job.node, job.state, job.attempt, job.binding
        if state == "succeeded" or node is None:
            continue
        top = top_node(node) or node
        # a fan-out or spawned child exists only if its node ran: its node's upstream succeeded
        ready = top != node or (node not in handlers and all(states.get(u) == "succeeded" for u in graph.get(top, [])))
        target = "queued" if ready else "waiting"
        if await tx.execute(Q.reset_node, {"id": job_id, "state": target, "now": now}):
            reset += 1
            await emit(tx, [event(now, job_id, binding, "requeued" if ready else "waiting", attempt)])
    await tx.execute(Q.set_run_state, {"id": run_id, "state": RUN_RUNNING, "error": None, "finished_at": None})
    if run.deadline_seconds is not None:
        await tx.execute(Q.set_run_deadline, {"id": run_id, "deadline": now + float(run.deadline_seconds)})
    return reset


class RunNotFound(JobloomError):
    """No run with that id."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id!r}")
        self.run_id = run_id


