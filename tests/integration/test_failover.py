"""Failover under load: a synchronous primary/standby pair built by the suite (``tests/pg_failover.py``),
3 worker processes and a producer process on one multi-host URL with ``target_session_attrs=read-write``.

While the workers drain a steady stream (at-least-once and at-most-once jobs, a binding with
``concurrency = 3``, a 1 s schedule), the primary's postmaster is killed with ``kill -9`` and the
standby promoted. Then the old primary is started again on its old timeline (split brain). Required:
no acknowledged enqueue lost, no at-most-once job started twice (those cut end ``stalled``), the limit
of 3 never exceeded (measured inside the jobs), no schedule tick made twice, the same processes going
on by themselves with jobs starting again within 10 s of the promotion, and nothing written to the old
primary once the standby was promoted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import jobloom
from tests.helpers import eventually
from tests.pg_failover import Pair

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # asserts the time to resume

RESUME_BOUND = 10.0  # seconds from the promotion to the next job start
APP = '''
from __future__ import annotations

import asyncio
import fcntl
import os
import time
from typing import Any

import jobloom

DIR = os.environ["JOBLOOM_FO_DIR"]


def mark(line: str) -> None:
    with open(os.path.join(DIR, "starts"), "a") as f:
        f.write(line + "\\n")


def gauge(delta: int) -> None:
    with open(os.path.join(DIR, "gauge"), "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        now, peak = (int(x) for x in (f.read().split() or ["0", "0"]))
        now += delta
        f.seek(0)
        f.truncate()
        f.write(f"{now} {max(peak, now)}")


class Steady(jobloom.Performer[dict[str, Any], int]):
    backoff = jobloom.Backoff.fixed(0.2)
    max_attempts = 10

    async def perform(self, payload: dict[str, Any]) -> int:
        mark(f"Steady {self.ctx.job_id} {self.ctx.attempt} {time.time()!r}")
        await asyncio.sleep(0.05)
        return int(payload["n"])


class Once(jobloom.Performer[dict[str, Any], int]):
    delivery = "at_most_once"

    async def perform(self, payload: dict[str, Any]) -> int:
        mark(f"Once {self.ctx.job_id} {self.ctx.attempt} {time.time()!r}")
        await asyncio.sleep(0.3)
        return int(payload["n"])


class Gate(jobloom.Performer[dict[str, Any], int]):
    concurrency = 3
    backoff = jobloom.Backoff.fixed(0.2)
    max_attempts = 10

    async def perform(self, payload: dict[str, Any]) -> int:
        mark(f"Gate {self.ctx.job_id} {self.ctx.attempt} {time.time()!r}")
        gauge(+1)
        try:
            await asyncio.sleep(0.2)
        finally:
            gauge(-1)
        return int(payload["n"])


class Tick(jobloom.Performer[dict[str, Any], None]):
    backoff = jobloom.Backoff.fixed(0.2)
    max_attempts = 10

    async def perform(self, payload: dict[str, Any]) -> None:
        mark(f"Tick {self.ctx.job_id} {self.ctx.attempt} {time.time()!r}")


app = jobloom.App(os.environ["JOBLOOM_FO_URL"], performers=[Steady, Once, Gate, Tick], lease=2.0, auto_migrate=True,
                  schedules=[jobloom.Schedule("tick", every=1.0, performer=Tick, payload={})])
'''
PRODUCER = '''
import asyncio, os, time
import foapp

KINDS = ["Steady", "Once", "Gate", "Steady"]


async def main() -> None:
    app = foapp.app
    acked = open(os.path.join(foapp.DIR, "acked"), "a")
    n = 0
    while not os.path.exists(os.path.join(foapp.DIR, "stop")):
        kind = KINDS[n % len(KINDS)]
        while True:  # the same unique key until acknowledged: a commit of unknown outcome is not enqueued twice
            try:
                job = await app.enqueue(kind, {"n": n}, unique_key=f"p{n}")
                break
            except Exception as exc:
                print(f"enqueue {n} failed: {type(exc).__name__}: {exc}", flush=True)
                await asyncio.sleep(0.2)
        acked.write(f"{n} {kind} {job.id} {time.time()!r}\\n")
        acked.flush()
        n += 1
        await asyncio.sleep(0.04)
    await app.close()


asyncio.run(main())
'''


@pytest.fixture
def pair() -> Iterator[Pair]:
    topology = Pair()
    try:
        yield topology
    finally:
        topology.destroy()


class Run:
    """The processes of the test, their folder and what they wrote."""

    def __init__(self, folder: Path, url: str) -> None:
        self.folder = folder
        (folder / "foapp.py").write_text(APP)
        self.env = {**os.environ, "PYTHONPATH": str(folder), "JOBLOOM_FO_URL": url, "JOBLOOM_FO_DIR": str(folder)}
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, args: list[str], log: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, *args], cwd=self.folder, env=self.env,
                                stdout=(self.folder / log).open("w"), stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def lines(self, name: str) -> list[list[str]]:
        path = self.folder / name
        return [line.split() for line in path.read_text().splitlines()] if path.exists() else []

    def starts_after(self, moment: float) -> list[float]:
        return [float(s[3]) for s in self.lines("starts") if float(s[3]) > moment]

    def cleanup(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)


def _tuples_written(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables "
                           "WHERE relname LIKE 'jobloom%'").fetchone()
        return int(row[0]) if row else 0


async def test_failover_to_a_synchronous_standby_loses_nothing_and_resumes(
        pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = pair.url()
    run = Run(tmp_path, url)
    monkeypatch.setenv("JOBLOOM_FO_DIR", str(tmp_path))
    monkeypatch.setenv("JOBLOOM_FO_URL", url)
    import importlib.util

    spec = importlib.util.spec_from_file_location("foapp_for_test", tmp_path / "foapp.py")
    assert spec is not None and spec.loader is not None
    foapp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(foapp)
    app = jobloom.App(url, auto_migrate=True, performers=[])
    try:
        await app.migrate()
        workers = [run.start(["-m", "jobloom.process", "foapp:app", "--concurrency", "8", "--grace", "2",
                              "--log-level", "warning"], f"worker{i}.log") for i in range(3)]
        producer = run.start(["-c", PRODUCER], "producer.log")
        await eventually(lambda: len(run.lines("acked")) >= 60 and len(run.lines("starts")) >= 40,
                         timeout=90, what="a steady stream")
        pair.kill_primary()
        killed = time.time()
        acked_before = len(run.lines("acked"))
        pair.standby.promote()
        promoted = time.time()
        first = await eventually(lambda: run.starts_after(promoted), timeout=60, what="a job started after promotion")
        resume = min(first) - promoted
        await eventually(lambda: len(run.lines("acked")) >= acked_before + 60, timeout=60,
                         what="the producer enqueueing again")
        # split brain: the old primary back on its old timeline, writable
        pair.restart_old_primary()
        old_url = pair.primary.url
        written = _tuples_written(old_url)
        acked_split = len(run.lines("acked"))
        fresh = jobloom.App(url, performers=[foapp.Steady])  # a store opened now looks at both servers
        try:
            probe = await fresh.enqueue("Steady", {"n": -1})
        finally:
            await fresh.close()
        await eventually(lambda: len(run.lines("acked")) >= acked_split + 40, timeout=60,
                         what="enqueues and work after the old primary came back")
        (tmp_path / "stop").touch()
        producer.wait(timeout=60)
        alive = [p.poll() is None for p in workers]
        acked = run.lines("acked")

        pending: list[jobloom.Job] = []

        async def all_finished() -> bool:
            pending[:] = [job for _, _, job_id, _ in acked if not (job := await app.get_job(int(job_id))).finished]
            return not pending and (await app.get_job(probe.id)).finished

        try:
            await eventually(all_finished, timeout=120, interval=0.5, what="every acknowledged job finished")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {pending[:5]}") from None
        for p in workers:
            p.send_signal(signal.SIGTERM)
        for p in workers:
            p.wait(timeout=30)
        assert all(alive), "a worker process died: they must reconnect on their own"
        assert _tuples_written(old_url) == written, "a worker wrote to the old primary after the promotion"

        states: Counter[tuple[str, str]] = Counter()
        cut: list[int] = []
        for n, kind, job_id, _ in acked:
            job = await app.get_job(int(job_id))
            assert job.payload == {"n": int(n)}
            states[(kind, job.state)] += 1
            if kind == "Once" and job.state == "stalled":
                cut.append(job.id)
            else:
                assert job.state == "succeeded", (kind, job)
        assert (await app.get_job(probe.id)).state == "succeeded"
        starts = run.lines("starts")
        once_starts = Counter(int(s[1]) for s in starts if s[0] == "Once")
        assert max(once_starts.values()) == 1, "an at-most-once job started twice"
        assert all(float(next(s[3] for s in starts if s[0] == "Once" and int(s[1]) == j)) < promoted for j in cut)
        now, peak = (int(x) for x in (tmp_path / "gauge").read_text().split())
        assert now == 0 and peak <= 3, f"peak simultaneous Gate runs was {peak}, the limit is 3"
        ticks = [j.unique_key for j in await app.list_jobs(binding="Tick", limit=10_000)]
        assert len(ticks) >= 3 and len(set(ticks)) == len(ticks), "a schedule tick was made twice"
        assert resume < RESUME_BOUND, f"jobs started again {resume:.2f} s after the promotion"
        figures = {"acknowledged": len(acked) + 1, "lost": 0, "double_starts": 0, "cut_stalled": len(cut),
                   "resume_after_promotion_s": round(resume, 2), "promotion_after_kill_s": round(promoted - killed, 2),
                   "gate_peak": peak, "ticks": len(ticks), "states": {f"{k}:{s}": c for (k, s), c in states.items()}}
        print("failover figures:", json.dumps(figures))
        (tmp_path / "figures.json").write_text(json.dumps(figures))
    finally:
        run.cleanup()
        await app.close()
