"""Coalescing: the calls made in one event-loop tick, run as one batch (one transaction, not one each)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from jobloom.core.errors import CommitUnknown

In = TypeVar("In")
Out = TypeVar("Out")


class Coalescer(Generic[In, Out]):
    """Collects the items submitted in one loop tick and hands them to ``run`` together.

    ``run`` takes the items in the order they were submitted and returns one result per item; each
    caller's future gets its own result. If a batch of several items fails, each item is run again on
    its own, so that one caller's bad item fails only that caller; an error that leaves the batch's
    fate unknown (``CommitUnknown``: it may have been applied) goes to every caller instead, since
    running the items again could apply them twice.
    """

    def __init__(self, run: Callable[[list[In]], Awaitable[Sequence[Out]]]) -> None:
        self._run = run
        self._pending: list[tuple[In, asyncio.Future[Out]]] = []
        self._flushes: set[asyncio.Task[None]] = set()

    def submit(self, item: In) -> asyncio.Future[Out]:
        """Queue ``item`` for the next batch; the future resolves with its result."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Out] = loop.create_future()
        self._pending.append((item, fut))
        if len(self._pending) == 1:
            # runs after the tasks already ready, so that their submits join it; held until done
            task = loop.create_task(self._flush())
            self._flushes.add(task)
            task.add_done_callback(self._flushes.discard)
        return fut

    async def _flush(self) -> None:
        batch, self._pending = self._pending, []
        try:
            await self._settle(batch)
        except BaseException as exc:
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            raise

    async def _settle(self, batch: list[tuple[In, asyncio.Future[Out]]]) -> None:
        try:
            results = await self._run([item for item, _ in batch])
            if len(results) != len(batch):
                raise ValueError(f"a batch of {len(batch)} items returned {len(results)} results")
        except Exception as exc:
            if len(batch) > 1 and not isinstance(exc, CommitUnknown):
                for one in batch:  # each caller gets its own outcome
                    await self._settle([one])
                return
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for (_, fut), result in zip(batch, results, strict=True):
            if not fut.done():
                fut.set_result(result)
