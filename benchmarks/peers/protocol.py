"""One system through the peers protocol; prints its figures as one JSON object.

    python benchmarks/peers/protocol.py huey|rq|procrastinate|bullmq|graphile-worker|jobloom-sqlite|...

Runs with the interpreter that has the system installed (the peers' virtualenv for Huey, RQ and
Procrastinate, and for the Node peers, whose producer and worker are Node scripts in ``node/``:
``node/producer.mjs`` enqueues, this script times nothing of theirs but reads their stamps; jobloom's
own for jobloom). The protocol, the same for every system:

1. enqueue: ``--jobs`` (20,000) no-op jobs, one call at a time, each awaited (or returned) before the
   next, timed: *enqueue one/s*;
2. drain: then one worker is started as a user would start it, with its defaults (``huey_consumer``,
   ``rq worker``, ``procrastinate worker``, ``jobloom worker``; BullMQ's ``new Worker(queue, processor)``,
   ``graphile-worker``, both under Node); each job writes the moment its body began to a file of its
   process (``apps/stamps.py``; ``node/stamps.mjs``, the same write and the same wall clock at
   microsecond resolution); *drain jobs/s* is
   ``(N - 1) / (last start - first start)``: the steady rate, without the worker's start-up;
3. latency: the worker, now idle for a second, gets ``--latency-jobs`` (300) jobs enqueued at a steady
   ``--rate`` (50/s) by this process; each carries the moment it was enqueued and records the moment
   its body began: p50 and p99 of the difference;
4. memory: the RSS of all the worker's processes together (the process started and every descendant),
   sampled every 50 ms from start to stop: the peak.

Each system gets a store of its own, emptied first: Redis db ``--redis-db`` (flushed, that db only;
BullMQ the keys of its own prefix in that db, deleted before and after), the PostgreSQL databases
``peers_procrastinate`` and ``peers_graphile_worker`` (dropped and made again, dropped after), a fresh
schema for jobloom on PostgreSQL, a fresh SQLite file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psutil

HERE = Path(__file__).resolve().parent
APPS = HERE / "apps"
NODE = HERE / "node"
NODE_BIN = shutil.which("node") or "node"
BIN = Path(sys.executable).parent


class Adapter:
    """What differs between systems: making the store, enqueueing, the worker's command."""

    name = ""

    def __init__(self, args: argparse.Namespace, env: dict[str, str]) -> None:
        self.args = args
        self.env = env

    def setup(self) -> None:
        """Make the system's store, empty."""

    async def open(self) -> None:
        """Open what enqueueing needs, in this process."""

    async def enqueue(self, i: int) -> None:
        """Enqueue one no-op job."""
        raise NotImplementedError

    async def enqueue_stamped(self, enqueued: float) -> None:
        """Enqueue one latency job carrying its enqueue moment."""
        raise NotImplementedError

    async def enqueue_all(self, n: int) -> float:
        """One warm-up job (the connection is made and warm), then ``n`` no-op jobs one at a time: per second."""
        await self.enqueue(-1)
        return await _timed(n, self.enqueue)

    async def enqueue_paced(self, count: int, rate: float) -> None:
        """``count`` latency jobs at a steady ``rate`` per second, each stamped just before its enqueue call."""
        t0 = time.monotonic()
        for k in range(count):
            pause = t0 + k / rate - time.monotonic()
            if pause > 0:
                await asyncio.sleep(pause)
            await self.enqueue_stamped(time.time())

    async def close(self) -> None:
        """Close what :meth:`open` opened."""

    def worker(self) -> list[str]:
        """The worker command, as its documentation gives it, with no tuning flags."""
        raise NotImplementedError

    def cwd(self) -> Path:
        """The folder the worker starts in."""
        return APPS

    def teardown(self) -> None:
        """Remove the store."""

    def version(self) -> str:
        """The system's version."""
        from importlib.metadata import version

        return version(self.name)


class Huey(Adapter):
    name = "huey"

    def setup(self) -> None:
        import redis

        redis.Redis(host="127.0.0.1", port=6379, db=self.args.redis_db).flushdb()

    async def open(self) -> None:
        sys.path.insert(0, str(APPS))
        import peer_huey

        self.mod = peer_huey

    async def enqueue(self, i: int) -> None:
        self.mod.noop(i)

    async def enqueue_stamped(self, enqueued: float) -> None:
        self.mod.stamped(enqueued)

    def worker(self) -> list[str]:
        return [str(BIN / "huey_consumer"), "peer_huey.huey"]

    def teardown(self) -> None:
        self.setup()


class RQ(Adapter):
    name = "rq"

    def setup(self) -> None:
        import redis

        redis.Redis(host="127.0.0.1", port=6379, db=self.args.redis_db).flushdb()

    async def open(self) -> None:
        sys.path.insert(0, str(APPS))
        import peer_rq
        import redis
        from rq import Queue

        self.mod = peer_rq
        self.queue = Queue(connection=redis.Redis(host="127.0.0.1", port=6379, db=self.args.redis_db))

    async def enqueue(self, i: int) -> None:
        self.queue.enqueue(self.mod.noop, i)

    async def enqueue_stamped(self, enqueued: float) -> None:
        self.queue.enqueue(self.mod.stamped, enqueued)

    def worker(self) -> list[str]:
        return [str(BIN / "rq"), "worker", "--url", f"redis://127.0.0.1:6379/{self.args.redis_db}"]

    def teardown(self) -> None:
        self.setup()


def _with_db(url: str, db: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + db))


def _admin(url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement)


class Procrastinate(Adapter):
    name = "procrastinate"
    DB = "peers_procrastinate"

    def setup(self) -> None:
        _admin(self.args.postgres_url, f"DROP DATABASE IF EXISTS {self.DB} WITH (FORCE)")
        _admin(self.args.postgres_url, f"CREATE DATABASE {self.DB}")
        self.env["PEERS_PG_URL"] = _with_db(self.args.postgres_url, self.DB)
        subprocess.run([str(BIN / "procrastinate"), "--app", "peer_procrastinate.app", "schema", "--apply"],
                       env=self.env, check=True, capture_output=True)

    async def open(self) -> None:
        sys.path.insert(0, str(APPS))
        os.environ["PEERS_PG_URL"] = self.env["PEERS_PG_URL"]
        import peer_procrastinate

        self.mod = peer_procrastinate
        await self.mod.app.open_async()

    async def enqueue(self, i: int) -> None:
        await self.mod.noop.defer_async(i=i)

    async def enqueue_stamped(self, enqueued: float) -> None:
        await self.mod.stamped.defer_async(enqueued=enqueued)

    async def close(self) -> None:
        await self.mod.app.close_async()

    def worker(self) -> list[str]:
        return [str(BIN / "procrastinate"), "--app", "peer_procrastinate.app", "worker"]

    def teardown(self) -> None:
        _admin(self.args.postgres_url, f"DROP DATABASE IF EXISTS {self.DB} WITH (FORCE)")


class Jobloom(Adapter):
    name = "jobloom"

    def __init__(self, args: argparse.Namespace, env: dict[str, str], dialect: str) -> None:
        super().__init__(args, env)
        self.dialect = dialect
        self.folder = tempfile.mkdtemp(prefix="jlpeers-")
        self.schema = f"jobloom_peers_{uuid.uuid4().hex[:8]}"
        if dialect == "sqlite":
            self.env["PEERS_JOBLOOM_URL"] = f"sqlite:///{self.folder}/peers.db"
        else:
            self.env["PEERS_JOBLOOM_URL"] = self.args.postgres_url
            self.env["PEERS_JOBLOOM_OPTIONS"] = json.dumps({"schema": self.schema})

    def setup(self) -> None:
        subprocess.run([str(BIN / "jobloom"), "migrate", "--app", "peer_jobloom:app"], env=self.env, check=True,
                       capture_output=True)

    async def open(self) -> None:
        sys.path.insert(0, str(APPS))
        os.environ.update({k: v for k, v in self.env.items() if k.startswith("PEERS_")})
        import peer_jobloom

        self.mod = peer_jobloom
        self.app = peer_jobloom.app

    async def enqueue(self, i: int) -> None:
        await self.app.enqueue(self.mod.Noop, {"i": i})

    async def enqueue_stamped(self, enqueued: float) -> None:
        await self.app.enqueue(self.mod.Stamped, {"enqueued": enqueued})

    async def close(self) -> None:
        await self.app.close()

    def worker(self) -> list[str]:
        return [str(BIN / "jobloom"), "worker", "peer_jobloom:app"]

    def teardown(self) -> None:
        if self.dialect == "postgres":
            import psycopg

            with psycopg.connect(self.args.postgres_url, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
        shutil.rmtree(self.folder, ignore_errors=True)


class NodePeer(Adapter):
    """A peer from npm, run under Node: ``node/producer.mjs`` enqueues (and times itself), a Node worker works."""

    package = ""

    def version(self) -> str:
        return str(json.loads((NODE / "node_modules" / self.package / "package.json").read_text())["version"])

    async def _producer(self, *argv: str) -> dict[str, Any]:
        proc = await asyncio.create_subprocess_exec(
            NODE_BIN, str(NODE / "producer.mjs"), self.name, *argv, env=self.env, cwd=NODE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"{err.decode()[-3000:]}\nnode/producer.mjs {self.name} {' '.join(argv)} failed")
        return dict(json.loads(out.decode().strip().splitlines()[-1]))

    async def enqueue_all(self, n: int) -> float:
        return float((await self._producer("enqueue", str(n)))["enqueue_per_s"])

    async def enqueue_paced(self, count: int, rate: float) -> None:
        await self._producer("latency", str(count), f"{rate:g}")


class BullMQ(NodePeer):
    name = package = "bullmq"
    PREFIX = "jobloom-peers-bullmq"

    def setup(self) -> None:
        import redis

        self.env["PEERS_BULLMQ_PREFIX"] = self.PREFIX
        client = redis.Redis(host="127.0.0.1", port=6379, db=self.args.redis_db)
        keys = list(client.scan_iter(match=f"{self.PREFIX}:*", count=1000))  # its own keys only
        for k in range(0, len(keys), 1000):
            client.delete(*keys[k:k + 1000])

    def worker(self) -> list[str]:
        return [NODE_BIN, str(NODE / "bullmq_worker.mjs")]

    def cwd(self) -> Path:
        return NODE

    def teardown(self) -> None:
        self.setup()


class GraphileWorker(NodePeer):
    name = package = "graphile-worker"
    DB = "peers_graphile_worker"

    def setup(self) -> None:
        _admin(self.args.postgres_url, f"DROP DATABASE IF EXISTS {self.DB} WITH (FORCE)")
        _admin(self.args.postgres_url, f"CREATE DATABASE {self.DB}")
        self.env["PEERS_GRAPHILE_URL"] = _with_db(self.args.postgres_url, self.DB)
        subprocess.run([*self._cli(), "--schema-only"], env=self.env, cwd=self.cwd(), check=True, capture_output=True)

    def _cli(self) -> list[str]:
        return [NODE_BIN, str(NODE / "node_modules" / "graphile-worker" / "dist" / "cli.js"), "-c",
                self.env["PEERS_GRAPHILE_URL"]]

    def worker(self) -> list[str]:
        jobs = ["--jobs", str(self.args.graphile_jobs)] if self.args.graphile_jobs else []
        return [*self._cli(), *jobs]

    def cwd(self) -> Path:
        return NODE / "graphile"  # its tasks: ./tasks/noop.js, ./tasks/stamped.js

    def teardown(self) -> None:
        _admin(self.args.postgres_url, f"DROP DATABASE IF EXISTS {self.DB} WITH (FORCE)")


class Sampler:
    """The peak of the summed RSS of a process and all its descendants, sampled every 50 ms."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self.most_processes = 0
        self._on = True
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while self._on:
            total, count = 0, 0
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                return
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    total += p.memory_info().rss
                    count += 1
            self.peak = max(self.peak, total)
            self.most_processes = max(self.most_processes, count)
            time.sleep(0.05)

    def stop(self) -> float:
        """Stop sampling; the peak in MiB."""
        self._on = False
        self._thread.join(timeout=5)
        return self.peak / 2**20


def _lines(folder: str, kind: str) -> list[str]:
    out: list[str] = []
    for path in glob.glob(os.path.join(folder, f"{kind}-*")):
        with open(path) as f:
            out += f.read().split("\n")[:-1]
    return out


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, -(-len(ordered) * q // 100)) - 1] if ordered else float("nan")


async def _wait_lines(folder: str, kind: str, n: int, timeout: float, alive: Callable[[], None]) -> None:
    deadline = time.monotonic() + timeout
    while len(_lines(folder, kind)) < n:
        alive()
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(_lines(folder, kind))} of {n} {kind} jobs started within {timeout:.0f} s")
        await asyncio.sleep(0.25)


async def _timed(n: int, call: Callable[[int], Awaitable[None]]) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        await call(i)
    return n / (time.perf_counter() - t0)


async def run(adapter: Adapter, args: argparse.Namespace, stamps: str) -> dict[str, Any]:
    """The protocol (module docstring) for one system."""
    adapter.setup()
    await adapter.open()
    proc: subprocess.Popen[bytes] | None = None
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    try:
        enqueue_rate = await adapter.enqueue_all(args.jobs)
        proc = subprocess.Popen(adapter.worker(), env=adapter.env, cwd=adapter.cwd(), stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        sampler = Sampler(proc.pid)

        def alive() -> None:
            if proc is not None and proc.poll() is not None:
                log.seek(0)
                raise SystemExit(f"the worker exited ({proc.returncode}):\n{log.read().decode()[-3000:]}")

        await _wait_lines(stamps, "drain", args.jobs + 1, args.timeout, alive)
        starts = sorted(float(x) for x in _lines(stamps, "drain"))  # N jobs and the warm-up one
        drain = (len(starts) - 1) / (starts[-1] - starts[0])
        await asyncio.sleep(1.0)  # idle: what is measured next is waking it
        await adapter.enqueue_paced(args.latency_jobs, args.rate)
        await _wait_lines(stamps, "latency", args.latency_jobs, 120, alive)
        delays = [(float(b) - float(a)) * 1000 for a, b in (x.split() for x in _lines(stamps, "latency"))]
        rss = sampler.stop()
        return {"system": adapter.name, "version": adapter.version(), "jobs": args.jobs,
                "enqueue_per_s": round(enqueue_rate, 1), "drain_per_s": round(drain, 1),
                "latency_jobs": len(delays), "latency_rate": args.rate,
                "p50_ms": round(_percentile(delays, 50), 3), "p99_ms": round(_percentile(delays, 99), 3),
                "rss_mb": round(rss, 1), "worker_processes": sampler.most_processes, "command": adapter.worker()}
    finally:
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()
        await adapter.close()
        adapter.teardown()


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("system", choices=["huey", "rq", "procrastinate", "bullmq", "graphile-worker", "jobloom-sqlite",
                                           "jobloom-postgres"])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--latency-jobs", type=int, default=300)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--redis-db", type=int, default=13)
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--timeout", type=float, default=900.0, help="Seconds the drain may take.")
    parser.add_argument("--graphile-jobs", type=int, default=0,
                        help="graphile-worker's --jobs (its concurrency); 0, the protocol: its default (1).")
    args = parser.parse_args()
    stamps = tempfile.mkdtemp(prefix="jlpeers-stamps-")
    env = {**os.environ, "PEERS_STAMPS": stamps, "PEERS_REDIS_DB": str(args.redis_db),
           "PYTHONPATH": str(APPS) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    os.environ["PEERS_STAMPS"] = stamps
    os.environ["PEERS_REDIS_DB"] = str(args.redis_db)
    adapters: dict[str, Callable[[], Adapter]] = {
        "huey": lambda: Huey(args, env), "rq": lambda: RQ(args, env),
        "procrastinate": lambda: Procrastinate(args, env),
        "bullmq": lambda: BullMQ(args, env), "graphile-worker": lambda: GraphileWorker(args, env),
        "jobloom-sqlite": lambda: Jobloom(args, env, "sqlite"),
        "jobloom-postgres": lambda: Jobloom(args, env, "postgres"),
    }
    try:
        report = asyncio.run(run(adapters[args.system](), args, stamps))
    finally:
        shutil.rmtree(stamps, ignore_errors=True)
    report["system"] = args.system
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
