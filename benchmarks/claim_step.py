"""The claiming step alone: a whole cycle against the direct claim of the job a wake-up names.

    .venv/bin/python benchmarks/claim_step.py --url sqlite:////tmp/jb/c.db -n 300
    .venv/bin/python benchmarks/claim_step.py --url postgresql://postgres@127.0.0.1/test -n 150

One process, one worker that is not running (its cycle called here), one binding with no limits. Each
round enqueues a job and times its claim, by a whole cycle (``Cycle.run``) and by the direct claim
(``Cycle.run_direct``) in turn, each job then run and reported before the next; it prints the median
and 90th percentile of each. Both share the machine's state at every moment, so their ratio holds
on a loaded host where the latency protocol's absolute figures do not.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import jobloom


class Noop(jobloom.Performer[dict[str, Any], None]):
    """A job that does nothing."""

    async def perform(self, payload: dict[str, Any]) -> None:
        """Nothing."""
        return None


async def run(url: str, n: int) -> dict[str, list[float]]:
    """``n`` rounds; the ms each claim took, by kind."""
    app = jobloom.App(url, performers=[Noop], auto_migrate=True)
    await app.register_bindings(["Noop"])
    worker = jobloom.Worker(app, bindings=["Noop"])
    await worker.cycle.run(claim=True)
    times: dict[str, list[float]] = {"whole cycle": [], "direct claim": []}
    try:
        for _ in range(n):
            for kind in times:
                job = await app.enqueue(Noop, {})
                began = time.perf_counter()
                if kind == "whole cycle":
                    claimed = (await worker.cycle.run(claim=True)).claimed
                else:
                    got = await worker.cycle.run_direct(job.id, "Noop")
                    claimed = got.claimed if got is not None else []
                times[kind].append((time.perf_counter() - began) * 1000)
                if [c.id for c in claimed] != [job.id]:
                    raise SystemExit(f"{kind} claimed {[c.id for c in claimed]}, not job {job.id}")
                deadline = time.monotonic() + 10
                while not worker.completer.outcomes:
                    if time.monotonic() > deadline:
                        raise SystemExit("the job did not run")
                    await asyncio.sleep(0)
                await worker.cycle.run(claim=False)
    finally:
        await app.close()
    return times


def main() -> None:
    """Run and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("-n", type=int, default=200)
    args = parser.parse_args()
    for kind, values in asyncio.run(run(args.url, args.n)).items():
        values.sort()
        print(f"{kind:<13} median {statistics.median(values):.3f} ms, p90 {values[int(len(values) * 0.9)]:.3f} ms "
              f"({len(values)} claims)")


if __name__ == "__main__":
    main()
