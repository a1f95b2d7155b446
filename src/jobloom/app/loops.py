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


class _Core:
    """What an app holds per event loop: a connected store and its enqueue coalescer."""

    def __init__(self, store: Store, telemetry: Telemetries, offload: Offload | None = None) -> None:
        self.store = store
        self.enqueuer = Enqueuer(store, telemetry, offload)
        self.ready = asyncio.Lock()
        self.checked = False


class _SyncBridge:
    """A private event loop in a daemon thread that runs the app's coroutines for sync callers."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="jobloom-sync", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
