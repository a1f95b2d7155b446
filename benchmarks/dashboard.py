"""The dashboard on a big store: every page's time with 1,000,000 finished jobs and 10,000 runs, on SQLite
and PostgreSQL.

    .venv/bin/python benchmarks/dashboard.py                        # both stores, 1,000,000 finished jobs
    .venv/bin/python benchmarks/dashboard.py --store sqlite --finished 200000 --repeat 10
    .venv/bin/python benchmarks/dashboard.py --reads-only           # the App reads the pages make, no HTTP

Each store is private (a fresh SQLite file, or a fresh PostgreSQL schema) and seeded in two steps:

- the history, with one ``INSERT ... SELECT`` per table (set-up, not measured): finished jobs of five
  bindings over the last 20 hours (97.5 % succeeded, 2 % failed with an error, 0.5 % cancelled; some
  tagged, some with a unique key or a concurrency key), an attempt row for each attempt (three for a
  failed job), ``--runs`` finished flow runs of four jobs each (1 % failed), one more run whose fan-out
  made 10,000 children (50 failed), and the read model: a ``jobloom_stats`` row per binding and minute
  for the last 24 hours and a ``jobloom_stats_hourly`` row per binding and hour for 7 days (written by
  the projector's own ``upsert_stats`` and ``upsert_stats_hourly``);
- the active set, through the app itself: 2,000 queued jobs, 300 scheduled ones, 40 running (claimed by
  the coordinator's ``dispatch`` for two registered workers), a binding at its concurrency limit (3/3),
  an email tenant at its key limit, a flow run with a 200-child fan-out (120 children succeeded), six
  schedules, a run-time limit override, and an API token.

Then ``jobloom serve`` (one uvicorn process, as a user runs it) serves the app; this script logs in
with the token (the session cookie) and fetches every page in turn, ``--repeat`` rounds after two
warm-up rounds, one request at a time, reporting each page's median and p95 in ms, and the server
process's CPU time per request (which depends less on what else the machine runs). ``--reads-only``
times the App reads behind the pages in this process instead. Target: every page under 200 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import httpx  # noqa: E402
import psutil  # type: ignore[import-untyped,unused-ignore]  # noqa: E402

from jobloom.bench.sandbox import Sandbox, Target  # noqa: E402

PG_URL = os.environ.get("JOBLOOM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
HISTORY_SPAN = 20 * 3600.0
TARGET_MS = 200.0


# -- seeding -------------------------------------------------------------------------------------------


GRAPH = '{"fetch": [], "resize": ["fetch"], "publish": ["resize"]}'
BIG_RUN = "ingest-big-fanout"
BIG_CHILDREN = 10_000


def run_statements(dialect: str, runs: int, t0: float, step: float) -> list[str]:
    """``runs`` finished runs of the ingest flow (fetch, resize with one child, publish: four jobs each; 1 %
    failed at publish), and run :data:`BIG_RUN` in the middle of them, whose fan-out made
    :data:`BIG_CHILDREN` children (every 200th failed)."""
    seq = ("WITH RECURSIVE seq(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM seq WHERE x < @N@) "
           if dialect == "sqlite" else "")
    src = "seq" if dialect == "sqlite" else "generate_series(1, @N@) AS x"
    created = f"({t0} + x * {step})"
    state = "CASE WHEN x % 100 = 3 THEN 'failed' ELSE 'succeeded' END"
    runs_sql = (seq + "INSERT INTO jobloom_runs (id, flow, state, input, graph, depth, error, created_at, finished_at) "
                f"SELECT 'ingest-' || x, 'ingest', {state}, '{{\"n\":1}}', '{GRAPH}', 0, "
                f"CASE WHEN x % 100 = 3 THEN 'node publish failed' END, {created}, {created} + 2.5 FROM {src}")
    nodes = ("(SELECT 'fetch' AS node, 'ingest.fetch' AS b UNION ALL SELECT 'resize', 'jobloom.map' UNION ALL "
             "SELECT 'resize:0', 'image.resize' UNION ALL SELECT 'publish', 'ingest.publish') AS n")
    node_state = "CASE WHEN x % 100 = 3 AND n.node = 'publish' THEN 'failed' ELSE 'succeeded' END"
    jobs_sql = (seq + "INSERT INTO jobloom_jobs (binding, state, payload, priority, run_at, attempt, max_attempts, "
                "delivery, result, error, created_at, started_at, finished_at, run_id, node) "
                f"SELECT n.b, {node_state}, '{{}}', 0, {created}, 1, 3, 'at_least_once', '1', "
                f"CASE WHEN x % 100 = 3 AND n.node = 'publish' THEN 'ValueError: nothing to publish' END, "
                f"{created}, {created} + 0.1, {created} + 2.0, 'ingest-' || x, n.node FROM {src} CROSS JOIN {nodes}")
    mid = t0 + runs * step / 2
    big_run = ("INSERT INTO jobloom_runs (id, flow, state, input, graph, depth, created_at, finished_at) "
               f"VALUES ('{BIG_RUN}', 'ingest', 'succeeded', '{{\"n\":{BIG_CHILDREN}}}', '{GRAPH}', 0, "
               f"{mid}, {mid} + 600)")
    big_tops = ("INSERT INTO jobloom_jobs (binding, state, payload, priority, run_at, attempt, max_attempts, delivery, "
                "result, created_at, started_at, finished_at, run_id, node) "
                f"SELECT b, 'succeeded', '{{}}', 0, {mid}, 1, 3, 'at_least_once', '1', {mid}, {mid}, {mid} + 600, "
                f"'{BIG_RUN}', node FROM (SELECT 'fetch' AS node, 'ingest.fetch' AS b UNION ALL "
                "SELECT 'resize', 'jobloom.map' UNION ALL SELECT 'publish', 'ingest.publish') AS t")
    child_state = "CASE WHEN x % 200 = 17 THEN 'failed' ELSE 'succeeded' END"
    big_children = (seq + "INSERT INTO jobloom_jobs (binding, state, payload, priority, run_at, attempt, max_attempts, "
                    "delivery, result, error, created_at, started_at, finished_at, run_id, node) "
                    f"SELECT 'image.resize', {child_state}, '1', 0, {mid}, 1, 3, 'at_least_once', "
                    f"CASE WHEN x % 200 = 17 THEN NULL ELSE '2' END, "
                    f"CASE WHEN x % 200 = 17 THEN 'OSError: image truncated' END, {mid}, {mid} + 1, {mid} + 2, "
                    f"'{BIG_RUN}', 'resize:' || (x - 1) FROM {src}")
    return [runs_sql.replace("@N@", str(runs)), jobs_sql.replace("@N@", str(runs)), big_run, big_tops,
            big_children.replace("@N@", str(BIG_CHILDREN))]


def seed_history(box: Sandbox, rows: int, runs: int = 10_000) -> None:
    """``rows`` finished jobs over the last 20 hours (within the default retention of succeeded jobs, a
    day: a worker's pruning leaves them; a million is about 14 jobs a second), their attempts and tags
    (plain SQL, one statement per table)."""
    t0 = time.time() - HISTORY_SPAN
    step = HISTORY_SPAN / rows
    binding = ("CASE WHEN x % 100 < 40 THEN 'email.send' WHEN x % 100 < 70 THEN 'image.resize' "
               "WHEN x % 100 < 85 THEN 'webhook.deliver' WHEN x % 100 < 99 THEN 'report.build' "
               "ELSE 'billing.charge' END")
    state = "CASE WHEN x % 50 = 7 THEN 'failed' WHEN x % 200 = 13 THEN 'cancelled' ELSE 'succeeded' END"
    error = ("CASE WHEN x % 50 = 7 THEN (CASE x % 3 WHEN 0 THEN 'TimeoutError: upstream did not answer in 30 s' "
             "WHEN 1 THEN 'ConnectionResetError: peer reset the connection' "
             "ELSE 'ValueError: bad payload field amount' END) "
             "WHEN x % 200 = 13 THEN 'cancelled by an operator' END")
    created = f"({t0} + x * {step})"
    cols = ("binding, state, payload, priority, run_at, attempt, max_attempts, delivery, timeout, unique_key, "
            "concurrency_key, result, error, created_at, started_at, finished_at, tags")
    values = (f"{binding}, {state}, '{{\"i\":' || x || '}}', 0, {created}, "
              f"CASE WHEN x % 50 = 7 THEN 3 ELSE 1 END, 3, 'at_least_once', 60.0, "
              f"CASE WHEN x % 100 = 99 THEN 'invoice-' || x END, "
              f"CASE WHEN x % 100 < 40 THEN 'tenant-' || (x % 20) END, "
              f"CASE WHEN x % 50 <> 7 AND x % 200 <> 13 THEN '{{\"ok\":true}}' END, {error}, "
              f"{created}, {created} + 0.05, {created} + 0.25 + (x % 7) * 0.1, "
              f"CASE WHEN x % 100 < 40 AND x % 10 = 0 THEN '[\"tenant:acme\"]' END")
    if box.dialect == "sqlite":
        source = f"WITH RECURSIVE seq(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM seq WHERE x < {rows}) "
        jobs = source + f"INSERT INTO jobloom_jobs ({cols}) SELECT {values} FROM seq"
    else:
        jobs = f"INSERT INTO jobloom_jobs ({cols}) SELECT {values} FROM generate_series(1, {rows}) AS x"
    attempts = ("INSERT INTO jobloom_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error) "
                "SELECT id, 1, 'worker-old', started_at, finished_at, "
                "CASE state WHEN 'succeeded' THEN 'succeeded' WHEN 'failed' THEN 'failed' ELSE 'cancelled' END, error "
                "FROM jobloom_jobs")
    retries = ("INSERT INTO jobloom_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error) "
               "SELECT id, n.a, 'worker-old', started_at + n.a * 60, finished_at + n.a * 60, 'failed', error "
               "FROM jobloom_jobs CROSS JOIN (SELECT 2 AS a UNION ALL SELECT 3) AS n WHERE state = 'failed'")
    tags = ("INSERT INTO jobloom_job_tags (tag, job_id) "
            "SELECT 'tenant:acme', id FROM jobloom_jobs WHERE tags IS NOT NULL")
    statements = [jobs, attempts, retries, tags, *run_statements(box.dialect, runs, t0, HISTORY_SPAN / max(runs, 1))]
    if box.dialect == "sqlite":
        box.execute("BEGIN IMMEDIATE")
        for s in statements:
            box.execute(s)
        box.execute("COMMIT")
    else:
        conn = box._connect()
        with conn.transaction():
            for s in statements:
                conn.execute(s)
        for table in ("jobloom_jobs", "jobloom_attempts", "jobloom_job_tags"):
            conn.execute(f"VACUUM ANALYZE {table}")  # what autovacuum does soon after a bulk load


async def seed_stats(app: Any, bindings: tuple[str, ...]) -> None:
    """The read model of the last 24 hours: one row per binding and minute, as the projector writes it."""
    from jobloom.housekeeping.stats import Tally

    now_minute = int(time.time() // 60)
    params = []
    for b_index, binding in enumerate(bindings):
        for m in range(now_minute - 1440, now_minute + 1):
            tally = Tally()
            n = 20 + (m + b_index) % 15
            for i in range(n):
                tally.add_event("enqueued", None)
                tally.add_event("started", None)
                failed = (m + i) % 29 == 0
                tally.add_event("failed" if failed else "succeeded", 0.02 + (i % 10) * 0.03 + b_index * 0.05)
            params.append(tally.params(binding, m))
    store = await app.store()

    async def work(tx: Any) -> None:
        await tx.executemany("upsert_stats", params)

    await store.transact(work)
    hours = []
    now_hour = now_minute - now_minute % 60
    for b_index, binding in enumerate(bindings):
        for h in range(now_hour - 7 * 24 * 60, now_hour + 1, 60):
            tally = Tally()
            for i in range(60 * (20 + b_index)):
                tally.add_event("started", None)
                tally.add_event("failed" if i % 29 == 0 else "succeeded", 0.02 + (i % 10) * 0.03 + b_index * 0.05)
            hours.append(tally.params(binding, h))

    async def hourly(tx: Any) -> None:
        await tx.executemany("upsert_stats_hourly", hours)

    await store.transact(hourly)


async def seed_active(app: Any) -> dict[str, Any]:
    """The active set, through the app: what the pages show beside the history. Returns ids to visit."""
    import dashboard_app as da

    from jobloom.engine import coordinator, registry
    from jobloom.http.tokens import create_token

    await app.register_bindings()
    store = await app.store()
    now = app.now()
    await store.transact(lambda tx: registry.beat(tx, "bench-w1", list(app.specs), 50, 3600.0, now))
    await store.transact(lambda tx: registry.beat(tx, "bench-w2", ["email.send", "report.build"], 50, 3600.0, now))
    await app.enqueue_many([(da.EmailSend, {"tenant": f"tenant-{i % 20}", "n": i}) for i in range(800)])
    await app.enqueue_many([(da.ImageResize, i) for i in range(600)])
    await app.enqueue_many([(da.WebhookDeliver, {"n": i}) for i in range(400)])
    await app.enqueue_many([(da.ReportBuild, {"n": i}) for i in range(200)])
    for i in range(300):
        await app.enqueue(da.BillingCharge, {"n": i}, delay=60 + i * 30, unique_key=f"next-invoice-{i}")

    async def claim(tx: Any, binding: str, n: int, worker: str) -> list[int]:
        done = await coordinator.dispatch(tx, binding, capacity=n, worker=worker, now=app.now(), lease=3600.0)
        return [c.id for c in done.claimed]

    running: list[int] = []
    for binding, n, worker in (("report.build", 10, "bench-w2"), ("email.send", 20, "bench-w2"),
                               ("image.resize", 17, "bench-w1")):
        running += await store.transact(lambda tx, b=binding, k=n, w=worker: claim(tx, b, k, w))
    held = await app.list_jobs("queued", "report.build", limit=1)
    await app.set_limits("webhook.deliver", rate_limit="20/s burst 20", concurrency=50)
    run = await app.start(da.INGEST, {"n": 200}, id="ingest-2026-12-01")
    await app.drain(bindings=["ingest.fetch", "jobloom.map"])  # the fan-out makes its 200 children
    child_ids = [s.job_id for name, s in sorted((await app.get_run(run.id)).nodes.items()) if ":" in name][:120]
    # 120 children done: written as data by the caller (set-up, not a transition the test makes)
    box_sql = ("UPDATE jobloom_jobs SET state = 'succeeded', attempt = 1, result = '2', started_at = created_at, "
               "finished_at = created_at + 0.2 WHERE id IN (" + ",".join(str(i) for i in child_ids) + ")")
    import jobloom.schedules.schedule as sch

    for i, (cron, tz) in enumerate([("0 3 * * *", "Europe/Berlin"), ("*/5 * * * *", "UTC"),
                                    ("0 9 * * 1-5", "America/New_York"), ("30 2 1 * *", "Asia/Tokyo")]):
        await app.add_schedule(sch.Schedule(f"report-{i}", cron=cron, timezone=tz, performer=da.ReportBuild,
                                            payload={"schedule": i}))
    await app.add_schedule(sch.Schedule("heartbeat", every=30.0, performer=da.WebhookDeliver, payload={}))
    token, _ = await create_token(store, "bench", ["read", "operate"])
    return {"token": token, "running": running[0], "held": held[0].id, "run": run.id, "children_sql": box_sql}


async def seed(box: Sandbox, finished: int, runs: int = 10_000) -> dict[str, Any]:
    """Migrate, seed the history and the active set; the ids the pages visit."""
    await box.prepare()
    t = time.monotonic()
    seed_history(box, finished, runs)
    print(f"  history: {finished:,} finished jobs and {runs:,} runs in {time.monotonic() - t:.0f} s", flush=True)
    app = bench_app(box)
    try:
        import dashboard_app as da

        await seed_stats(app, da.HISTORY_BINDINGS)
        found = await seed_active(app)
    finally:
        await app.close()
    box.execute(found.pop("children_sql"))
    if box.dialect == "postgres":
        box.execute("VACUUM ANALYZE jobloom_jobs")  # what autovacuum does after the active set came in
    found["finished"] = finished // 2 + 1  # a succeeded job in the middle of the history
    found["failed"] = (finished // 50) * 50 + 7 - 50  # a failed one near the end
    return found


def bench_app(box: Sandbox) -> Any:
    """The served app's twin in this process, on ``box``'s store."""
    import dashboard_app as da

    import jobloom

    return jobloom.App(box.url, performers=da.PERFORMERS, flows=[da.INGEST], **box.options)


# -- measuring -------------------------------------------------------------------------------------------


def pages(ids: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, path) of each page and live fragment to time."""
    return [
        ("overview", "/"), ("overview (live part)", "/overview/live"),
        ("overview: 24 h", "/?window=24h"), ("overview: 7 d", "/?window=7d"),
        ("overview (live part, 7 d)", "/overview/live?window=7d"),
        ("jobs", "/jobs"), ("jobs: failed", "/jobs?state=failed"), ("jobs: succeeded", "/jobs?state=succeeded"),
        ("jobs: queued", "/jobs?state=queued"), ("jobs: binding", "/jobs?binding=billing.charge"),
        ("jobs: failed + text", "/jobs?state=failed&text=TimeoutError"), ("jobs: text", "/jobs?text=TimeoutError"),
        ("jobs: unique key", "/jobs?binding=billing.charge&unique_key=invoice-99"),
        ("jobs: text, no match", "/jobs?text=no-such-error"),
        ("jobs: binding, 1 job", "/jobs?binding=ingest.fetch"),
        ("jobs: tag", "/jobs?tag=tenant:acme&state=all"),
        ("jobs: payload text", "/jobs?state=all&payload_text=%22i%22:4242"),
        ("jobs: payload text, no match", "/jobs?state=all&payload_text=no-such-thing"),
        ("job: succeeded", f"/jobs/{ids['finished']}"), ("job: failed", f"/jobs/{ids['failed']}"),
        ("job: queued, held", f"/jobs/{ids['held']}"), ("job: running", f"/jobs/{ids['running']}"),
        ("runs", "/runs"), ("run (200-child fan-out)", f"/runs/{ids['run']}"),
        ("run (10,000-child fan-out)", f"/runs/{BIG_RUN}"),
        ("run: its children, page 50", f"/runs/{BIG_RUN}?node=resize&page=50"),
        ("runs: flow ingest, page", "/runs?flow=ingest"),
        ("enqueue form", "/actions/enqueue"), ("start-a-run form", "/actions/start"),
        ("schedules", "/schedules"), ("limits", "/limits"), ("workers", "/workers"),
    ]


def measure_http(box: Sandbox, ids: dict[str, Any], repeat: int) -> dict[str, list[float]]:
    """Serve the app with ``jobloom serve``, log in with the token, and time each page."""
    from http_api import free_port

    env = {**os.environ, "JOBLOOM_BENCH_URL": box.url, "PYTHONPATH": str(HERE)}
    if box.options.get("schema"):
        env["JOBLOOM_BENCH_SCHEMA"] = str(box.options["schema"])
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "jobloom.cli", "serve", "--app", "dashboard_app:app",
                               "--port", str(port), "--log-level", "warning"], env=env, cwd=HERE)
    times: dict[str, list[float]] = {}
    cpu: dict[str, float] = {}
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=30) as client:
            deadline = time.monotonic() + 60
            while True:
                try:
                    form = client.get("/login")  # sets the login form's cookie; the form carries its token
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise SystemExit("the server did not start") from None
                    time.sleep(0.2)
            found = re.search(r'name="csrf" value="([^"]+)"', form.text)
            csrf = found.group(1) if found else ""
            login = client.post("/login", data={"token": ids["token"], "next": "/", "csrf": csrf})
            if login.status_code != 303 or not client.cookies:
                raise SystemExit(f"login refused: {login.status_code} {login.text[:200]}")
            visits = pages(ids)
            proc = psutil.Process(server.pid)
            for round_ in range(repeat + 2):  # rounds over every page: a busy spell of the machine hits all
                for name, path in visits:
                    cpu0 = _cpu(proc)
                    t = time.perf_counter()
                    r = client.get(path)
                    took = (time.perf_counter() - t) * 1000
                    if r.status_code != 200:
                        raise SystemExit(f"{path}: {r.status_code} {r.text[:300]}")
                    if round_ >= 2:  # two warm-up rounds
                        times.setdefault(name, []).append(took)
                        cpu[name] = cpu.get(name, 0.0) + (_cpu(proc) - cpu0) * 1000
    finally:
        server.terminate()
        server.wait(10)
    for name, total in cpu.items():  # the server's CPU per request: what the page costs, whatever else runs
        times[CPU_PREFIX + name] = [total / repeat]
    return times


CPU_PREFIX = "cpu:"


def _cpu(proc: psutil.Process) -> float:
    """CPU seconds (user and system) the server process has used so far."""
    t = proc.cpu_times()
    return float(t.user + t.system)


async def measure_reads(box: Sandbox, ids: dict[str, Any], repeat: int) -> dict[str, list[float]]:
    """Time the App reads the pages make, in this process."""
    from jobloom.app.diagnose import why_not_running
    from jobloom.dashboard import reads

    app = bench_app(box)
    store = await app.store()
    calls: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("counts", lambda: app.counts()), ("list_bindings", lambda: app.list_bindings()),
        ("stats, last hour", lambda: app.stats(since=timedelta(hours=1))),
        ("binding rows", lambda: reads.binding_rows(store)), ("workers", lambda: reads.workers(store)),
        ("search: first page", lambda: app.list_jobs(limit=50)),
        ("search: failed", lambda: app.list_jobs("failed", limit=50)),
        ("search: succeeded", lambda: app.list_jobs("succeeded", limit=50)),
        ("search: binding", lambda: app.list_jobs(binding="billing.charge", limit=50)),
        ("search: text", lambda: app.list_jobs(text="TimeoutError", limit=50)),
        ("get_job + attempts", lambda: asyncio.gather(app.get_job(ids["failed"]), app.attempts(ids["failed"]))),
        ("diagnose: held", lambda: why_not_running(app, ids["held"])),
        ("list_runs", lambda: app.list_runs(limit=25)), ("get_run (fan-out)", lambda: app.get_run(ids["run"])),
        ("list_schedules", lambda: app.list_schedules()),
    ]
    out: dict[str, list[float]] = {}
    try:
        for name, call in calls:
            await call()
            samples = []
            for _ in range(repeat):
                t = time.perf_counter()
                await call()
                samples.append((time.perf_counter() - t) * 1000)
            out[name] = samples
    finally:
        await app.close()
    return out


def p95(samples: list[float]) -> float:
    """The 95th percentile (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]


def table(results: dict[str, dict[str, list[float]]]) -> str:
    """A markdown table: median and p95 per page and store, and the server's CPU per request (HTTP)."""
    stores = list(results)
    names = list(dict.fromkeys(n for r in results.values() for n in r if not n.startswith(CPU_PREFIX)))
    with_cpu = any(n.startswith(CPU_PREFIX) for r in results.values() for n in r)
    cols = [f"{s} median | {s} p95" + (f" | {s} server CPU" if with_cpu else "") for s in stores]
    lines = ["| page | " + " | ".join(cols) + " |", "|---|" + ("---:|" * (3 if with_cpu else 2)) * len(stores)]
    for name in names:
        cells = []
        for s in stores:
            got = results[s].get(name)
            if got is None:
                cells += ["", ""] + ([""] if with_cpu else [])
                continue
            med, top = statistics.median(got), p95(got)
            mark = "" if top < TARGET_MS else " **over**"
            cells += [f"{med:.1f}", f"{top:.1f}{mark}"]
            if with_cpu:
                cells.append(f"{results[s].get(CPU_PREFIX + name, [0.0])[0]:.1f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def one_store(url: str, finished: int, repeat: int, reads_only: bool, keep: bool,
                    runs: int = 10_000) -> dict[str, list[float]]:
    """Seed a private store on ``url`` and time it."""
    target = Target(url)
    box = target.sandbox()
    try:
        print(f"{target.dialect}: seeding", flush=True)
        ids = await seed(box, finished, runs)
        print(f"{target.dialect}: measuring", flush=True)
        if reads_only:
            return await measure_reads(box, ids, repeat)
        return await asyncio.to_thread(measure_http, box, ids, repeat)
    finally:
        if keep:
            print(f"kept: {box.url} {box.options}")
        else:
            target.close()


def main() -> None:
    """Parse the arguments, run each store, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--finished", type=int, default=1_000_000, help="finished jobs in the history")
    parser.add_argument("--runs", type=int, default=10_000, help="finished flow runs (four jobs each)")
    parser.add_argument("--repeat", type=int, default=20, help="timed requests per page")
    parser.add_argument("--reads-only", action="store_true", help="time the App reads in-process, no HTTP")
    parser.add_argument("--sqlite-dir", default=None, help="folder of the SQLite file (default: a temporary one)")
    parser.add_argument("--postgres-url", default=PG_URL)
    parser.add_argument("--keep", action="store_true", help="leave the seeded stores in place")
    args = parser.parse_args()
    results: dict[str, dict[str, list[float]]] = {}
    if args.store in ("sqlite", "both"):
        folder = args.sqlite_dir or os.path.join(os.environ.get("TMPDIR", "/tmp"), "jobloom-dashboard-bench")
        os.makedirs(folder, exist_ok=True)
        results["SQLite"] = asyncio.run(one_store(f"sqlite:///{folder}/bench.db", args.finished, args.repeat,
                                                  args.reads_only, args.keep, args.runs))
    if args.store in ("postgres", "both"):
        results["PostgreSQL"] = asyncio.run(one_store(args.postgres_url, args.finished, args.repeat,
                                                      args.reads_only, args.keep, args.runs))
    print()
    load = os.getloadavg()
    print(f"{args.finished:,} finished jobs, {args.runs:,} runs; {args.repeat} timed requests per page (ms); "
          f"load average at the end {load[0]:.1f} on {os.cpu_count()} cores:")
    print(table(results))


if __name__ == "__main__":
    main()
