"""The supervisor: starts N worker processes, restarts one that exits, and passes SIGTERM/SIGINT on.

Each worker process reports once that it is ready (app loaded, start-up hooks done, store open, its
worker started) by writing one byte to a pipe whose write end it inherits (``--ready-fd``). A process
that dies after it became ready is restarted promptly and its slot's failure count starts over; only
consecutive deaths before ready back off exponentially. After ``give_up_after`` of those in a row the
supervisor stops the other processes gracefully and returns 1, with one log line saying why.

``jobloom worker --processes N`` (N > 1, or ``--supervise``) checks the app, then replaces itself
(``exec``) with ``python -m jobloom.engine.supervisor``: the supervisor never imports the app, or
anything of jobloom beyond this module, and costs a bare interpreter's memory (about 13 MB), whatever
the app loads. With one process and no ``--supervise`` it execs the worker process itself instead.

Signal handlers only set a flag (and wake the loop through :func:`signal.set_wakeup_fd`); the loop
itself signals the children. A child started while a SIGTERM is being handled is therefore always
signalled too: the loop sees the flag after ``Popen`` returns, and then signals every child it has.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from jobloom.core.retrying import Delays
from jobloom.engine.logs import LOG_FORMATS, configure_logging

log = logging.getLogger("jobloom.supervisor")
_IDLE_WAKE = 0.5  # seconds: the loop's longest sleep (a child's exit also wakes it, through SIGCHLD)


@dataclass
class _Child:
    slot: int
    proc: subprocess.Popen[bytes] | None = None
    ready_fd: int | None = None  # read end of this process's readiness pipe, until its byte or EOF
    ready: bool = False
    failures: int = 0  # consecutive deaths before ready
    restart_at: float = 0.0


def child_command(app_ref: str, concurrency: int | None, bindings: list[str] | None, grace: float,
                  log_level: str, sync_concurrency: int | None = None, log_format: str = "text",
                  metrics: bool = False) -> list[str]:
    """The command line of one worker process (without its ``--ready-fd``); a ``None`` concurrency
    leaves the worker's default."""
    cmd = [sys.executable, "-m", "jobloom.process", app_ref, "--grace", str(grace), "--log-level", log_level,
           "--log-format", log_format]
    if concurrency is not None:
        cmd += ["--concurrency", str(concurrency)]
    if sync_concurrency is not None:
        cmd += ["--sync-concurrency", str(sync_concurrency)]
    if bindings:
        cmd += ["--bindings", ",".join(bindings)]
    if metrics:
        cmd.append("--metrics")
    return cmd


def child_env() -> dict[str, str]:
    """The environment of a worker process: this one's, with the current folder on ``PYTHONPATH`` (the
    app's modules are found from where ``jobloom worker`` was started, in the worker and its children)."""
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", os.getcwd())
    if os.getcwd() not in env["PYTHONPATH"].split(os.pathsep):
        env["PYTHONPATH"] = os.getcwd() + os.pathsep + env["PYTHONPATH"]
    return env


def command_line(app_ref: str, *, processes: int, concurrency: int | None, sync_concurrency: int | None,
                 bindings: list[str] | None, grace: float, log_level: str, supervise: bool = False,
                 log_format: str = "text") -> list[str]:
    """What ``jobloom worker`` execs once it checked the app: ``python -m jobloom.engine.supervisor ...``,
    or for one process without ``supervise``, the worker process itself (``python -m jobloom.process``)."""
    if processes == 1 and not supervise:
        return child_command(app_ref, concurrency, bindings, grace, log_level, sync_concurrency, log_format)
    cmd = [sys.executable, "-m", "jobloom.engine.supervisor", app_ref, "--processes", str(processes),
           "--grace", str(grace), "--log-level", log_level, "--log-format", log_format]
    if concurrency is not None:
        cmd += ["--concurrency", str(concurrency)]
    if sync_concurrency is not None:
        cmd += ["--sync-concurrency", str(sync_concurrency)]
    if bindings:
        cmd += ["--bindings", ",".join(bindings)]
    return cmd


def main(argv: list[str] | None = None) -> int:
    """``python -m jobloom.engine.supervisor APP [options]``: run :func:`serve` (the app is not imported here)."""
    parser = argparse.ArgumentParser(prog="python -m jobloom.engine.supervisor")
    parser.add_argument("app")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--sync-concurrency", type=int, default=None)
    parser.add_argument("--bindings", default="")
    parser.add_argument("--grace", type=float, default=25.0)
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--log-format", default="text", choices=LOG_FORMATS)
    args = parser.parse_args(argv)
    configure_logging(args.log_level, log_format=args.log_format, buffered=False)  # a few lines: each at once
    return serve(args.app, processes=args.processes, concurrency=args.concurrency,
                 sync_concurrency=args.sync_concurrency, bindings=[b for b in args.bindings.split(",") if b] or None,
                 grace=args.grace, log_level=args.log_level, log_format=args.log_format)


def describe_exit(code: int | None) -> str:
    """``code=N`` for an exit status, ``signal=NAME`` for a death by signal (``Popen.returncode`` < 0)."""
    if code is None:
        return "code=none"
    if code < 0:
        try:
            return f"signal={signal.Signals(-code).name}"
        except ValueError:
            return f"signal={-code}"
    return f"code={code}"


def serve(
    app_ref: str,
    *,
    processes: int = 1,
    concurrency: int | None = None,
    sync_concurrency: int | None = None,
    bindings: list[str] | None = None,
    grace: float = 25.0,
    log_level: str = "info",
    log_format: str = "text",
    restart_delay: float = 0.1,
    backoff_first: float = 0.5,
    backoff_max: float = 30.0,
    give_up_after: int = 10,
    kill_margin: float = 10.0,
    env: dict[str, str] | None = None,
    on_exit: Callable[[int], None] | None = None,
) -> int:
    """Run ``processes`` workers until SIGTERM/SIGINT; return the exit status.

    A process that exits after it became ready is restarted after ``restart_delay`` seconds; one that
    exits before, after ``backoff_first`` doubling with each consecutive such exit up to ``backoff_max``.
    After ``give_up_after`` consecutive exits before ready in one slot, every process is stopped and the
    status is 1. ``concurrency`` and ``sync_concurrency`` (``None``: the worker's defaults) are passed on.
    On stop, each process gets SIGTERM, then SIGKILL if it still runs ``grace + kill_margin``
    seconds later. Must run in the main thread (it installs signal handlers, restored on return).

    ``env``: added to the processes' environment; with ``PROMETHEUS_MULTIPROC_DIR`` in it, they keep
    metrics (``--metrics``). ``on_exit(pid)`` is called when a process has ended, whatever ended it.
    """
    metrics = bool(env and env.get("PROMETHEUS_MULTIPROC_DIR"))
    command = child_command(app_ref, concurrency, bindings, grace, log_level, sync_concurrency, log_format, metrics)
    return supervise(command, processes=processes, stop_timeout=grace + kill_margin, restart_delay=restart_delay,
                     backoff_first=backoff_first, backoff_max=backoff_max, give_up_after=give_up_after, env=env,
                     on_exit=on_exit)


def supervise(
    command: list[str],
    *,
    processes: int,
    stop_timeout: float,
    restart_delay: float = 0.1,
    backoff_first: float = 0.5,
    backoff_max: float = 30.0,
    give_up_after: int = 10,
    env: dict[str, str] | None = None,
    on_exit: Callable[[int], None] | None = None,
) -> int:
    """Run ``command`` in ``processes`` slots as :func:`serve` does; return the exit status.

    Each process gets ``--ready-fd N`` appended: the write end of a pipe, inherited, on which it writes
    one byte once ready. A process still running ``stop_timeout`` seconds after its SIGTERM is killed.
    """
    sup = _Supervisor(command, processes, restart_delay=restart_delay, backoff_first=backoff_first,
                      backoff_max=backoff_max, give_up_after=give_up_after)
    sup.env.update(env or {})
    sup.on_exit = on_exit
    return sup.run(stop_timeout)


class _Supervisor:
    def __init__(self, cmd: list[str], processes: int, *, restart_delay: float, backoff_first: float,
                 backoff_max: float, give_up_after: int) -> None:
        self.cmd = cmd
        self.children = [_Child(i) for i in range(processes)]
        self.restart_delay = restart_delay
        self.backoff_first = backoff_first
        self.backoff_max = backoff_max
        self.give_up_after = give_up_after
        self.stopping = False
        self.signals: set[int] = set()  # the stop signals received
        self.now = False  # a stop signal came twice: the processes are to stop at once
        self.status = 0
        self.sel = selectors.DefaultSelector()
        self.on_exit: Callable[[int], None] | None = None
        self.env = child_env()

    def _on_stop_signal(self, signum: int, _frame: FrameType | None) -> None:
        # only flags: the loop signals the children (no race with Popen)
        if self.stopping and signum in self.signals:
            self.now = True  # the same signal again: the children are told again, and so stop at once
        self.signals.add(signum)
        self.stopping = True

    def run(self, stop_timeout: float) -> int:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        self.sel.register(wake_r, selectors.EVENT_READ, None)
        previous: dict[signal.Signals, Any] = {}
        old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        try:
            handlers: dict[signal.Signals, Callable[[int, FrameType | None], None]] = {
                signal.SIGTERM: self._on_stop_signal, signal.SIGINT: self._on_stop_signal,
                signal.SIGCHLD: lambda _s, _f: None,  # a child's exit wakes the loop through the wakeup fd
            }
            for sig, handler in handlers.items():
                previous[sig] = signal.signal(sig, handler)
            self._loop(wake_r)
            self._stop(stop_timeout)
            return self.status
        finally:
            signal.set_wakeup_fd(old_wakeup)
            for sig, old in previous.items():
                signal.signal(sig, old)
            for c in self.children:
                self._close_ready(c)
            self.sel.close()
            os.close(wake_r)
            os.close(wake_w)

    def _loop(self, wake_r: int) -> None:
        while not self.stopping:
            now = time.monotonic()
            for c in self.children:
                if self.stopping:
                    break
                if c.proc is not None and c.proc.poll() is not None:
                    self._exited(c, now)
                if c.proc is None and not self.stopping and now >= c.restart_at:
                    self._start(c)
            if self.stopping:
                break
            waits = [c.restart_at - now for c in self.children if c.proc is None]
            timeout = max(0.0, min([_IDLE_WAKE, *waits]))
            for key, _ in self.sel.select(timeout):
                if key.data is None:
                    while True:  # drain the signal bytes
                        try:
                            if not os.read(wake_r, 512):
                                break
                        except BlockingIOError:
                            break
                else:
                    self._read_ready(key.data)

    def _start(self, c: _Child) -> None:
        r, w = os.pipe()
        try:
            c.proc = subprocess.Popen([*self.cmd, "--ready-fd", str(w)], env=self.env, pass_fds=(w,))
        except OSError as exc:
            os.close(r)
            log.error("worker_process_start_failed slot=%d error=%s", c.slot, exc,
                      extra={"event": "worker_process_start_failed", "slot": c.slot, "error": str(exc)})
            c.proc = None
            self._failed(c, f"error={type(exc).__name__}", time.monotonic())
            return
        finally:
            os.close(w)
        c.ready = False
        c.ready_fd = r
        os.set_blocking(r, False)
        self.sel.register(r, selectors.EVENT_READ, c)
        log.info("worker_process_started slot=%d pid=%d", c.slot, c.proc.pid,
                 extra={"event": "worker_process_started", "slot": c.slot, "pid": c.proc.pid})

    def _read_ready(self, c: _Child) -> None:
        if c.ready_fd is None:
            return
        try:
            data = os.read(c.ready_fd, 16)
        except BlockingIOError:
            return
        if data and not c.ready:
            c.ready = True
            c.failures = 0
            pid = c.proc.pid if c.proc else 0
            log.info("worker_process_ready slot=%d pid=%d", c.slot, pid,
                     extra={"event": "worker_process_ready", "slot": c.slot, "pid": pid})
        self._close_ready(c)  # one byte, or EOF: either way nothing more will come

    def _close_ready(self, c: _Child) -> None:
        if c.ready_fd is not None:
            self.sel.unregister(c.ready_fd)
            os.close(c.ready_fd)
            c.ready_fd = None

    def _exited(self, c: _Child, now: float) -> None:
        assert c.proc is not None
        self._read_ready(c)  # a byte written just before dying is still in the pipe
        code, pid = c.proc.returncode, c.proc.pid
        c.proc = None
        self._ended(pid)
        if c.ready:
            c.failures = 0
            c.restart_at = now + self.restart_delay
            log.warning("worker_process_exited slot=%d pid=%d %s ready=yes restart_in=%.2fs", c.slot, pid,
                        describe_exit(code), self.restart_delay,
                        extra={"event": "worker_process_exited", "slot": c.slot, "pid": pid,
                               "exit": describe_exit(code), "ready": True})
            return
        self._failed(c, f"pid={pid} {describe_exit(code)}", now)

    def _failed(self, c: _Child, what: str, now: float) -> None:
        c.failures += 1
        if c.failures >= self.give_up_after:
            log.error("worker_process_gave_up slot=%d %s crashes_before_ready=%d (in a row, the limit) "
                      "- stopping every worker process", c.slot, what, c.failures,
                      extra={"event": "worker_process_gave_up", "slot": c.slot, "exit": what, "failures": c.failures})
            self.status = 1
            self.stopping = True
            return
        delay = Delays(self.backoff_first, self.backoff_max).nth(c.failures)
        c.restart_at = now + delay
        log.warning("worker_process_exited slot=%d %s ready=no crashes_before_ready=%d restart_in=%.2fs", c.slot,
                    what, c.failures, delay, extra={"event": "worker_process_exited", "slot": c.slot, "exit": what,
                                                    "ready": False, "failures": c.failures})

    def _stop(self, timeout: float) -> None:
        live = [c for c in self.children if c.proc is not None]
        for c in live:
            assert c.proc is not None
            if c.proc.poll() is None:
                c.proc.send_signal(signal.SIGTERM)
        if live:
            again = "press Ctrl-C again" if signal.SIGINT in self.signals else "send SIGTERM again"
            log.warning("supervisor_stopping processes=%d: each finishes its running jobs, up to %.0f s; %s to "
                        "stop them now", len(live), timeout, again,
                        extra={"event": "supervisor_stopping", "processes": len(live), "timeout": timeout})
        deadline = time.monotonic() + timeout
        told_again = False
        for c in live:
            assert c.proc is not None
            while c.proc.poll() is None and time.monotonic() < deadline:
                if self.now and not told_again:  # a second SIGTERM stops each process at once
                    told_again = True
                    for other in live:
                        if other.proc is not None and other.proc.poll() is None:
                            other.proc.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    c.proc.wait(timeout=max(0.0, min(0.1, deadline - time.monotonic())))
            try:
                c.proc.wait(timeout=0)
            except subprocess.TimeoutExpired:
                log.warning("worker_process_killed slot=%d pid=%d (did not stop within the grace period)",
                            c.slot, c.proc.pid)
                c.proc.kill()
                c.proc.wait()
            self._ended(c.proc.pid)
            log.info("worker_process_stopped slot=%d pid=%d %s", c.slot, c.proc.pid, describe_exit(c.proc.returncode),
                     extra={"event": "worker_process_stopped", "slot": c.slot, "pid": c.proc.pid,
                            "exit": describe_exit(c.proc.returncode)})

    def _ended(self, pid: int) -> None:
        if self.on_exit is not None:
            try:
                self.on_exit(pid)
            except Exception as exc:  # telling others must never stop supervising
                log.warning("on_exit(%d) failed (%s: %s)", pid, type(exc).__name__, exc)


if __name__ == "__main__":
    sys.exit(main())
