"""Test helpers: waiting on conditions with deadlines (never bare sleeps)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def eventually(
    check: Callable[[], Awaitable[Any] | Any], *, timeout: float = 10.0, interval: float = 0.02, what: str = "condition"
) -> Any:
    """Call (and await, if async) ``check()`` until it gives something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"{what} not reached within {timeout} s (last: {last!r})")


def eventually_sync(check: Callable[[], Any], *, timeout: float = 10.0, interval: float = 0.05,
                    what: str = "condition") -> Any:
    """Call ``check()`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what} not reached within {timeout} s (last: {last!r})")
