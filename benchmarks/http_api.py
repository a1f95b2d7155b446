"""Throughput and latency of the HTTP API's enqueue: ``POST /v1/jobs`` and ``POST /v1/jobs/batch``.

    .venv/bin/python benchmarks/http_api.py                          # SQLite, both workloads
    .venv/bin/python benchmarks/http_api.py --url postgresql://... --seconds 20

One ``jobloom serve`` process (uvicorn, one process, auth required: every request carries a token)
serves ``benchmarks/http_app.py`` on a fresh store; no worker runs. The load generator is this
script: asyncio clients, each on one keep-alive HTTP/1.1 connection, writing raw requests and
reading responses (so that the client costs little of the machine's CPU beside the server). It
reports jobs per second over the measured seconds (after a warm-up), the latency of each request
(time from writing it to reading its whole response): p50, p99, max, and the server process's CPU
time per job (warm-up included, so a little high), which depends less on what else the machine runs.

Targets: ``single`` (50 clients, one job per request) at least 2,000 jobs/s with p99 at most 25 ms on
SQLite; ``batch`` (4 clients, 1,000 jobs per request) at least 30,000 jobs/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped,unused-ignore]

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def jobloom(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-m", "jobloom.cli", *args], env=env, cwd=HERE, capture_output=True,
                          text=True, check=True, timeout=120)
    return done.stdout


class Client:
    """One keep-alive connection sending POSTs and reading their responses."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.token = token

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def post(self, path: str, body: bytes) -> int:
        head = (f"POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {self.token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        self.writer.write(head + body)
        status_line = await self.reader.readuntil(b"\r\n")
        headers = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in headers.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        await self.reader.readexactly(length)
        return int(status_line.split()[1])


def start_server(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``jobloom serve`` with ``http_app:app`` on a free loopback port; return it once it listens."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "jobloom.cli", "serve", "--app", "http_app:app", "--port",
                               str(port), "--log-level", "warning"], env=env, cwd=HERE)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, port
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise SystemExit("the server did not start") from None
            time.sleep(0.1)


async def load(port: int, token: str, path: str, body: bytes, jobs_per_request: int, clients: int,
               warmup: float, seconds: float) -> dict[str, Any]:
    conns = [Client(port, token) for _ in range(clients)]
    await asyncio.gather(*(c.open() for c in conns))
    start = time.perf_counter()
    measure_from, measure_to = start + warmup, start + warmup + seconds
    latencies: list[float] = []
    errors = 0

    async def run(client: Client) -> None:
        nonlocal errors
        while True:
            t0 = time.perf_counter()
            if t0 >= measure_to:
                return
            status = await client.post(path, body)
            t1 = time.perf_counter()
            if status not in (200, 201):
                errors += 1
            elif t0 >= measure_from:
                latencies.append(t1 - t0)

    await asyncio.gather(*(run(c) for c in conns))
    for c in conns:
        c.writer.close()
    lat = sorted(latencies)

    def pct(q: float) -> float:
        return round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 2) if lat else float("nan")

    return {
        "requests": len(lat), "jobs_per_s": round(len(lat) * jobs_per_request / seconds),
        "p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": round(lat[-1] * 1000, 2) if lat else None,
        "mean_ms": round(statistics.fmean(lat) * 1000, 2) if lat else None, "errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="The store (default: a fresh SQLite file in a temporary folder).")
    parser.add_argument("--workloads", default="single,batch")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--batch-clients", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=1000)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="jobloom-http-bench-")
    url = args.url or f"sqlite:///{tmp}/bench.db"
    env = {**os.environ, "JOBLOOM_BENCH_URL": url, "PYTHONPATH": str(HERE)}
    env.pop("JOBLOOM_APP", None)
    env.pop("JOBLOOM_URL", None)
    jobloom("migrate", "--url", url, env=env)
    token = jobloom("tokens", "create", f"bench-{os.getpid()}", "--scopes", "enqueue", "--url", url,
                    env=env).split()[0]
    server, port = start_server(env)
    try:
        report: dict[str, Any] = {"store": url.split(":", 1)[0], "load_generator": "benchmarks/http_api.py "
                                  "(asyncio, raw HTTP/1.1 keep-alive)", "server": "jobloom serve (uvicorn, 1 process)"}
        one = json.dumps({"binding": "Noop", "payload": {"n": 1, "text": "hello"}}).encode()
        many = json.dumps({"jobs": [{"binding": "Noop", "payload": {"n": i}} for i in range(args.batch_size)]}).encode()
        for workload in args.workloads.split(","):
            cpu0 = psutil.Process(server.pid).cpu_times()
            if workload == "single":
                report["single"] = asyncio.run(load(port, token, "/v1/jobs", one, 1, args.clients, args.warmup,
                                                    args.seconds))
                report["single"]["clients"] = args.clients
            elif workload == "batch":
                report["batch"] = asyncio.run(load(port, token, "/v1/jobs/batch", many, args.batch_size,
                                                   args.batch_clients, args.warmup, args.seconds))
                report["batch"].update(clients=args.batch_clients, batch_size=args.batch_size)
            else:
                raise SystemExit(f"unknown workload {workload!r}")
            cpu1 = psutil.Process(server.pid).cpu_times()
            used = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
            done = report[workload]["requests"] * (1 if workload == "single" else args.batch_size)
            report[workload]["server_cpu_us_per_job"] = round(used / max(1, done) * 1e6, 1)
        print(json.dumps(report, indent=2))
    finally:
        server.terminate()
        server.wait(15)


if __name__ == "__main__":
    main()
