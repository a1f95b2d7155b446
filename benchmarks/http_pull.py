"""How fast remote workers drain a backlog through the HTTP worker protocol (``/v1/worker/claim`` with
claims of 50, then one ``/v1/worker/complete`` per job).

    .venv/bin/python benchmarks/http_pull.py                         # SQLite, 20,000 jobs
    .venv/bin/python benchmarks/http_pull.py --url postgresql://... --jobs 50000

One ``jobloom serve`` process (uvicorn, one process, a token of scope ``worker``) serves
``benchmarks/http_app.py``, whose ``Remote`` binding is a ``jobloom.RemoteBinding`` without limits, on
a fresh store holding the backlog (enqueued before the clock starts). The load generator is this
script (asyncio, raw HTTP/1.1 keep-alive connections, as in ``http_api.py``): ``--workers`` remote
workers, each claiming up to ``--claim`` jobs at a time on its own connection and reporting each job
``succeeded`` over ``--report-connections`` connections of its own, as a worker running jobs at once
would. It reports jobs drained per second from the first claim to the last report, the latency of
claims and reports (p50, p99), and the server process's CPU time per job.

Target: at least 2,000 jobs/s on SQLite with claims of 50.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import psutil  # type: ignore[import-untyped,unused-ignore]
from http_api import HERE, Client, jobloom, start_server


class Reader(Client):
    """A keep-alive connection that also returns the response's body."""

    async def call(self, path: str, body: bytes) -> tuple[int, bytes]:
        head = (f"POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {self.token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        self.writer.write(head + body)
        status_line = await self.reader.readuntil(b"\r\n")
        headers = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in headers.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return int(status_line.split()[1]), await self.reader.readexactly(length)


async def drain(port: int, token: str, jobs: int, workers: int, claim: int, reporters: int) -> dict[str, Any]:
    claims: list[float] = []
    reports: list[float] = []
    done = 0
    errors = 0

    async def worker(name: str) -> None:
        nonlocal done, errors
        claimer = Reader(port, token)
        conns = [Reader(port, token) for _ in range(reporters)]
        await asyncio.gather(claimer.open(), *(c.open() for c in conns))
        ask = json.dumps({"worker": name, "bindings": ["Remote"], "max": claim, "wait": 0.5}).encode()
        while done < jobs:
            t0 = time.perf_counter()
            status, body = await claimer.call("/v1/worker/claim", ask)
            claims.append(time.perf_counter() - t0)
            got = json.loads(body)["jobs"] if status == 200 else []
            if status != 200:
                errors += 1
            if not got:
                continue
            queue = list(got)

            async def report(conn: Reader, queue: list[dict[str, Any]] = queue) -> None:
                nonlocal done, errors
                while queue:
                    job = queue.pop()
                    body = json.dumps({"worker": name, "id": job["id"], "attempt": job["attempt"],
                                       "claim": job["claim"], "outcome": "succeeded", "result": None}).encode()
                    t1 = time.perf_counter()
                    status, _ = await conn.call("/v1/worker/complete", body)
                    reports.append(time.perf_counter() - t1)
                    if status == 200:
                        done += 1
                    else:
                        errors += 1

            await asyncio.gather(*(report(c) for c in conns))
        for c in (claimer, *conns):
            c.writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker(f"bench-{i}") for i in range(workers)))
    took = time.perf_counter() - start

    def pct(lat: list[float], q: float) -> float:
        lat = sorted(lat)
        return round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 2) if lat else float("nan")

    return {
        "jobs": done, "seconds": round(took, 2), "jobs_per_s": round(done / took), "claims": len(claims),
        "claim_p50_ms": pct(claims, 0.5), "claim_p99_ms": pct(claims, 0.99), "report_p50_ms": pct(reports, 0.5),
        "report_p99_ms": pct(reports, 0.99), "errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="The store (default: a fresh SQLite file in a temporary folder).")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--claim", type=int, default=50)
    parser.add_argument("--report-connections", type=int, default=8)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="jobloom-pull-bench-")
    url = args.url or f"sqlite:///{tmp}/bench.db"
    env = {**os.environ, "JOBLOOM_BENCH_URL": url, "PYTHONPATH": str(HERE)}
    env.pop("JOBLOOM_APP", None)
    env.pop("JOBLOOM_URL", None)
    jobloom("migrate", "--url", url, env=env)
    token = jobloom("tokens", "create", f"pull-{os.getpid()}", "--scopes", "worker", "--url", url,
                    env=env).split()[0]
    code = f"import asyncio, http_app; asyncio.run(http_app.backlog({args.jobs}))"
    subprocess.run([sys.executable, "-c", code], env=env, cwd=HERE, check=True, timeout=300)
    server, port = start_server(env)
    try:
        cpu0 = psutil.Process(server.pid).cpu_times()
        result = asyncio.run(drain(port, token, args.jobs, args.workers, args.claim, args.report_connections))
        cpu1 = psutil.Process(server.pid).cpu_times()
        used = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
        result["server_cpu_us_per_job"] = round(used / max(1, result["jobs"]) * 1e6, 1)
        report = {"store": url.split(":", 1)[0], "load_generator": "benchmarks/http_pull.py (asyncio, raw "
                  "HTTP/1.1 keep-alive)", "server": "jobloom serve (uvicorn, 1 process)", "workers": args.workers,
                  "claim": args.claim, "report_connections": args.report_connections, "pull": result}
        print(json.dumps(report, indent=2))
    finally:
        server.terminate()
        server.wait(15)


if __name__ == "__main__":
    main()
