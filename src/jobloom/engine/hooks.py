"""The engine's callbacks into what is built on jobs (flows): the one seam through which the
coordinator and the worker reach a run, without importing the layer above.

The coordinator calls the transaction-side methods inside its own transaction, under the lock order
of :mod:`jobloom.engine.coordinator` (runs before jobs); they run no user code. The worker calls
the execution-side methods while it runs a claimed job, outside any transaction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from jobloom.core.types import Job
    from jobloom.engine.jobs import Claimed
    from jobloom.store.base import Tx

Finished = tuple[int, str, "str | None", str]
"""A job of a run that reached a state: (job id, run id, node, state)."""


class EngineHooks(Protocol):
    """What the engine asks of the runs its jobs belong to (``jobloom.flows.hooks.FlowHooks``)."""

    @property
    def internal_bindings(self) -> Collection[str]:
        """Bindings that the hooks run themselves (:meth:`run_node`), not a performer."""
        ...

    async def finished(self, tx: Tx, jobs: Sequence[Finished], now: float) -> None:
        """Jobs of runs reached a state: move their runs on (inside ``tx``; their runs are locked)."""
        ...

    async def spawned(self, tx: Tx, asked: Sequence[tuple[int, str, str]]) -> dict[int, tuple[bool, str | None]]:
        """For (job id, run id, node) of succeeding nodes: whether a child they spawned is still
        active, and the error of one that did not succeed; only the nodes that spawned any."""
        ...

    async def wait_over(self, tx: Tx, wait: str, run_id: str, node: str) -> bool | None:
        """Whether a node's run-level wait (its children, its sub-run) is over; None: not a run wait."""
        ...

    async def run_node(self, c: Claimed) -> Any:
        """Run a job of an internal binding (a fan-out or a sub-flow node); return its result."""
        ...

    async def node_payload(self, c: Claimed) -> str:
        """Build the payload of a node job that was enqueued without one (from its upstream)."""
        ...

    def spawner(self, c: Claimed) -> Callable[..., Awaitable[Job]]:
        """``ctx.spawn`` for a job of a run: children belong to the same run."""
        ...
