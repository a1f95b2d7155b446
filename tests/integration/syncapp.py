"""The app of the sync-job tests, run in real worker processes (configured by environment).

Each job records what really happens inside it in files of ``JOBLOOM_IT_DIR``: a locked gauge of
how many are inside ``perform`` at once (with its peak), and start/end lines.
"""

from __future__ import annotations

import fcntl
import os
import time
from typing import Any

import jobloom

STATE = os.environ.get("JOBLOOM_IT_DIR", ".")


def _path(name: str) -> str:
    return os.path.join(STATE, name)


def gauge(delta: int) -> None:
    """A cross-process counter of jobs inside perform, with its peak, kept in a locked file."""
    with open(_path("gauge"), "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        now, peak = (int(x) for x in (f.read().split() or ["0", "0"]))
        now += delta
        peak = max(peak, now)
        f.seek(0)
        f.truncate()
        f.write(f"{now} {peak}")


def append(name: str, line: str) -> None:
    """Append one line to a state file (one write: lines from several processes do not mix)."""
    with open(_path(name), "a") as f:
        f.write(line + "\n")


class SyncGate(jobloom.Performer[dict[str, Any], int]):
    """At most 3 at once; a job with ``hold`` runs past its timeout until the file ``release`` exists."""

    concurrency = 3
    timeout = 1.0
    max_attempts = 1

    def perform(self, payload: dict[str, Any]) -> int:
        gauge(+1)
        append("lines", f"start {self.ctx.job_id} {time.time()!r}")
        try:
            if payload.get("hold"):
                end = time.monotonic() + 30
                while not os.path.exists(_path("release")) and time.monotonic() < end:
                    time.sleep(0.02)
            else:
                time.sleep(0.05)
        finally:
            append("lines", f"end {self.ctx.job_id} {time.time()!r}")
            gauge(-1)
        return self.ctx.job_id


class Spinner(jobloom.Performer[dict[str, Any], None]):
    """Process-isolated, never returns: appends ``attempt pid`` to ``spin`` every 50 ms."""

    isolation = "process"
    timeout = 0.5
    max_attempts = 2
    backoff = jobloom.Backoff.fixed(0.1)

    def perform(self, payload: dict[str, Any]) -> None:
        while True:
            append("spin", f"{self.ctx.attempt} {os.getpid()}")
            time.sleep(0.05)


class LongSpinner(Spinner):
    """A spinner whose timeout is far away: stopped only by a cancel or a shutdown."""

    timeout = 60.0


class ProcessEcho(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    """Process-isolated: returns its payload with the child's pid."""

    isolation = "process"

    def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"echo": payload, "pid": os.getpid()}


app = jobloom.App(
    os.environ.get("JOBLOOM_IT_URL", "sqlite:///it.db"),
    performers=[SyncGate, Spinner, LongSpinner, ProcessEcho],
    lease=float(os.environ.get("JOBLOOM_IT_LEASE", "1.0")),
    auto_migrate=True,
)
