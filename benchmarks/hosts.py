"""Throughput when the workers are on other hosts: worker processes in network namespaces, 1 ms from
PostgreSQL over TCP.

    sudo ./dev bench hosts                      # needs root, ip and tc (iproute2)
    ./dev bench hosts --jobs 20000 --rtt-ms 1 --hosts 1,4

Each namespace stands for a machine (``tests/netns.py``): a veth pair joins it to the root
namespace, and the worker processes in it reach PostgreSQL only through that link. The delay is
``tc netem``'s where the kernel has it; this machine's kernel has no ``sch_netem``, so the delay
relay of ``tests/delay_relay.py`` (one process, listening on each link's address) adds it instead,
half the round trip each way. Drains of ``--jobs`` queued no-op jobs, one ``jobloom worker`` process
per namespace (``--concurrency`` each), measured from the store's timestamps, at:

- loopback: the workers in the root namespace, straight to the server (no relay): the baseline;
- links, 0 ms: through namespaces and the relay with no delay added: what the relay itself costs;
- links, ``--rtt-ms``: the same with the round trip added.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.netns import DelayRelay, Namespaces  # noqa: E402

from jobloom.bench.performers import URL_ENV, Noop  # noqa: E402
from jobloom.bench.processes import _Proc  # noqa: E402
from jobloom.bench.sandbox import Sandbox, Target  # noqa: E402
from jobloom.bench.workloads import Context, Params, fill, wait_finished  # noqa: E402


def _via(url: str, host: str, port: int) -> str:
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}{host}:{port}"))


async def drain(target: Target, args: argparse.Namespace, hosts: int, rtt: float | None) -> dict[str, Any]:
    """One drain with one worker process per host; ``rtt=None``: loopback, no namespaces."""
    box: Sandbox = target.sandbox()
    await box.prepare()
    ctx = Context(target, Params(jobs=args.jobs, concurrency=args.concurrency))
    spaces: Namespaces | None = None
    relay: DelayRelay | None = None
    procs: list[_Proc] = []
    folder = tempfile.mkdtemp(prefix="jlhosts-")
    try:
        after = box.last_id()
        await fill(box, args.jobs, Noop)
        parts = urlsplit(box.url)
        port = parts.port or 5432
        cmd = [sys.executable, "-m", "jobloom.cli", "worker", "jobloom.bench.performers:worker_app",
               "--concurrency", str(args.concurrency), "--grace", "5", "--log-level", "warning", "--bindings", "Noop"]
        if rtt is None:
            procs = [_Proc(cmd, box.env(), f"worker {i}") for i in range(hosts)]
        else:
            spaces = Namespaces(hosts, rtt_ms=rtt)
            made = spaces.create()
            listen_port = 15432
            relay = DelayRelay(f"{parts.hostname}:{port}", [f"{h.server_address}:{listen_port}" for h in made],
                               0.0 if spaces.netem else rtt, folder)
            for h in made:
                env = {**box.env(), URL_ENV: _via(box.url, h.server_address, listen_port)}
                procs.append(_Proc([*h.prefix(), *cmd], env, f"worker in {h.namespace}"))

        def alive() -> None:
            for p in procs:
                p.check()

        await wait_finished(ctx, box, after, args.jobs, "drain", alive,
                            lambda: "\n".join(p.output() for p in procs))
        count, first, last = box.span(after)
        return {"hosts": hosts, "rtt_ms": rtt, "netem": None if spaces is None else spaces.netem,
                "jobs": count, "rate": round(count / max(float(last) - float(first), 1e-9))}
    finally:
        for p in procs:
            p.stop(timeout=20)
        if relay is not None:
            relay.stop()
        if spaces is not None:
            spaces.destroy()
        box.close()


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown table of the drains."""
    out = ["| workers | path to PostgreSQL | added round trip | drain jobs/s |", "|---|---|---:|---:|"]
    for r in rows:
        path = ("loopback" if r["rtt_ms"] is None else
                "namespace + veth + relay" + (" + netem" if r["netem"] and r["rtt_ms"] else ""))
        rtt = "0" if r["rtt_ms"] is None else f"{r['rtt_ms']:g} ms"
        out.append(f"| {r['hosts']} process{'es' if r['hosts'] > 1 else ''} in "
                   f"{'the root namespace' if r['rtt_ms'] is None else str(r['hosts']) + ' namespace(s)'} | "
                   f"{path} | {rtt} | {r['rate']:,} |")
    return "\n".join(out)


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every configuration, in order."""
    target = Target(args.url)
    rows = []
    try:
        for _ in range(args.repeat):
            for hosts in (int(x) for x in args.hosts.split(",")):
                for rtt in (None, 0.0, args.rtt_ms):
                    row = await drain(target, args, hosts, rtt)
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    rows.append(row)
    finally:
        target.close()
    return rows


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("JOBLOOM_BENCH_POSTGRES_URL",
                                                        "postgresql://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--hosts", default="1,4")
    parser.add_argument("--rtt-ms", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", default=None)
    parser.add_argument("--render", default=None, help="Run nothing: print the table of a --json file.")
    args = parser.parse_args()
    if args.render:
        with open(args.render) as f:
            print(table(json.load(f)))
        return 0
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    rows = asyncio.run(main_async(args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
