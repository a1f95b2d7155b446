"""Housekeeping that workers run besides jobs (schedules, retention, projection), on the worker's one timer.

A housekeeper says when it next wants to run; the worker sleeps until the earliest of that, its own
due moments and wake-ups, then calls :meth:`Housekeeper.run`. Several workers may run the same
housekeeper: each must make its work safe to repeat (unique keys, cursors, bounded batches).
"""

from __future__ import annotations

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
