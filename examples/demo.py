"""The demo: starts 2 worker processes on the embedded SQLite store, enqueues example jobs, and shows
what happens to each, live, in one screen (it fits a terminal of 80 columns and 24 lines).

Run it with ``./dev demo`` (or ``python examples/demo.py``). What it shows, measured from the store's
attempt history rather than asserted: the mails ran at most 3 at once and started at most 10 per
second (``SendMail``'s ``concurrency = 3`` and ``rate_limit = "10/s"``), and which worker processes
ran the jobs.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

HERE = Path(__file__).resolve().parent
console = Console()
COLORS = {"succeeded": "green", "failed": "red", "running": "yellow", "scheduled": "cyan", "queued": "white",
          "cancelled": "magenta", "stalled": "red", "waiting": "dim"}
MAILS = 12
PROCESSES = 2


def jobloom_command() -> str:
    """The ``jobloom`` command as it can be typed here: beside this Python (the venv's), relative if below."""
    found = Path(sys.executable).parent / "jobloom"
    try:
        return str(found.relative_to(Path.cwd()))
    except ValueError:
        return str(found)


@dataclass
class Story:
    """One row of the screen: a job (or a group of jobs) and what happened to it."""

    title: str
    ids: list[int]
    explain: Any  # (jobs, attempts) -> str
    jobs: list[Any] = field(default_factory=list)
    attempts: dict[int, list[Any]] = field(default_factory=dict)

    def state(self) -> Text:
        counts: dict[str, int] = {}
        for j in self.jobs:
            counts[j.state] = counts.get(j.state, 0) + 1
        if len(self.jobs) == 1:
            state = self.jobs[0].state
            return Text(state, style=COLORS.get(state, ""))
        text = Text()
        for state, n in sorted(counts.items(), key=lambda kv: -kv[1]):
            text.append(f"{n} {state} ", style=COLORS.get(state, ""))
        return text


def peak_running(attempts: list[Any]) -> int:
    """The most attempts that were running at the same moment."""
    edges = []
    for a in attempts:
        edges.append((a.started_at.timestamp(), 1))
        edges.append(((a.finished_at or datetime.now(a.started_at.tzinfo)).timestamp(), -1))
    peak = running = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):  # an end before a start at the same moment
        running += step
        peak = max(peak, running)
    return peak


def rate_held(starts: list[float], rate: float, burst: float = 1.0) -> bool:
    """Whether every window [t_i, t_j] of starts held at most ``burst + rate * (t_j - t_i)`` of them."""
    starts = sorted(starts)
    return all(j - i + 1 <= burst + rate * (starts[j] - starts[i]) + 1e-6
               for i in range(len(starts)) for j in range(i + 1, len(starts)))


def mails_story(jobs: list[Any], attempts: dict[int, list[Any]]) -> str:
    sent = sum(j.state == "succeeded" for j in jobs)
    return f"{sent} of {len(jobs)} sent" if sent < len(jobs) else "all sent"


def measured(attempts: list[Any]) -> str:
    """What the mails' attempt history shows of their limits."""
    if not attempts:
        return "measured: no mail started yet"
    starts = sorted(a.started_at.timestamp() for a in attempts)
    return (f"measured: at most {peak_running(attempts)} mails at once (limit 3), "
            f"{len(starts)} started in {starts[-1] - starts[0]:.1f} s (limit 10/s)")


def one_story(jobs: list[Any], attempts: dict[int, list[Any]]) -> str:
    job = jobs[0]
    tries = attempts.get(job.id, [])
    if job.state == "succeeded":
        return f"succeeded on attempt {tries[-1].attempt}" if tries else "succeeded"
    last = job.error or (tries[-1].error if tries and tries[-1].error else "")
    return last.strip().splitlines()[-1] if last else job.state


def screen(stories: list[Story], header: str, footer: str) -> Group:
    """Everything on screen: at most 24 lines of at most 80 columns."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("job", no_wrap=True, min_width=15)
    table.add_column("state", no_wrap=True, min_width=12)
    table.add_column("what happened", overflow="fold")
    for s in stories:
        table.add_row(s.title, s.state(), s.explain(s.jobs, s.attempts))
    return Group(Text(header), table, Text(footer))


async def read(app: Any, stories: list[Story]) -> None:
    for s in stories:
        s.jobs = [await app.get_job(i) for i in s.ids]
        s.attempts = {i: await app.attempts(i) for i in s.ids}


def workers_line(stories: list[Story]) -> str:
    ran: dict[str, int] = {}
    for s in stories:
        for tries in s.attempts.values():
            for a in tries:
                if a.worker:
                    pid = a.worker.split(":")[1] if a.worker.count(":") >= 2 else a.worker
                    ran[pid] = ran.get(pid, 0) + 1
    if not ran:
        return f"{PROCESSES} worker processes starting..."
    done = ", ".join(f"pid {pid}: {n} attempts" for pid, n in sorted(ran.items()))
    return f"{len(ran)} worker processes ran them ({done})"


async def main() -> int:
    workdir = Path.cwd() / "demo"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir()
    os.environ["JOBLOOM_DEMO_URL"] = "sqlite:///demo/jobloom.db"  # relative to here, as the workers' folder
    sys.path.insert(0, str(HERE))
    from demo_app import ChargeCard, FlakyThumbnail, Mail, Report, SendMail, app, publish_image

    await app.migrate()
    env = {**os.environ, "PYTHONPATH": str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    worker = subprocess.Popen(
        [sys.executable, "-m", "jobloom.cli", "worker", "demo_app:app", "--processes", str(PROCESSES),
         "--log-level", "warning"], env=env,
    )
    try:
        mails = [await app.enqueue(SendMail, Mail(to=f"user{i}@example.com", subject="welcome"))
                 for i in range(MAILS - 2)]
        late = await app.enqueue(SendMail, Mail(to="late@example.com", subject="reminder"), delay=2)
        once = await app.enqueue(SendMail, Mail(to="once@example.com", subject="hi"), unique_key="once")
        again = await app.enqueue(SendMail, Mail(to="once@example.com", subject="hi"), unique_key="once")
        flaky = await app.enqueue(FlakyThumbnail, {"image": "cat.png"})
        card = await app.enqueue(ChargeCard, {"cents": -5})
        report = await app.enqueue(Report, {"name": "monthly"})
        runs = [await app.start(publish_image, {"image": name}, id=f"img-{name}") for name in ("cat.png", "dog.png")]
        stories = [
            Story(f"SendMail x{MAILS}", [m.id for m in mails] + [late.id, once.id], mails_story),
            Story("  delayed 2 s", [late.id], lambda jobs, _: "scheduled, then sent" if jobs[0].finished
                  else f"{jobs[0].state} until its delay passes"),
            Story("  unique_key x2", [once.id], lambda jobs, _: f"enqueued twice, one job: {once.id == again.id}"),
            Story("FlakyThumbnail", [flaky.id], one_story),
            Story("ChargeCard", [card.id], one_story),
            Story("Report", [report.id], one_story),
        ]
        header = (f"jobloom demo: store {app.url}, {PROCESSES} worker processes\n"
                  "SendMail: concurrency = 3, rate_limit = \"10/s\" (measured below)")
        deadline = time.monotonic() + 40
        with Live(console=console, refresh_per_second=8, auto_refresh=False) as live:
            while True:
                await read(app, stories)
                current_runs = [await app.get_run(r.id) for r in runs]
                flows = "; ".join(f"run {r.id}: {r.state}" for r in current_runs)
                mail_attempts = [a for i in stories[0].ids for a in stories[0].attempts.get(i, [])]
                footer = f"{measured(mail_attempts)}\nflow publish-image: {flows}\n{workers_line(stories)}\n"
                live.update(screen(stories, header, footer), refresh=True)
                finished = all(j.finished for s in stories for j in s.jobs) and all(
                    r.state != "running" for r in current_runs)
                if finished or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.25)
        held = peak_running(mail_attempts) <= 3 and rate_held([a.started_at.timestamp() for a in mail_attempts], 10)
        ok = finished and all(r.state == "succeeded" for r in current_runs) and held
        verdict = ("[green]all jobs finished; the mail limits held[/]" if ok else
                   "[red]some jobs did not finish in 40 s[/]" if not finished else "[red]a mail limit was broken[/]")
        console.print(verdict)
        console.print(f"look closer: {jobloom_command()} jobs list --url {app.url}", highlight=False)
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
