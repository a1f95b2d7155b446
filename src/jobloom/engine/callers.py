"""The transaction side of calls (:mod:`jobloom.engine.calls`): what the coordinator does when a
caller suspends and when a called child ends."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from jobloom.core.queries import Q
from jobloom.core.states import FINISHED_STATES
from jobloom.engine.jobs import emit, event

if TYPE_CHECKING:
    from jobloom.store.base import Tx

CALL_WAIT = "\x1fcalls:"
"""What a caller's suspension waits for, followed by its children's ids: no event name can start so
(names have no control characters)."""


def call_wait(wait: str | None) -> list[int] | None:
    """The children a suspension waits for, if it is a caller's (else None)."""
    if wait is None or not wait.startswith(CALL_WAIT):
        return None
    return [int(i) for i in wait[len(CALL_WAIT):].split(",") if i]


async def children_ended(tx: Tx, children: list[int]) -> bool:
    """Whether one of the children a suspending caller waits for has ended (read under their locks,
    which a child's end holds until it commits: an end is seen here, or its wake-up finds the caller
    suspended)."""
    rows = await tx.fetch(Q.call_children, {"ids": children})
    return len(rows) < len(children) or any(r.state in FINISHED_STATES for r in rows)


async def wake_callers(tx: Tx, parents: Iterable[int], now: float) -> int:
    """Wake the suspended callers of children that ended in this transaction (how many were woken). A
    caller that is not suspended is left alone: it is running (its report sees the end) or has ended."""
    woken = 0
    for parent in sorted(set(parents)):
        rows = await tx.fetch(Q.wake_suspended, {"id": parent, "now": now})
        await emit(tx, [event(now, r.id, r.binding, "queued", r.attempt) for r in rows])
        woken += len(rows)
    return woken
