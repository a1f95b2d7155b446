"""What an app holds per event loop (a connected store and its enqueue coalescer), and the private
loop thread that runs the app's coroutines for synchronous callers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from jobloom.engine.enqueue import Enqueuer
from jobloom.engine.offload import Offload
from jobloom.engine.telemetry import Telemetries
from jobloom.store import Store

T = TypeVar("T")


class Core:
    """What an app holds per event loop: a connected store and its enqueue coalescer."""

    def __init__(self, store: Store, telemetry: Telemetries, offload: Offload | None = None) -> None:
        self.store = store
        self.enqueuer = Enqueuer(store, telemetry, offload)
        self.ready = asyncio.Lock()
        self.checked = False


class SyncBridge:
    """A private event loop in a daemon thread that runs the app's coroutines for sync callers: started
    at the first :meth:`run`, stopped by :meth:`stop` (a later :meth:`run` starts another)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        """Whether the loop thread runs (a :meth:`run` since the last :meth:`stop`)."""
        return self._loop is not None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop thread (started now if it is not) and return its result."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=loop.run_forever, name="jobloom-sync", daemon=True)
            self._thread.start()
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def stop(self) -> None:
        """Stop the loop thread, if it was started."""
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
