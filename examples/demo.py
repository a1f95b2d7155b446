"""The demo: starts a worker on the embedded SQLite store, enqueues example jobs, shows each one's fate.

Run it with ``./dev demo`` (or ``python examples/demo.py``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.table import Table

HERE = Path(__file__).resolve().parent
console = Console()
COLORS = {"succeeded": "green", "failed": "red", "running": "yellow", "scheduled": "cyan", "queued": "white",
          "cancelled": "magenta", "stalled": "red"}


def table(jobs: list, attempts: dict) -> Table:  # type: ignore[type-arg]
    t = Table(title="jobloom demo: what happens to each job")
    for col in ("id", "binding", "state", "attempts", "result / last error"):
        t.add_column(col)
    for j in jobs:
        last = attempts.get(j.id)
        detail = str(j.result) if j.result is not None else (j.error or (last.error if last else "") or "")
        color = COLORS.get(j.state, "white")
        t.add_row(str(j.id), j.binding, f"[{color}]{j.state}[/]", str(j.attempt), detail[:70])
    return t


async def main() -> int:
    workdir = Path.cwd() / "demo"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir()
    os.environ["JOBLOOM_DEMO_URL"] = f"sqlite:///{workdir}/jobloom.db"
    sys.path.insert(0, str(HERE))
    from demo_app import ChargeCard, FlakyThumbnail, Mail, Report, SendMail, app, publish_image

    console.print(f"[bold]store:[/] {app.url}  (migrations applied on first use)")
    env = {**os.environ, "PYTHONPATH": str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    worker = subprocess.Popen(
        [sys.executable, "-m", "jobloom.cli", "worker", "demo_app:app", "--processes", "2",
         "--log-level", "warning"], env=env,
    )
    try:
        jobs = []
        for i in range(8):
            jobs.append(await app.enqueue(SendMail, Mail(to=f"user{i}@example.com", subject="welcome")))
        jobs.append(await app.enqueue(SendMail, Mail(to="late@example.com", subject="reminder"), delay=2))
        jobs.append(await app.enqueue(FlakyThumbnail, {"image": "cat.png"}))
        jobs.append(await app.enqueue(ChargeCard, {"cents": -5}))
        jobs.append(await app.enqueue(Report, {"name": "monthly"}))
        dup = await app.enqueue(SendMail, Mail(to="once@example.com", subject="hi"), unique_key="once")
        again = await app.enqueue(SendMail, Mail(to="once@example.com", subject="hi"), unique_key="once")
        jobs.append(dup)
        console.print(f"unique_key 'once' enqueued twice -> the same job: {dup.id == again.id}")
        ids = [j.id for j in jobs]
        deadline = time.monotonic() + 30
        with Live(console=console, refresh_per_second=8) as live:
            while True:
                current = [await app.get_job(i) for i in ids]
                attempts = {j.id: (await app.attempts(j.id) or [None])[-1] for j in current}
                live.update(table(current, attempts))
                if all(j.finished for j in current) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
        console.print("\n[bold]attempt history of the flaky thumbnail job:[/]")
        for a in await app.attempts(jobs[9].id):
            console.print(f"  attempt {a.attempt}: {a.outcome:<10} {a.error or ''}")
        ok = all(j.finished for j in current)
        console.print("[green]all jobs finished[/]" if ok else "[red]some jobs did not finish in 30 s[/]")

        console.print("\n[bold]the image pipeline flow: analyze -> thumbnail || metadata -> publish[/]")
        runs = [await app.start(publish_image, {"image": name}, id=f"img-{name}") for name in ("cat.png", "dog.png")]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            current_runs = [await app.get_run(r.id) for r in runs]
            if all(r.state != "running" for r in current_runs):
                break
            await asyncio.sleep(0.1)
        for run in current_runs:
            t = Table(title=f"run {run.id}: {run.state}")
            for col in ("node", "state", "attempts", "result"):
                t.add_column(col)
            for name, node in run.nodes.items():
                t.add_row(name, f"[{COLORS.get(node.state, 'white')}]{node.state}[/]", str(node.attempt),
                          str(node.result)[:60])
            console.print(t)
        ok = ok and all(r.state == "succeeded" for r in current_runs)
        return 0 if ok else 1
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
        await app.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
