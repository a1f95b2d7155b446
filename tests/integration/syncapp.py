"""The app of the sync-job tests, run in real worker processes (configured by environment).

Each job records what really happens inside it in files of ``JOBLOOM_IT_DIR``: a locked gauge of
how many are inside ``perform`` at once (with its peak), and start/end lines.
"""

from __future__ import annotations

import os
import time
from typing import Any

from itapp import _path, append, gauge  # type: ignore[import-not-found]  # copied beside this file

import jobloom


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
