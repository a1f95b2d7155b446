"""Flows' side of the engine's hooks (:class:`jobloom.engine.hooks.EngineHooks`): what happens to a
run when one of its jobs changes, and how a worker runs a fan-out or a sub-flow node."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from jobloom.core.queries import Q
from jobloom.flows import execute, runs
from jobloom.flows.api import flow_bindings
from jobloom.flows.flow import MAP_BINDING

if TYPE_CHECKING:
    from jobloom.core.types import Job
    from jobloom.engine.hooks import Finished
    from jobloom.engine.jobs import Claimed
    from jobloom.flows.host import FlowHost
    from jobloom.store.base import Tx


class FlowHooks:
    """The hooks an app gives its engine. Every app has them, flows or not: its workers may reap or
    report jobs of another app's runs on the same store, and those runs must move on all the same."""

    def __init__(self, host: FlowHost) -> None:
        self.host = host
        self.internal_bindings = tuple(flow_bindings(dict(host.flows)))
        self._contexts = execute.NodeContexts(host)

    async def finished(self, tx: Tx, jobs: Sequence[Finished], now: float) -> None:
        """Move the runs of jobs that reached a state on (see :func:`jobloom.flows.runs.on_finished`)."""
        await runs.on_finished(tx, jobs, now)

    async def spawned(self, tx: Tx, asked: Sequence[tuple[int, str, str]]) -> dict[int, tuple[bool, str | None]]:
        """Whether the children each succeeding node spawned are still active, or one did not succeed."""
        found = await tx.fetch_batch([(Q.spawned_of, {"run_id": run_id, **runs.spawn_range(node)})
                                      for _, run_id, node in asked])
        return {job_id: runs.spawned_outcome(rows) for (job_id, _, _), rows in zip(asked, found, strict=True) if rows}

    async def wait_over(self, tx: Tx, wait: str, run_id: str, node: str) -> bool | None:
        """Whether a node's children or its sub-run ended; None for a wait on an event."""
        return await runs.wait_over(tx, wait, run_id, node)

    async def run_node(self, c: Claimed) -> Any:
        """Run a fan-out or a sub-flow node."""
        if c.binding == MAP_BINDING:
            return await execute.run_map(self._contexts, c)
        return await execute.run_subflow(self._contexts, c)

    async def node_payload(self, c: Claimed) -> str:
        """A node's payload, built with its ``input`` function from the run's input and upstream results."""
        return await execute.node_payload(self._contexts, c)

    def spawner(self, c: Claimed) -> Callable[..., Awaitable[Job]]:
        """``ctx.spawn`` of a job of a run."""
        return execute.run_spawner(self.host, c)
