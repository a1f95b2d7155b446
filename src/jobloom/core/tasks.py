"""Stopping background tasks for sure.

A task stopped by ``cancel()`` can miss its cancellation: on Python 3.11, ``asyncio.wait_for`` returns
the result, and drops the cancellation, when the cancel meets an inner wait that has just completed
(psycopg_pool waits for a connection so). A loop that then goes on sleeping would never end, and a
caller waiting for it would wait for ever. :func:`cancel_and_wait` asks again until the tasks end."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

RETRY_EVERY = 0.05
"""Seconds between the cancels of a task that has not ended yet."""


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]], *, timeout: float | None = None) -> bool:
    """Cancel ``tasks`` and wait until each has ended, cancelling again every :data:`RETRY_EVERY` s those
    still running; stop waiting after ``timeout`` s (None: until they end). Whether all ended. Their
    results and exceptions are left on them (read, so that none is logged as never retrieved)."""
    every = list(tasks)
    pending = {t for t in every if not t.done()}
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while pending:
        for task in pending:
            task.cancel()
        wait = RETRY_EVERY if deadline is None else min(RETRY_EVERY, deadline - loop.time())
        if wait <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=wait)
    for task in every:
        if task.done() and not task.cancelled():
            task.exception()
    return not pending
