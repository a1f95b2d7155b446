"""Stopping flow runs: cancelling them, and failing them at their deadline, with their sub-flow runs.

One rule for both. The run's unstarted nodes end at once (``cancelled``, or ``failed`` at a deadline),
its running nodes are asked to stop as a cancelled job is, and every run of its sub-flows at any depth
(``<id>/<node>...``) is cancelled the same way. A run being stopped is ``cancelling`` (or ``failing``)
until none of its jobs and none of its sub-flow runs is active any more; then it is ``cancelled``
(or ``failed``). A sub-flow node that waits for its child run stays until that run has ended.

The run and its sub-flow runs are locked in id order before any of their jobs (the lock order, set
out in docs/explanation/architecture.md, "Lock order").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobloom.core.errors import InvalidTransition
from jobloom.core.queries import Q
from jobloom.core.rows import MomentRow, RunRow
from jobloom.core.states import RUN_CANCELLING, RUN_FAILING, RUN_RUNNING, RUN_STOPPING
from jobloom.engine.jobs import emit, event
from jobloom.flows.runs import Move, RunNotFound, apply_moves, end_run
from jobloom.store.base import Tx

if TYPE_CHECKING:
    from jobloom.store.base import Store



async def cancel_run(tx: Tx, run_id: str, now: float) -> str:
    """Cancel a run and its sub-flow runs; the run's state after it (``cancelled``, or ``cancelling``
    while some of its nodes are still stopping)."""
    run = await tx.fetchone(Q.lock_run, {"id": run_id})
    if run is None:
        raise RunNotFound(run_id)
    if run.state == RUN_CANCELLING:
        return RUN_CANCELLING
    if run.state != RUN_RUNNING:
        raise InvalidTransition(0, run.state, f"cancel run {run_id!r}")
    ended = await _stop(tx, [run], RUN_CANCELLING, "cancelled", now)
    return RUN_STOPPING[RUN_CANCELLING] if run_id in ended else RUN_CANCELLING


async def fail_past_deadline(tx: Tx, now: float, limit: int = 50) -> list[str]:
    """Runs past their deadline are stopped: unstarted nodes fail, running ones are cancelled, their
    sub-flow runs are cancelled, and each ends ``failed`` once nothing of it runs. Their ids."""
    due = sorted(r.id for r in await tx.fetch(Q.runs_past_deadline, {"now": now, "limit": limit}))
    locked = await tx.fetch_batch([(Q.lock_run, {"id": run_id}) for run_id in due])
    runs: list[RunRow] = [found[0] for found in locked if found and found[0].state == RUN_RUNNING]
    # a due run that is a sub-flow run of another due run is stopped as that run's descendant
    roots = [r for r in runs if not any(r.id.startswith(o.id + "/") for o in runs)]
    if roots:
        await _stop(tx, roots, RUN_FAILING, "deadline passed", now)
    return [r.id for r in roots]


async def _lock_descendants(tx: Tx, roots: list[str]) -> list[RunRow]:
    """Lock the sub-flow runs of ``roots`` at any depth, in id order, and return their rows. A run made
    between the read and the locks (a sub-flow starting now) is found by reading again."""
    seen: set[str] = set(roots)
    rows: list[RunRow] = []
    while True:
        found = await tx.fetch_batch([(Q.descendant_runs, {"lo": r + "/", "hi": r + "0"}) for r in roots])
        new = sorted({r.id for rs in found for r in rs} - seen)
        if not new:
            return sorted(rows, key=lambda r: str(r.id))
        seen |= set(new)
        rows += [found[0] for found in await tx.fetch_batch([(Q.lock_run, {"id": i}) for i in new]) if found]


async def _stop(tx: Tx, roots: list[RunRow], state: str, error: str, now: float) -> set[str]:
    """Stop the (locked) ``roots`` and their sub-flow runs; the ids of the runs that ended at once."""
    below = await _lock_descendants(tx, [r.id for r in roots])
    stopping = [(r, state, error) for r in roots]
    why = "parent run cancelled" if state == RUN_CANCELLING else "parent run deadline passed"
    stopping += [(r, RUN_CANCELLING, why) for r in below if r.state == RUN_RUNNING]
    stopping.sort(key=lambda s: str(s[0].id))
    for run, st, err in stopping:
        statement = Q.fail_unstarted if st == RUN_FAILING else Q.cancel_unstarted
        rows = await tx.fetch(statement, {"run_id": run.id, "now": now, "reason": f"run {err}"})
        await emit(tx, [event(now, r.id, r.binding, RUN_STOPPING[st], r.attempt) for r in rows])
        await tx.execute(Q.cancel_running_of_run, {"run_id": run.id})
        await tx.execute(Q.set_run_state, {"id": run.id, "state": st, "error": err, "finished_at": None})
    # the deepest runs first: a sub-flow run that ends at once ends its (suspended) node in the parent
    # run, which may then end too
    ids = {run.id for run, _, _ in stopping}
    ended: set[str] = set()
    for run, st, err in reversed(stopping):
        jobs = await tx.fetch(Q.run_jobs, {"run_id": run.id})
        parent_run = run.id.rsplit("/", 1)[0] if "/" in run.id else None
        parent_job = run.parent_job_id if parent_run in ids else None
        moves: list[Move] = end_run(run._replace(state=st, error=err), {r.node: r.state for r in jobs}, now,
                                 wake=parent_job is None)
        if moves and parent_job is not None:
            job = await tx.fetchone(Q.lock_job, {"id": parent_job})
            if job is not None and await tx.execute(Q.cancel_now, {"id": parent_job, "now": now, "reason": err}):
                await emit(tx, [event(now, parent_job, job.binding, "cancelled", job.attempt)])
        await apply_moves(tx, moves, now)
        if moves:
            ended.add(run.id)
    return ended


class RunDeadlines:
    """A housekeeper that stops runs past their deadline (see :func:`fail_past_deadline`)."""

    name = "run-deadlines"

    def __init__(self, recheck: float = 5.0) -> None:
        self.recheck = recheck
        self._due: float | None = None
        self._checked_at = 0.0

    async def next_due(self, store: Store, now: float) -> float | None:
        """The earliest deadline of a running run (re-read at most every ``recheck`` seconds)."""
        if self._checked_at == 0.0 or now - self._checked_at >= self.recheck:

            async def read(tx: Tx) -> MomentRow | None:
                return await tx.fetchone(Q.next_run_deadline)

            row = await store.transact(read, exclusive=False)
            self._checked_at = now
            self._due = None if row is None or row.at is None else float(row.at)
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
