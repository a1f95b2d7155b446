"""Stamps for ``benchmarks/latency_steps.py``, loaded into the worker and the producer it starts.

Python imports a ``sitecustomize`` module found on ``PYTHONPATH`` at start-up. This one does nothing
unless ``JOBLOOM_STEPS_OUT`` names a folder. Then it wraps, before the process's event loop starts,
the calls that mark a job's way from enqueue to ``perform``: each store transaction and round trip
(SQLite: each statement), the wake-up callbacks, and the worker's cycle. At exit it writes one line
per call (name, start, end in epoch seconds, a statement's name, the task that made it) to
``<folder>/<pid>.tsv``.
"""

from __future__ import annotations

import asyncio
import asyncio.runners
import atexit
import functools
import inspect
import os
import sys
import time
from collections.abc import Callable
from typing import Any

OUT = os.environ.get("JOBLOOM_STEPS_OUT")
RECORDS: list[tuple[str, float, float, str, int]] = []
_WALL, _PERF = time.time(), time.perf_counter()


def now() -> float:
    """Epoch seconds with ``perf_counter``'s resolution (comparable between processes)."""
    return _WALL + (time.perf_counter() - _PERF)


def wrap(owner: Any, name: str) -> None:
    """Record every call of ``owner.name`` (its start and end, and a statement's name if it has one)."""
    fn = getattr(owner, name, None)
    if fn is None:  # an older tree, without it
        return
    label = f"{owner.__name__}.{name}"

    def task() -> int:
        try:
            return id(asyncio.current_task())
        except RuntimeError:  # no running loop
            return 0

    def detail(args: tuple[Any, ...]) -> str:
        text = args[1] if len(args) > 1 and isinstance(args[1], str) else ""
        return " ".join(text.split())[:60]  # a statement's name, or the start of its SQL

    wrapper: Callable[..., Any]
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = now()
            try:
                return await fn(*args, **kwargs)
            finally:
                RECORDS.append((label, start, now(), detail(args), task()))
    else:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = now()
            try:
                return fn(*args, **kwargs)
            finally:
                RECORDS.append((label, start, now(), detail(args), task()))
    setattr(owner, name, wrapper)


def install() -> None:
    """Wrap the calls of both stores' paths (whichever the process uses, it calls only its own)."""
    from jobloom.engine.worker.cycle import Cycle
    from jobloom.store.postgres.listen import Listener
    from jobloom.store.postgres.store import PostgresStore
    from jobloom.store.postgres.tx import PostgresTx
    from jobloom.store.sqlite.store import SQLiteStore, SQLiteTx
    from jobloom.store.sqlite.wake import SocketWakeups

    wrap(Cycle, "run")
    wrap(Cycle, "run_direct")
    wrap(SQLiteStore, "transact")
    wrap(SQLiteStore, "_begin")
    wrap(SQLiteTx, "_one")
    wrap(SQLiteTx, "_many")
    wrap(SocketWakeups, "_readable")
    wrap(PostgresStore, "transact")
    wrap(PostgresStore, "autocommit")
    wrap(PostgresTx, "fetch_rows_batch")
    wrap(PostgresTx, "_send")
    wrap(PostgresTx, "commit")
    wrap(Listener, "_signal")


def dump() -> None:
    """Write the records (at exit)."""
    assert OUT is not None
    with open(os.path.join(OUT, f"{os.getpid()}.tsv"), "w") as f:
        f.write(" ".join(sys.argv[:2]) + "\n")
        for label, start, end, what, task in RECORDS:
            f.write(f"{label}\t{start:.6f}\t{end:.6f}\t{what}\t{task}\n")


if OUT:
    _run = asyncio.runners.Runner.run

    def _run_stamped(self: asyncio.runners.Runner, coro: Any, **kwargs: Any) -> Any:
        install()
        return _run(self, coro, **kwargs)

    asyncio.runners.Runner.run = _run_stamped  # type: ignore[method-assign]
    atexit.register(dump)
