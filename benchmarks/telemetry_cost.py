"""CPU time the engine's telemetry adds per job, measured in-process without a store.

    .venv/bin/python benchmarks/telemetry_cost.py [--jobs 100000] [--batch 100]

It feeds each telemetry what a worker tells it for ``--jobs`` no-op jobs in cycles of ``--batch``:
``attempt_started`` and ``attempt_ended`` per job, ``cycle`` per batch (claimed, then reported). Measured: the logs as a
worker has them (outcomes at INFO, dropped by the level: ``--log-level warning``), the Prometheus
metrics of one process, and of a ``--metrics-port`` worker process (values in files,
``PROMETHEUS_MULTIPROC_DIR``, run in a child process so that prometheus-client is imported with it).
Process CPU time, so other load on the machine moves it less than a drain rate.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time

from jobloom.engine.jobs import Claimed, Outcome
from jobloom.engine.telemetry import OutcomeLog, Telemetries, Telemetry


def cost(telemetry: Telemetry, jobs: int, batch: int) -> float:
    """Microseconds of CPU per job."""
    claims = [Claimed(i, "Noop", "{}", 1, 3, None, "at_least_once", 1000.0, run_at=999.9) for i in range(batch)]
    outcomes = [Outcome(c.id, 1, "succeeded", "w", 1000.0, 1000.001) for c in claims]
    began = time.process_time()
    for _ in range(jobs // batch):
        for c, o in zip(claims, outcomes, strict=True):
            if telemetry.per_attempt:
                token = telemetry.attempt_started(c, "w")
                telemetry.attempt_ended(c, o, token)
        telemetry.cycle(claims, [])  # claimed in one cycle, reported in the next
        telemetry.cycle([], outcomes)
    return (time.process_time() - began) / jobs * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--only", choices=["logs", "metrics"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.getLogger("jobloom").setLevel(logging.WARNING)
    if args.only == "metrics":
        from jobloom.observe.metrics import Metrics

        print(json.dumps(cost(Telemetries(OutcomeLog(), Metrics()), args.jobs, args.batch)))
        return 0
    base = cost(Telemetries(OutcomeLog()), args.jobs, args.batch)
    print(f"logs only (outcomes below the level): {base:.2f} us/job")
    for label, env in (("metrics, one process", {}),
                       ("metrics, a --metrics-port worker process", {"PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp()})):
        out = subprocess.run([sys.executable, __file__, "--only", "metrics", "--jobs", str(args.jobs), "--batch",
                              str(args.batch)], env={**os.environ, **env}, capture_output=True, text=True, check=True)
        print(f"logs and {label}: {float(out.stdout):.2f} us/job")
    return 0


if __name__ == "__main__":
    sys.exit(main())
