"""The supervisor: starts N worker processes, restarts a crashed one, and passes SIGTERM/SIGINT on.

A child that exits while the supervisor is not stopping is restarted after a backoff that grows
with repeated crashes and resets once a child has stayed up for a while.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

log = logging.getLogger("jobloom.supervisor")
STABLE_AFTER = 30.0
GIVE_UP_AFTER = 10  # consecutive quick crashes of one slot: something is wrong with the app, not the moment


@dataclass
class _Child:
    slot: int
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    failures: int = 0
    restart_at: float = 0.0


def child_command(app_ref: str, concurrency: int, bindings: list[str] | None, grace: float,
                  log_level: str) -> list[str]:
    """The command line of one worker process."""
    cmd = [sys.executable, "-m", "jobloom.process", app_ref, "--concurrency", str(concurrency),
           "--grace", str(grace), "--log-level", log_level]
    if bindings:
        cmd += ["--bindings", ",".join(bindings)]
    return cmd


def serve(
    app_ref: str,
    *,
    processes: int = 1,
    concurrency: int = 16,
    bindings: list[str] | None = None,
    grace: float = 25.0,
    log_level: str = "info",
) -> int:
    """Run ``processes`` workers until SIGTERM/SIGINT; return the exit status.

    1 if a worker process crashed quickly ``GIVE_UP_AFTER`` times in a row (the supervisor then stops).
    """
    cmd = child_command(app_ref, concurrency, bindings, grace, log_level)
    children = [_Child(i) for i in range(processes)]
    stopping = False
    status = 0

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for c in children:
            if c.proc is not None and c.proc.poll() is None:
                c.proc.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", os.getcwd())
    if os.getcwd() not in env["PYTHONPATH"].split(os.pathsep):
        env["PYTHONPATH"] = os.getcwd() + os.pathsep + env["PYTHONPATH"]

    def start(c: _Child) -> None:
        c.proc = subprocess.Popen(cmd, env=env)
        c.started = time.monotonic()
        log.info("worker_process_started slot=%d pid=%d", c.slot, c.proc.pid)

    for c in children:
        start(c)
    while not stopping:
        now = time.monotonic()
        for c in children:
            if c.proc is not None and c.proc.poll() is not None and not stopping:
                code = c.proc.returncode
                c.failures = 0 if now - c.started > STABLE_AFTER else c.failures + 1
                delay = min(30.0, 0.5 * 2 ** max(0, c.failures - 1)) if c.failures else 0.1
                c.proc = None
                if c.failures >= GIVE_UP_AFTER:
                    log.error("worker_process_keeps_crashing slot=%d code=%s crashes=%d: stopping", c.slot, code,
                              c.failures)
                    status = 1
                    on_signal(signal.SIGTERM, None)
                    break
                log.warning("worker_process_exited slot=%d code=%s restart_in=%.1fs", c.slot, code, delay)
                c.restart_at = now + delay
            if c.proc is None and not stopping and now >= c.restart_at:
                start(c)
        time.sleep(0.1)
    deadline = time.monotonic() + grace + 10
    for c in children:
        if c.proc is None:
            continue
        try:
            c.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("worker_process_killed slot=%d pid=%d (did not stop within the grace period)",
                        c.slot, c.proc.pid)
            c.proc.kill()
            c.proc.wait()
    return status
