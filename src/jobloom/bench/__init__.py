"""``jobloom bench``: measure jobloom on a store, like pgbench does for PostgreSQL.

Each workload runs on private stores made for it (a temporary SQLite file beside the URL's path,
or a temporary PostgreSQL schema) and reports :class:`Measurement` values::

    from jobloom.bench import Params, run
    report = run("drain", "sqlite:///bench.db", Params(jobs=20_000, concurrency=100))

From the shell: ``jobloom bench drain --url sqlite:///bench.db`` (or ``python -m jobloom.bench``).
"""

from __future__ import annotations

import asyncio
import time

from jobloom.bench.catalog import WORKLOADS
from jobloom.bench.defaults import defaults as defaults_workload
from jobloom.bench.model import TARGETS, Measurement, Report, environment, now_iso, with_target
from jobloom.bench.processes import BenchError, Launcher, popen
from jobloom.bench.progress import Reporter, RichReporter
from jobloom.bench.sandbox import Target, dialect_of, redact
from jobloom.bench.workloads import Context, Params

ALL = "all"
WORKLOADS["defaults"] = defaults_workload  # it builds on workloads' pieces, so it is added here


async def run_async(workload: str, url: str, params: Params | None = None,
                    progress: Reporter | None = None, launcher: Launcher = popen) -> Report:
    """Run one workload (or ``"all"``) against the store at ``url``; see :func:`run`."""
    if workload != ALL and workload not in WORKLOADS:
        raise BenchError(f"unknown workload {workload!r}: one of {', '.join([*WORKLOADS, ALL])}")
    params = params or Params()
    target = Target(url)
    ctx = Context(target, params, progress or Reporter(), launcher)
    started, t0 = now_iso(), time.perf_counter()
    names = list(WORKLOADS) if workload == ALL else [workload]
    measurements: list[Measurement] = []
    try:
        env = environment(target.server_version())
        for name in names:
            measurements += await WORKLOADS[name](ctx)
    finally:
        ctx.progress.close()
        target.close()
    for m in measurements:
        with_target(m, target.dialect)
    return Report(
        workload=workload, dialect=target.dialect, url=redact(url),
        params={"jobs": params.jobs, "concurrency": params.concurrency, "processes": list(params.processes),
                "tasks": params.tasks, "batch": params.batch, "rate": params.rate,
                "history_rows": params.history_rows, "pairs": params.pairs},
        measurements=measurements, environment=env, started_at=started, seconds=time.perf_counter() - t0,
    )


def run(workload: str, url: str, params: Params | None = None, progress: Reporter | None = None,
        launcher: Launcher = popen) -> Report:
    """Run one workload (or ``"all"``) against the store at ``url`` and return its report (``launcher``
    starts the worker and producer processes: see :class:`~jobloom.bench.processes.Launcher`)."""
    return asyncio.run(run_async(workload, url, params, progress, launcher))


__all__ = [
    "ALL",
    "TARGETS",
    "WORKLOADS",
    "BenchError",
    "Measurement",
    "Params",
    "Report",
    "Reporter",
    "RichReporter",
    "dialect_of",
    "run",
    "run_async",
]
