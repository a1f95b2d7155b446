"""Housekeeping that workers run besides jobs (schedules, retention, projection), on the worker's one timer.

A housekeeper says when it next wants to run; the worker sleeps until the earliest of that, its own
due moments and wake-ups, then calls :meth:`Housekeeper.run`. Several workers may run the same
housekeeper: each must make its work safe to repeat (unique keys, cursors, bounded batches).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from jobloom.store.base import Store


@runtime_checkable
class Housekeeper(Protocol):
    """Periodic work driven by the worker's timer."""

    name: str

    async def next_due(self, store: Store, now: float) -> float | None:
        """The epoch second at which :meth:`run` should next be called (None: nothing planned)."""
        ...

    async def run(self, store: Store, now: float) -> bool:
        """Do the due work in ``store`` (own transactions); return True if jobs became runnable."""
        ...

    async def planned(self, store: Store, now: float) -> float | None:
        """The next moment at which the work depends on the time (a schedule's tick, a run's deadline),
        leaving out periodic passes; a test clock (``jobloom.testing``) stops at each one as it moves on."""
        ...


log = logging.getLogger("jobloom.worker")


async def run_due(
    housekeepers: Sequence[Housekeeper], store: Store, *, now: Callable[[], float], stopping: Callable[[], bool],
    made_runnable: Callable[[], None],
) -> float | None:
    """Run the housekeepers that are due; return the earliest next due moment of all.

    ``next_due`` is asked on every pass, so it must be cheap (kept in memory, refreshed on runs). A
    housekeeper that fails is logged and asked again a second later; one that made jobs runnable
    wakes the other processes (``store.notify``) and calls ``made_runnable``.
    """
    due: float | None = None
    for keeper in housekeepers:
        if stopping():
            return None
        try:
            when = await keeper.next_due(store, now())
            if when is not None and when <= now():
                if await keeper.run(store, now()):
                    await store.notify()
                    made_runnable()
                when = await keeper.next_due(store, now())
        except Exception as exc:
            log.warning("housekeeper %s failed (%s: %s)", keeper.name, type(exc).__name__, exc)
            when = now() + 1.0
        if when is not None:
            due = when if due is None else min(due, when)
    return due
