"""Dispatch alone, keyed or not: what a binding's dispatch costs the worker and the server per job.

    .venv/bin/python benchmarks/dispatch_keys.py --url postgresql://postgres@127.0.0.1/test -n 10000 --pairs 3

Queues ``n`` jobs of the bench performer ``Turns`` (round-robin turns, a key rate that never binds) in a
private store, over 1,000 keys or with no key, then calls ``dispatch`` (capacity 100) in a loop, one
transaction each, and marks each batch claimed as succeeded with a plain statement (not measured), until
none is left. Prints per job: the dispatch transactions' wall time, this process's CPU, and the CPU of
the store's PostgreSQL backends (not the marking connection's). No worker, wake-up or job execution: the
difference between the keyed and the keyless lines is what turns and key buckets cost a dispatch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

import psutil  # type: ignore[import-untyped,unused-ignore]

from jobloom.bench.performers import Turns
from jobloom.bench.sandbox import Target
from jobloom.bench.workloads import fill
from jobloom.engine.dispatch import dispatch


def _backends(raw: Any) -> list[Any]:
    """The server processes of the store's connections (PostgreSQL; none on SQLite): those whose client
    port is one of this process's sockets, not the marking connection (other sessions' backends in the
    same database are not counted)."""
    me = psutil.Process()
    sockets = me.net_connections(kind="tcp") if hasattr(me, "net_connections") else me.connections(kind="tcp")
    ports = [c.laddr.port for c in sockets if c.raddr]
    mine = raw.execute("SELECT pg_backend_pid()").fetchone()[0]
    rows = raw.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> %s "
                       "AND backend_type = 'client backend' AND client_port = ANY(%s)", (mine, ports)).fetchall()
    return [psutil.Process(r[0]) for r in rows]


def _cpu(procs: list[Any]) -> float:
    return sum(sum(p.cpu_times()[:2]) for p in procs)


async def one(url: str, n: int, keyed: bool) -> dict[str, Any]:
    """Queue ``n`` jobs and dispatch them all; the figures per job."""
    target = Target(url)
    box = target.sandbox()
    await box.prepare()
    try:
        await fill(box, n, Turns, None, None if keyed else {"no_key": True})
        app = box.app()
        await app.register_bindings()
        store = await app.store()

        async def take(capacity: int) -> list[int]:
            got = await store.transact(lambda tx: dispatch(tx, "Turns", capacity=capacity, worker="w",
                                                           now=time.time(), lease=600, clock=time.time))
            return [c.id for c in got.claimed]
        first = await take(1)  # the pool's connections open
        raw = box._connect()  # the bench's own plain connection
        procs = _backends(raw) if box.dialect == "postgres" else []
        done, wall, cpu0, server0 = len(first), 0.0, time.process_time(), _cpu(procs)
        while True:
            began = time.perf_counter()
            ids = await take(100)
            wall += time.perf_counter() - began
            if not ids:
                break
            done += len(ids)
            mark = "UPDATE jobloom_jobs SET state = 'succeeded', finished_at = {now} WHERE id IN ({ids})"
            raw.execute(mark.format(now=time.time(), ids=",".join(map(str, ids))))
        cpu, server = time.process_time() - cpu0, _cpu(procs) - server0
        await app.close()
        return {"keys": 1000 if keyed else 0, "jobs": done, "wall_us": round(wall / done * 1e6, 1),
                "client_cpu_us": round(cpu / done * 1e6, 1),
                "server_cpu_us": round(server / done * 1e6, 1) if procs else None}
    finally:
        box.close()
        target.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="sqlite:////tmp/jobloom-dispatch-keys/bench.db")
    parser.add_argument("-n", "--jobs", type=int, default=10_000)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    for _ in range(args.pairs):
        for keyed in (False, True):
            print(json.dumps(await one(args.url, args.jobs, keyed) | {"load": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
