"""From an attempt's end to its report: what the exception that ended an attempt means (its
outcome kind, error and traceback), and reporting outcomes one at a time after a worker's cycle
failed, so that one outcome the store refuses never wedges the others."""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from jobloom.core import lifecycle
from jobloom.core.queries import Q
from jobloom.core.signals import ChildFailed, Permanent, Retry, Skip, Snooze
from jobloom.core.text import MAX_ERROR_BYTES, storable_text
from jobloom.engine import coordinator, runners
from jobloom.engine.jobs import Outcome, ReportResult
from jobloom.engine.steps import Suspended

if TYPE_CHECKING:
    from jobloom.engine.hooks import EngineHooks
    from jobloom.store.base import Store, Tx

log = logging.getLogger("jobloom.worker")


class Ending(NamedTuple):
    """How an attempt ended, as its outcome records it."""

    kind: str
    error: str | None = None
    traceback: str | None = None
    retry_after: float | None = None
    wait: str | None = None


def ending_of(exc: BaseException, stop_reason: str | None, timeout: float | None) -> Ending:
    """The ending of an attempt that raised ``exc`` (call it in the ``except`` block: the traceback is
    the one being handled). ``stop_reason``: why the worker stopped the attempt, if it did."""
    if isinstance(exc, Suspended):
        return Ending(lifecycle.SUSPENDED, retry_after=exc.wake_at, wait=exc.wait)
    if isinstance(exc, asyncio.CancelledError):
        if stop_reason == "cancel":
            ending = Ending(lifecycle.CANCELLED, "cancelled while running")
        elif stop_reason == "timeout":
            ending = Ending(lifecycle.TIMEOUT, f"timed out after {timeout:g} s")
        elif stop_reason == "lease_lost":
            ending = Ending(lifecycle.LOST, "lease lost: the worker could not renew it in time, and stopped the job")
        else:
            ending = Ending(lifecycle.LOST, f"interrupted ({stop_reason or 'task cancelled'})")
        if isinstance(exc, runners.Stopped):  # a sync job, ended only now: how it ended
            ending = ending._replace(error=f"{ending.error}; {exc.detail}", traceback=exc.tb)
        return ending
    if isinstance(exc, runners.JobError):  # from a child process, or a BaseException from a sync thread
        return Ending(exc.kind, exc.error, exc.tb)
    if isinstance(exc, Snooze):
        return Ending(lifecycle.SNOOZED, str(exc), retry_after=exc.after)
    if isinstance(exc, Retry):
        return Ending(lifecycle.RETRY, exc.reason, retry_after=exc.after)
    if isinstance(exc, Skip):
        return Ending(lifecycle.SKIPPED, f"skipped: {exc}")
    if isinstance(exc, ChildFailed):  # a call's child did not succeed: the caller fails, naming it
        return Ending(lifecycle.PERMANENT, f"ChildFailed: {exc}", traceback.format_exc())
    if isinstance(exc, Permanent):
        return Ending(lifecycle.PERMANENT, f"Permanent: {exc}", traceback.format_exc())
    # any other exception; a SystemExit or KeyboardInterrupt from a job fails the job, not the worker
    return Ending(lifecycle.FAILED, f"{type(exc).__name__}: {exc}", traceback.format_exc())


async def report_one_by_one(
    store: Store, outcomes: list[Outcome], cause: BaseException, *, now: Callable[[], float], hooks: EngineHooks,
    transient: Callable[[BaseException], bool], after: Callable[[Tx, ReportResult], Awaitable[Any]] | None = None,
) -> bool:
    """After a cycle failed for a reason that is not transient, report each pending outcome on its own
    (each reported one is removed from ``outcomes``).

    An outcome that cannot be applied ends its job as failed, with an error that says why (its
    result, traceback and payload are dropped); if even that cannot be stored, the attempt is
    failed by the narrowest statement there is. Returns False if the store failed transiently
    meanwhile (the caller backs off and tries the whole cycle again)."""
    log.error("jobloom cycle failed (%s: %s): reporting its %d outcome(s) one by one",
              type(cause).__name__, cause, len(outcomes))

    async def report(tx: Tx, o: Outcome) -> None:
        done = await coordinator.report(tx, [o], now(), hooks=hooks)
        if after is not None:
            await after(tx, done)

    for o in list(outcomes):
        try:
            await store.transact(lambda tx, o=o: report(tx, o))  # type: ignore[misc]
        except Exception as exc:
            if transient(exc):
                return False
            why = storable_text(f"jobloom could not store the outcome of this attempt ({o.kind}): "
                                f"{type(exc).__name__}: {exc}", MAX_ERROR_BYTES) or ""
            log.error("job %d attempt %d: %s", o.job_id, o.attempt, why)
            fallback = Outcome(o.job_id, o.attempt, lifecycle.PERMANENT, o.worker, o.started_at, o.finished_at,
                               error=why, run_id=o.run_id)
            try:
                await store.transact(lambda tx, f=fallback: report(tx, f))  # type: ignore[misc]
            except Exception as again:
                if transient(again):
                    return False
                await store.transact(lambda tx, f=fallback: coordinator.quarantine(tx, f, now()))  # type: ignore[misc]
        outcomes[:] = [x for x in outcomes if x is not o]
    return True


async def release_orphans(store: Store, worker: str, known: set[tuple[int, int]], *, now: Callable[[], float]) -> int:
    """Give back the jobs the store shows running for ``worker`` that are not in ``known`` (attempts it
    runs or has outcomes of): claims that committed in a cycle whose answer the worker never heard."""

    async def work(tx: Tx) -> int:
        rows = await tx.fetch(Q.running_of_worker, {"worker": worker})
        orphans = [(r.id, r.attempt, r.binding) for r in rows if (r.id, r.attempt) not in known]
        return await coordinator.release(tx, worker, orphans, now()) if orphans else 0

    released = await store.transact(work)
    if released:
        log.warning("released %d job(s) claimed during a failed cycle", released)
        await store.notify()
    return released
