"""A producer process for the latency benchmark: enqueue jobs at a steady rate, one awaited at a time.

``python -m jobloom.bench.producer --rate 50 --count 500`` enqueues ``Stamped`` jobs on the store named
by ``JOBLOOM_BENCH_URL`` (and ``JOBLOOM_BENCH_OPTIONS``). Each job is due at ``t0 + i / rate``:
the schedule does not drift when one enqueue is slow, and jobs are never sent in bursts.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from jobloom.bench.performers import Stamped, latency_app


async def produce(rate: float, count: int) -> None:
    """Enqueue ``count`` jobs, one every ``1 / rate`` seconds."""
    app = latency_app()
    await app.store()
    try:
        t0 = time.monotonic() + 0.05
        for i in range(count):
            wait = t0 + i / rate - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            await app.enqueue(Stamped, {"i": i})
    finally:
        await app.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="python -m jobloom.bench.producer")
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--count", type=int, default=500)
    args = parser.parse_args(argv)
    asyncio.run(produce(args.rate, args.count))
    return 0


if __name__ == "__main__":
    sys.exit(main())
