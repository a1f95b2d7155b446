"""Before pytest-timeout ends a test that hangs, print where every pending asyncio task waits.

pytest-timeout prints the threads' stacks, and a thread that runs an event loop shows only the loop's
``select``: what each coroutine waits for is not in them. :func:`watch` starts a timer that, shortly
before the test's timeout, prints each unfinished task's stack to the real stderr."""

from __future__ import annotations

import asyncio
import sys
import threading

MARGIN = 20.0
"""Seconds before the test's timeout at which the tasks are printed."""


def _tasks() -> list[asyncio.Task[object]]:
    for _ in range(5):  # the set of tasks may change under the iteration (the loop's thread runs on)
        try:
            return [t for t in list(asyncio.tasks._all_tasks) if not t.done()]  # type: ignore[attr-defined]
        except RuntimeError:
            continue
    return []


def _awaiting(task: asyncio.Task[object]) -> list[str]:
    """Where ``task`` waits: each coroutine of its await chain, innermost last, then what it awaits."""
    lines = []
    step: object = task.get_coro()
    for _ in range(50):
        frame = getattr(step, "cr_frame", None) or getattr(step, "gi_frame", None) or getattr(step, "ag_frame", None)
        if frame is None:
            lines.append(f"   awaiting {step!r}\n"[:300])
            break
        lines.append(f"   {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}\n")
        step = getattr(step, "cr_await", None) or getattr(step, "gi_yieldfrom", None) or getattr(step, "ag_await", None)
        if step is None:
            break
    return lines


def dump(test: str) -> None:
    """Print every unfinished asyncio task's await chain, headed by ``test``'s id."""
    out = sys.__stderr__
    if out is None:
        return
    lines = [f"\n==== {test}: near its timeout; pending asyncio tasks ====\n"]
    for task in _tasks():
        lines.append(f"-- task {task.get_name()}\n")
        try:
            lines.extend(_awaiting(task))
        except Exception as exc:  # a frame that ended under the reading: say so, go on
            lines.append(f"   (unreadable: {exc!r})\n")
    out.write("".join(lines))
    out.flush()


def watch(test: str, timeout: float | None) -> threading.Timer | None:
    """A started timer that dumps the tasks ``MARGIN`` s before ``timeout`` (None: no timeout)."""
    if not timeout or timeout <= MARGIN:
        return None
    timer = threading.Timer(timeout - MARGIN, dump, args=(test,))
    timer.daemon = True
    timer.start()
    return timer
