"""What a worker's parts share, each given it explicitly: the store's clock, the state of a stop, and the
events that wake the worker's loop and its housekeeping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobloom.store.base import Store

if TYPE_CHECKING:
    from jobloom.engine.host import Host


class Clock:
    """The store's clock (epoch seconds): every time a worker stores or compares with stored times.

    Before the worker runs, the store may not be open yet: its clock is then read through the app
    (or the system's, with no store open). Once the worker runs on a store, :attr:`now` is that
    store's own ``now`` (read once per attempt and per cycle: no indirection left)."""

    def __init__(self, app: Host) -> None:
        self._app = app
        self.now: Callable[[], float] = self._before
        self.store: Store | None = None
        """The store of the loop the worker runs on, once it runs."""

    def _before(self) -> float:
        store = self._app.store_if_open()
        return time.time() if store is None else store.now()

    def use(self, store: Store) -> Store:
        """The worker runs on ``store``: its clock is now read directly."""
        self.store = store
        self.now = store.now
        return store


@dataclass
class Stopping:
    """Where a worker's stop stands (moved only by its :class:`~jobloom.engine.worker.shutdown.Shutdown`)."""

    requested: bool = False
    """Whether the worker was asked to stop (it claims nothing more)."""
    now_requested: bool = False
    """Whether it was asked to stop at once (``stop_now``)."""
    deadline: float | None = None
    """Monotonic: the end of the grace period (moved to the moment of ``stop_now``)."""

    def past_deadline(self) -> bool:
        """Whether the grace period is over."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    async def pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when the stop's deadline comes first."""
        if self.deadline is not None:
            seconds = min(seconds, max(0.0, self.deadline - time.monotonic()))
        await asyncio.sleep(seconds)


@dataclass
class Wakes:
    """The events that wake a worker: its loop (a finished job, a signal, a stop) and its housekeeping."""

    loop: asyncio.Event = field(default_factory=asyncio.Event)
    housekeeping: asyncio.Event = field(default_factory=asyncio.Event)

    def all(self) -> None:
        """Wake both (another process signalled, or the worker is stopping)."""
        self.loop.set()
        self.housekeeping.set()
