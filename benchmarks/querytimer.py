"""Run one worker process with every named query timed: where a worker's wall time goes, per statement.

    JOBLOOM_QUERY_TIMES=/tmp/q.json python benchmarks/querytimer.py MODULE:ATTR --concurrency 100

Wraps the stores' ``Tx.fetch_rows``/``execute``/``executemany``/``insert_many`` and ``Store.transact``
(in this process only; jobloom's files are not changed), runs ``jobloom.process`` as usual, and on
exit writes per query name: calls, rows, total and mean wall seconds, plus the time transactions
spent outside named queries (connection checkout, BEGIN, COMMIT). ``profile.py drain --queries``
starts it and prints the table.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

STATS: dict[str, list[float]] = {}  # name -> [calls, rows, seconds]
OPEN: dict[int, float] = {}  # transaction id -> seconds spent in named queries so far


def _add(name: str, rows: int, seconds: float) -> None:
    entry = STATS.setdefault(name, [0, 0, 0.0])
    entry[0] += 1
    entry[1] += rows
    entry[2] += seconds


def _spent(tx: Any, name: str, rows: int, seconds: float) -> None:
    """Count a statement's (or batch's, or flush's) time, and add it to its open transaction's."""
    _add(name, rows, seconds)
    if id(tx) in OPEN:
        OPEN[id(tx)] += seconds


def _timed_query(method: Callable[..., Any], kind: str) -> Callable[..., Any]:
    @functools.wraps(method)
    async def wrapper(self: Any, name: str, params: Any = None) -> Any:
        t0 = time.perf_counter()
        result = await method(self, name, params) if params is not None else await method(self, name)
        seconds = time.perf_counter() - t0
        rows = len(params) if kind in ("executemany", "insert_many") and params is not None else 1
        _spent(self, f"{name} ({kind})", rows, seconds)
        return result

    return wrapper


def _timed_batch(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def wrapper(self: Any, queries: Any) -> Any:
        t0 = time.perf_counter()
        result = await method(self, queries)
        seconds = time.perf_counter() - t0
        _spent(self, f"[{', '.join(name for name, _ in queries)}] (batch)", len(queries), seconds)
        return result

    return wrapper


def _timed_flush(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def wrapper(self: Any) -> Any:
        t0 = time.perf_counter()
        result = await method(self)
        seconds = time.perf_counter() - t0
        _spent(self, "(flush)", 1, seconds)
        return result

    return wrapper


def _timed_transact(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def wrapper(self: Any, fn: Callable[..., Any], **kwargs: Any) -> Any:
        inner: list[float] = []

        async def timed_fn(tx: Any) -> Any:
            OPEN[id(tx)] = 0.0
            try:
                return await fn(tx)
            finally:
                inner.append(OPEN.pop(id(tx), 0.0))

        t0 = time.perf_counter()
        try:
            return await method(self, timed_fn, **kwargs)
        finally:
            total = time.perf_counter() - t0
            _add("(transactions: total)", 1, total)
            _add("(transactions: outside named queries)", 1, total - sum(inner))

    return wrapper


def install() -> None:
    """Wrap the store classes that are importable here."""
    from jobloom.store.sqlite import store as sqlite

    classes: list[tuple[Any, Any]] = [(sqlite.SQLiteTx, sqlite.SQLiteStore)]
    try:
        from jobloom.store.postgres import store as postgres

        classes.append((postgres.PostgresTx, postgres.PostgresStore))
    except ImportError:
        pass
    for tx_cls, store_cls in classes:
        for kind in ("fetch_rows", "execute", "executemany", "insert_many"):
            setattr(tx_cls, kind, _timed_query(getattr(tx_cls, kind), kind))
        tx_cls.fetch_rows_batch = _timed_batch(tx_cls.fetch_rows_batch)
        tx_cls.flush = _timed_flush(tx_cls.flush)
        store_cls.transact = _timed_transact(store_cls.transact)


def dump() -> None:
    """Write the figures to the file named by ``JOBLOOM_QUERY_TIMES``."""
    path = os.environ.get("JOBLOOM_QUERY_TIMES")
    if path:
        with open(path, "w") as f:
            json.dump(STATS, f)


def main() -> int:
    """Run ``jobloom.process`` with the timers installed."""
    install()
    atexit.register(dump)
    from jobloom.process import main as process_main

    try:
        return process_main(sys.argv[1:])
    finally:
        dump()


if __name__ == "__main__":
    sys.exit(main())
