"""A worker's completer: the outcomes of finished attempts, kept until a cycle reports them, and their
report (inside the cycle's transaction, or one by one after a cycle failed for a reason that is not
transient).

An outcome is kept until a report of it commits; the heartbeat renews the lease of every attempt with
an outcome pending, so a job that finished here is never reaped while its report waits for the store.
Once the worker stops reporting (:attr:`Completer.closed`), an attempt that ends is only logged."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any

from jobloom.core.rows import HookRow
from jobloom.engine import coordinator, lifecycle_hooks, reporting
from jobloom.engine.jobs import Outcome, ReportResult
from jobloom.engine.lifecycle_hooks import HookRunner
from jobloom.engine.progress import ProgressBuffer
from jobloom.engine.running import Key
from jobloom.engine.worker.shared import Clock
from jobloom.store.base import Tx

if TYPE_CHECKING:
    from jobloom.engine.host import Host


class Completer:
    """The outcomes a worker has to report, and their report."""

    def __init__(self, app: Host, name: str, clock: Clock, progress: ProgressBuffer) -> None:
        self._app = app
        self._name = name
        self._clock = clock
        self._progress = progress
        self.outcomes: list[Outcome] = []
        """The outcomes not reported yet, oldest first."""
        self.closed = False
        """Set once the worker reports nothing more: an attempt that ends then is only logged."""
        self.hooks = HookRunner(app, name, clock.now)
        """The performers' lifecycle hooks of the outcomes it stored, run once their cycle committed."""
        self._recorded: list[HookRow] = []  # the hooks the cycle's transaction wrote

    def add(self, outcome: Outcome) -> None:
        """An attempt ended: its outcome waits for the next cycle."""
        self.outcomes.append(outcome)

    def extend(self, outcomes: Iterable[Outcome]) -> None:
        """Attempts ended (a batch's): their outcomes wait for the next cycle."""
        self.outcomes.extend(outcomes)

    def pending(self) -> list[Key]:
        """The (job id, attempt) of every outcome pending."""
        return [(o.job_id, o.attempt) for o in self.outcomes]

    def take(self) -> tuple[list[Outcome], list[dict[str, Any]]]:
        """What a cycle reports: the outcomes pending now (kept until :meth:`applied`) and their jobs' last
        progress."""
        outcomes = list(self.outcomes)
        self._recorded = []
        return outcomes, self._progress.take((o.job_id, o.attempt) for o in outcomes) if outcomes else []

    async def report(self, tx: Tx, outcomes: list[Outcome], progress: list[dict[str, Any]], now: float,
                     locked: Any) -> int:
        """Report ``outcomes`` in a cycle's transaction: their last progress first, while still running; how
        many jobs waiting on them it made runnable (dependants released, callers woken)."""
        await self._progress.write(tx, self._name, progress)
        reported = await coordinator.report(tx, outcomes, now, hooks=self._app.hooks, locked=locked)
        self._recorded = await lifecycle_hooks.record(tx, self._app.specs, reported.ended, now)
        return reported.released + reported.woken

    def applied(self, outcomes: Collection[Outcome]) -> None:
        """A cycle that reported ``outcomes`` committed: let go of them, and run their lifecycle hooks."""
        if outcomes and self._recorded:
            self.hooks.start(self._recorded)
        self._recorded = []
        done = {id(o) for o in outcomes}
        self.outcomes[:] = [o for o in self.outcomes if id(o) not in done]

    def drop(self, keys: Collection[Key]) -> None:
        """Forget the outcomes of these attempts (their jobs were given back unstarted)."""
        self.outcomes[:] = [o for o in self.outcomes if (o.job_id, o.attempt) not in keys]

    async def isolate(self, cause: BaseException, transient: Callable[[BaseException], bool]) -> bool:
        """Report each pending outcome on its own (see :func:`~jobloom.engine.reporting.report_one_by_one`)."""
        return await reporting.report_one_by_one(await self._app.store(), self.outcomes, cause, now=self._clock.now,
                                                 hooks=self._app.hooks, transient=transient, after=self._record)

    async def _record(self, tx: Tx, reported: ReportResult) -> None:
        """Write the lifecycle hooks of an outcome reported on its own (run by its row's lease: see
        :mod:`~jobloom.engine.lifecycle_hooks`)."""
        await lifecycle_hooks.record(tx, self._app.specs, reported.ended, self._clock.now())
