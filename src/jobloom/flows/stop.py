"""Stopping flow runs: cancelling them, and failing them at their deadline, with their sub-flow runs.

One rule for both. The run's unstarted nodes end at once (``cancelled``, or ``failed`` at a deadline),
its running nodes are asked to stop as a cancelled job is, and every run of its sub-flows at any depth
(``<id>/<node>...``) is cancelled the same way. A run being stopped is ``cancelling`` (or ``failing``)
until none of its jobs and none of its sub-flow runs is active any more; then it is ``cancelled``
(or ``failed``). A sub-flow node that waits for its child run stays until that run has ended.

The run and its sub-flow runs are locked in id order before any of their jobs (the lock order of
:mod:`jobloom.coordinator`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobloom.core.errors import InvalidTransition
from jobloom.engine.jobs import emit, event
from jobloom.flows.runs import RUN_RUNNING, STOPPING, Move, RunNotFound, _apply, _end
from jobloom.store.base import Tx

if TYPE_CHECKING:
    from jobloom.store.base import Store

CANCELLING = "cancelling"
FAILING = "failing"


async def cancel_run(tx: Tx, run_id: str, now: float) -> str:
    """Cancel a run and its sub-flow runs; the run's state after it (``cancelled``, or ``cancelling``
    while some of its nodes are still stopping)."""
    run = await tx.fetchone("lock_run", {"id": run_id})
    if run is None:
        raise RunNotFound(run_id)
    if run[2] == CANCELLING:
        return CANCELLING
    if run[2] != RUN_RUNNING:
        raise InvalidTransition(0, run[2], f"cancel run {run_id!r}")
    ended = await _stop(tx, [run], CANCELLING, "cancelled", now)
    return STOPPING[CANCELLING] if run_id in ended else CANCELLING


async def fail_past_deadline(tx: Tx, now: float, limit: int = 50) -> list[str]:
    """Runs past their deadline are stopped: unstarted nodes fail, running ones are cancelled, their
    sub-flow runs are cancelled, and each ends ``failed`` once nothing of it runs. Their ids."""
    due = sorted(r[0] for r in await tx.fetch("runs_past_deadline", {"now": now, "limit": limit}))
    locked = await tx.fetch_batch([("lock_run", {"id": run_id}) for run_id in due])
    runs = [found[0] for found in locked if found and found[0][2] == RUN_RUNNING]
    # a due run that is a sub-flow run of another due run is stopped as that run's descendant
    roots = [r for r in runs if not any(r[0].startswith(o[0] + "/") for o in runs)]
    if roots:
        await _stop(tx, roots, FAILING, "deadline passed", now)
    return [r[0] for r in roots]


async def _lock_descendants(tx: Tx, roots: list[str]) -> list[tuple[Any, ...]]:
    """Lock the sub-flow runs of ``roots`` at any depth, in id order, and return their rows. A run made
    between the read and the locks (a sub-flow starting now) is found by reading again."""
    seen: set[str] = set(roots)
    rows: list[tuple[Any, ...]] = []
    while True:
        found = await tx.fetch_batch([("descendant_runs", {"lo": r + "/", "hi": r + "0"}) for r in roots])
        new = sorted({r[0] for rs in found for r in rs} - seen)
        if not new:
            return sorted(rows, key=lambda r: str(r[0]))
        seen |= set(new)
        rows += [found[0] for found in await tx.fetch_batch([("lock_run", {"id": i}) for i in new]) if found]


async def _stop(tx: Tx, roots: list[tuple[Any, ...]], state: str, error: str, now: float) -> set[str]:
    """Stop the (locked) ``roots`` and their sub-flow runs; the ids of the runs that ended at once."""
    below = await _lock_descendants(tx, [r[0] for r in roots])
    stopping = [(r, state, error) for r in roots]
    why = "parent run cancelled" if state == CANCELLING else "parent run deadline passed"
    stopping += [(r, CANCELLING, why) for r in below if r[2] == RUN_RUNNING]
    stopping.sort(key=lambda s: str(s[0][0]))
    for run, st, err in stopping:
        statement = "fail_unstarted" if st == FAILING else "cancel_unstarted"
        rows = await tx.fetch(statement, {"run_id": run[0], "now": now, "reason": f"run {err}"})
        await emit(tx, [event(now, r[0], r[1], STOPPING[st], r[2]) for r in rows])
        await tx.execute("cancel_running_of_run", {"run_id": run[0]})
        await tx.execute("set_run_state", {"id": run[0], "state": st, "error": err, "finished_at": None})
    # the deepest runs first: a sub-flow run that ends at once ends its (suspended) node in the parent
    # run, which may then end too
    ids = {run[0] for run, _, _ in stopping}
    ended: set[str] = set()
    for run, st, err in reversed(stopping):
        jobs = await tx.fetch("run_jobs", {"run_id": run[0]})
        parent_run = run[0].rsplit("/", 1)[0] if "/" in run[0] else None
        inside = run[6] is not None and parent_run in ids
        moves: list[Move] = _end((*run[:2], st, *run[3:8], err, *run[9:]), {r[1]: r[2] for r in jobs}, now,
                                 wake=not inside)
        if moves and inside:
            job = await tx.fetchone("lock_job", {"id": run[6]})
            if job is not None and await tx.execute("cancel_now", {"id": run[6], "now": now, "reason": err}):
                await emit(tx, [event(now, run[6], job[3], "cancelled", job[2])])
        await _apply(tx, moves, now)
        if moves:
            ended.add(run[0])
    return ended


class RunDeadlines:
    """A housekeeper that stops runs past their deadline (see :func:`jobloom.flowstop.fail_past_deadline`)."""

    name = "run-deadlines"

    def __init__(self, recheck: float = 5.0) -> None:
        self.recheck = recheck
        self._due: float | None = None
        self._checked_at = 0.0

    async def next_due(self, store: Store, now: float) -> float | None:
        """The earliest deadline of a running run (re-read at most every ``recheck`` seconds)."""
        if self._checked_at == 0.0 or now - self._checked_at >= self.recheck:

            async def read(tx: Tx) -> Any:
                return await tx.fetchone("next_run_deadline")

            row = await store.transact(read, exclusive=False)
            self._checked_at = now
            self._due = None if row is None or row[0] is None else float(row[0])
        later = self._checked_at + self.recheck
        return later if self._due is None else min(self._due, later)

    async def planned(self, store: Store, now: float) -> float | None:
        """The earliest deadline of a running run, read now."""
        self._checked_at = 0.0
        await self.next_due(store, now)
        return self._due

    async def run(self, store: Store, now: float) -> bool:
        """Fail the runs whose deadline passed."""

        async def work(tx: Tx) -> list[str]:
            return await fail_past_deadline(tx, now)

        failed = await store.transact(work)
        self._checked_at = 0.0
        return bool(failed)
