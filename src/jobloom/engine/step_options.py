"""A durable step's own retries and timeout: ``self.step(name, fn, retries=3, backoff=..., timeout=...)``.

A step that raises is run again up to ``retries`` times, after its ``backoff``, inside the same attempt,
before the exception reaches ``perform``; a step that takes longer than ``timeout`` seconds is cancelled
(an async one; a plain function runs in a thread of its own then, and is abandoned) and raises
:class:`StepTimeout`, which its retries count like any other failure. Only the step ends: the attempt
goes on with the exception in ``perform``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from jobloom.core import options as opt
from jobloom.core.errors import InvalidOption, JobloomError
from jobloom.core.options import Backoff

MAX_STEP_RETRIES = 100
DEFAULT_STEP_BACKOFF = Backoff.exponential(base=1.0, max=60.0)


class StepTimeout(JobloomError, TimeoutError):
    """A step ran longer than its ``timeout`` (raised in the job, after the step's retries)."""


@dataclass(frozen=True, slots=True)
class StepOptions:
    """How one step runs: ``retries`` after a failure, ``backoff`` between them, ``timeout`` per run."""

    retries: int = 0
    backoff: Backoff = DEFAULT_STEP_BACKOFF
    timeout: float | None = None


PLAIN = StepOptions()


def step_options(name: str, retries: object, backoff: object, timeout: object, binding: str | None) -> StepOptions:
    """The checked options of step ``name``; a bad one raises ``InvalidOption`` naming it and the binding."""
    if retries == 0 and backoff is None and timeout is None:
        return PLAIN
    n = opt.positive_int(f"retries of step {name!r}", retries, binding, allow_none=False, minimum=0) or 0
    if n > MAX_STEP_RETRIES:
        raise InvalidOption(f"retries of step {name!r}", retries, f"an integer from 0 to {MAX_STEP_RETRIES}", binding)
    if backoff is not None and not isinstance(backoff, Backoff):
        raise InvalidOption(f"backoff of step {name!r}", backoff, "a jobloom.Backoff", binding)
    if timeout is not None:
        timeout = opt.finite(f"timeout of step {name!r}", timeout, binding, above=True, maximum=opt.MAX_DELAY)
    return StepOptions(n, backoff or DEFAULT_STEP_BACKOFF, timeout)


async def run_step(name: str, fn: Callable[..., Any], args: tuple[Any, ...], o: StepOptions) -> Any:
    """Run the step (on the event loop) with its retries and timeout; its value or its last exception."""
    tries = 0
    while True:
        tries += 1
        try:
            return await _once(name, fn, args, o.timeout)
        except Exception:
            if tries > o.retries:
                raise
        await asyncio.sleep(o.backoff.delay(tries))


def run_step_sync(name: str, fn: Callable[..., Any], args: tuple[Any, ...], o: StepOptions,
                  call: Callable[[Awaitable[Any]], Any]) -> Any:
    """:func:`run_step` in a sync job's thread: ``fn`` runs there unless it has a timeout (then on the
    worker's loop, through ``call``); the backoff sleeps in the thread."""
    tries = 0
    while True:
        tries += 1
        try:
            if o.timeout is not None:
                return call(_once(name, fn, args, o.timeout))
            value = fn(*args)
            return call(value) if inspect.isawaitable(value) else value
        except Exception:
            if tries > o.retries:
                raise
        time.sleep(o.backoff.delay(tries))


async def _once(name: str, fn: Callable[..., Any], args: tuple[Any, ...], timeout: float | None) -> Any:
    if timeout is None:
        value = fn(*args)
        return await value if inspect.isawaitable(value) else value

    async def run() -> Any:
        value = await asyncio.to_thread(fn, *args) if not inspect.iscoroutinefunction(fn) else fn(*args)
        return await value if inspect.isawaitable(value) else value

    try:  # not wait_for: on Python 3.11 it drops a cancel (the job's stop) that meets the step's end
        async with asyncio.timeout(timeout):
            return await run()
    except TimeoutError:
        raise StepTimeout(f"step {name!r} ran longer than its timeout of {timeout:g} s") from None
