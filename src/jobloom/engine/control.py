"""The worker's side of one running attempt, as its performer reaches it through ``self.ctx``: its
progress, whether it was asked to stop, and (for a sync ``perform`` in a thread) a bridge that runs
the engine's coroutines on the worker's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

from jobloom.engine.progress import ProgressBuffer, progress_json
from jobloom.engine.running import Running

T = TypeVar("T")


class Control:
    """Implements ``jobloom.core.types.AttemptControl`` for one attempt of this worker."""

    __slots__ = ("buffer", "loop", "now", "rec", "sync")

    def __init__(self, rec: Running, buffer: ProgressBuffer, now: Callable[[], float], *, sync: bool) -> None:
        self.rec = rec
        self.buffer = buffer
        self.now = now
        self.sync = sync
        # the worker's loop, which a sync job's thread hands its calls to (an async job runs on it)
        self.loop = asyncio.get_running_loop() if sync else None

    @property
    def stop_reason(self) -> str | None:
        """Why the worker asked the attempt to stop ("cancel", "timeout", "lease_lost", "shutdown"), or None."""
        return self.rec.stop_reason

    def progress(self, fraction: float, message: str | None) -> None:
        """Check and record progress; from a sync job's thread it is handed to the event loop."""
        data = progress_json(fraction, message, self.now(), self.rec.key[1])
        if not self.sync:
            self.buffer.record(self.rec.key, data)
            return
        assert self.loop is not None  # a sync job's control holds the worker's loop
        with contextlib.suppress(RuntimeError):  # the loop is closed: the worker has exited
            self.loop.call_soon_threadsafe(self.buffer.record, self.rec.key, data)

    def call(self, work: Awaitable[T]) -> T:
        """Run ``work`` on the worker's event loop and wait for its result (from a sync job's thread)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if self.loop is None or running is self.loop:
            if inspect.iscoroutine(work):
                work.close()
            raise RuntimeError("the synchronous form was called on the event loop: await it in an async perform")
        return asyncio.run_coroutine_threadsafe(_wait(work), self.loop).result()


async def _wait(work: Awaitable[T]) -> T:
    return await work
