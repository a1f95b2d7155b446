"""How much of a rate limit is delivered while every core is busy with other work.

Starts ``--processes`` worker processes serving one binding limited to ``--rate`` per second (``--burst``),
and ``--hogs`` processes that spin a busy loop each (default: one per core), fills the queue, then
records the start of every job from inside ``perform`` for ``--seconds``. Reports the delivered rate
(starts per second after the first, from the dispatch times the store recorded and from the times
``perform`` saw), how late ``perform`` began after its dispatch, and the most starts any window held
against what the limit allows (``burst + rate * W``). Reproduce:

    .venv/bin/python benchmarks/rate_contention.py --url sqlite:////tmp/rate.db
    .venv/bin/python benchmarks/rate_contention.py --url postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import jobloom

APP = textwrap.dedent('''
    import os, time
    from typing import Any
    import jobloom

    class Metered(jobloom.Performer[dict[str, Any], None]):
        rate_limit = os.environ["RC_RATE"]

        async def perform(self, payload: dict[str, Any]) -> None:
            with open(os.environ["RC_LOG"], "a") as f:
                f.write(f"{self.ctx.job_id} {time.time()!r}\\n")

    options = {"schema": os.environ["RC_SCHEMA"]} if os.environ.get("RC_SCHEMA") else {}
    app = jobloom.App(os.environ["RC_URL"], performers=[Metered], auto_migrate=True, **options)
''')


def hog() -> None:
    """Spin until killed."""
    n = 0
    while True:
        n += 1


async def measure(args: argparse.Namespace) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="jobloom-rate-"))
    (work / "rcapp.py").write_text(APP)
    url = args.url
    schema = None
    if url.startswith("postgres"):
        schema = f"rate_{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONPATH": str(work), "RC_URL": url, "RC_RATE": f"{args.rate:g}/s burst {args.burst}",
           "RC_LOG": str(work / "starts"), "RC_SCHEMA": schema or ""}
    sys.path.insert(0, str(work))
    os.environ.update({k: v for k, v in env.items() if k.startswith("RC_")})
    import rcapp  # type: ignore[import-not-found]

    app: jobloom.App = rcapp.app
    procs: list[subprocess.Popen[bytes]] = []
    try:
        await app.store()
        here = str(Path(__file__).parent)
        spin = f"import sys; sys.path.insert(0, {here!r}); from rate_contention import hog; hog()"
        procs += [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(args.hogs)]
        await app.enqueue_many([("Metered", {}) for _ in range(int(args.rate * (args.seconds + 4)))])
        procs += [subprocess.Popen([sys.executable, "-m", "jobloom.process", "rcapp:app", "--concurrency", "16",
                                    "--log-level", "warning"], env=env, cwd=work)
                  for _ in range(args.processes)]
        log = work / "starts"
        while not log.exists() or len(log.read_text().splitlines()) < args.rate:  # every worker is up by then
            await asyncio.sleep(0.05)
        began = time.time()
        await asyncio.sleep(args.seconds + 1.0)
        lines = [line.split() for line in log.read_text().splitlines()]
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
        for p in procs:
            p.wait()
    jobs = {j.id: j.started_at.timestamp() for j in await app.list_jobs(binding="Metered", limit=100_000)
            if j.started_at is not None}
    await app.close()
    if schema is not None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    performed = sorted(float(t) for _, t in lines if began <= float(t) < began + args.seconds)
    dispatched = sorted(t for t in jobs.values() if began <= t < began + args.seconds)
    lags = sorted(float(t) - jobs[int(i)] for i, t in lines if int(i) in jobs)
    times = sorted(jobs.values())
    worst = 0.0
    for i, begin in enumerate(times):  # the most starts over what the limit allows, in any window
        for j in range(i, min(len(times), i + int(args.rate * 3))):
            worst = max(worst, (j - i + 1) - (args.burst + args.rate * (times[j] - begin)))
    late = sorted(b - a - 1 / args.rate for a, b in itertools.pairwise(dispatched))
    return {
        "late_p50_ms": late[len(late) // 2] * 1000,
        "late_p90_ms": late[int(len(late) * 0.9)] * 1000,
        "delivered_dispatch": (len(dispatched) - 1) / (dispatched[-1] - dispatched[0]),
        "delivered_perform": (len(performed) - 1) / (performed[-1] - performed[0]),

        "lag_p50_ms": lags[len(lags) // 2] * 1000,
        "lag_p99_ms": lags[int(len(lags) * 0.99)] * 1000,
        "worst_excess": worst,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--burst", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    result = asyncio.run(measure(args))
    print(f"{args.url.split(':')[0]}: {args.rate:g}/s burst {args.burst} with {args.processes} worker processes "
          f"and {args.hogs} busy loops: delivered {result['delivered_dispatch']:.2f}/s (dispatch times), "
          f"{result['delivered_perform']:.2f}/s (perform times); each dispatch later than its token by "
          f"p50 {result['late_p50_ms']:.1f} ms, p90 {result['late_p90_ms']:.1f} ms; "
          f"perform lag p50 {result['lag_p50_ms']:.1f} ms, "
          f"p99 {result['lag_p99_ms']:.1f} ms; most starts over burst + rate * W in any window: "
          f"{result['worst_excess']:.6f}")


if __name__ == "__main__":
    main()
