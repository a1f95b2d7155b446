"""A key at its limit with a backlog ahead of the other keys' jobs: what it costs each dispatch.

    .venv/bin/python benchmarks/head_of_line.py --url postgresql://postgres@127.0.0.1/test -n 1 20000 100000

A binding with ``key_concurrency = 1``: ``n`` jobs of key ``a`` enqueued first, then 2,000 jobs of 2,000
other keys. One job of ``a`` is claimed and left running, so ``a`` is full; then 20 dispatches of
capacity 10, one transaction each, are timed (each claims 10 jobs of the other keys). By priority (the
default), a dispatch reads the queued jobs in priority order and leaves out those of a full key, which
it still reads past in the index: ``n`` entries. Under ``fairness = "round_robin"``, a dispatch steps
from key to key in the index of queued jobs by key. Prints the median and the slowest dispatch per
backlog and order, in a private store each time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

import jobloom
from jobloom.bench.sandbox import Target
from jobloom.engine import coordinator


class ByPriority(jobloom.Performer[dict[str, Any], None]):
    """One job at a time per key, in priority order."""

    concurrency_key = staticmethod(lambda p: p["k"])
    key_concurrency = 1

    async def perform(self, payload: dict[str, Any]) -> None:
        """Return at once."""


class ByTurn(ByPriority):
    """The same, the keys taking turns."""

    fairness = "round_robin"


async def one(url: str, n: int, performer: type[ByPriority]) -> dict[str, Any]:
    """Time 20 dispatches past a full key with ``n`` queued jobs."""
    target = Target(url)
    box = target.sandbox()
    await box.prepare()
    try:
        app = jobloom.App(box.url, performers=[performer], auto_migrate=True, lease=600.0, **box.options)
        await app.register_bindings()
        await app.enqueue_many([(performer, {"k": "a"}) for _ in range(n)])
        await app.enqueue_many([(performer, {"k": f"b{i:04}"}) for i in range(2000)])
        store = await app.store()
        binding = performer.__name__

        async def claim(capacity: int) -> int:
            async def work(tx: Any) -> int:
                got = await coordinator.dispatch(tx, binding, capacity=capacity, worker="w", now=time.time(),
                                                 lease=600.0)
                return len(got.claimed)
            return await store.transact(work)
        assert await claim(1) == 1  # a's first job: from now on key a is full
        times = []
        for _ in range(20):
            began = time.perf_counter()
            assert await claim(10) == 10
            times.append((time.perf_counter() - began) * 1000)
        await app.close()
        times.sort()
        return {"store": box.dialect, "order": binding, "backlog": n, "median_ms": round(times[10], 2),
                "max_ms": round(times[-1], 2)}
    finally:
        box.close()
        target.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="sqlite:////tmp/jobloom-head-of-line/bench.db")
    parser.add_argument("-n", "--backlog", type=int, nargs="+", default=[1, 20_000, 100_000])
    args = parser.parse_args()
    for n in args.backlog:
        for performer in (ByPriority, ByTurn):
            print(json.dumps(await one(args.url, n, performer) | {"load": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
