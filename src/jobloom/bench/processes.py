"""Processes a benchmark starts: ``jobloom worker`` (with its memory sampled) and a steady producer.

Every process is started with its output captured to a temporary file (shown when it fails) and is
stopped by :meth:`stop` (SIGTERM, then SIGKILL after a deadline), also when a measurement fails.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO

import psutil  # type: ignore[import-untyped,unused-ignore]

from jobloom.bench.performers import APP_REF
from jobloom.bench.sandbox import Sandbox
from jobloom.core.errors import JobloomError

RSS_INTERVAL = 0.05
FAILURE_SIGNS = ("worker_process_exited", "cycle failed", "Traceback (most recent call last)")


class BenchError(JobloomError):
    """A measurement could not be completed (a process died, or jobs did not finish in time)."""


class _Proc:
    """One child process with its output in a temporary file."""

    def __init__(self, cmd: list[str], env: dict[str, str], name: str) -> None:
        self.name = name
        self.log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self, limit: int = 4000) -> str:
        self.log.seek(0)
        text = self.log.read().decode(errors="replace")
        return text[-limit:]

    def check(self) -> None:
        code = self.proc.poll()
        if code is not None and code != 0:
            raise BenchError(f"{self.name} exited with status {code}:\n{self.output()}")

    def stop(self, timeout: float) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._kill_tree()
                self.proc.wait(timeout=10)
        self.log.close()

    def _kill_tree(self) -> None:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    child.kill()
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()


class WorkerGroup:
    """``jobloom worker APP --processes P --concurrency C`` on a sandbox, with worker memory sampled.

    ``bindings`` restricts the worker to the performers being measured: the bench app also holds
    performers for other workloads, and a worker dispatches every binding it serves in each cycle.

    The peak RSS is that of the worker processes (the supervisor's children), sampled every
    50 ms: the largest any one of them reached. The supervisor itself is not counted.
    """

    def __init__(self, box: Sandbox, *, processes: int, concurrency: int, app_ref: str = APP_REF,
                 bindings: list[str] | None = None) -> None:
        self.box = box
        self.app_ref = app_ref
        self.bindings = bindings
        self.processes = processes
        self.concurrency = concurrency
        self._proc: _Proc | None = None
        self._peaks: dict[int, int] = {}
        self._sampling = threading.Event()
        self._sampler: threading.Thread | None = None

    def command(self) -> list[str]:
        """The command line (as a user would type it, with this interpreter)."""
        cmd = [sys.executable, "-m", "jobloom.cli", "worker", self.app_ref, "--processes", str(self.processes),
               "--concurrency", str(self.concurrency), "--grace", "5", "--log-level", "warning"]
        return cmd + (["--bindings", ",".join(self.bindings)] if self.bindings else [])

    def start(self) -> None:
        """Start the supervisor and the sampler thread."""
        self._proc = _Proc(self.command(), self.box.env(), "jobloom worker")
        self._sampling.set()
        self._sampler = threading.Thread(target=self._sample, name="bench-rss", daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        assert self._proc is not None
        try:
            root = psutil.Process(self._proc.pid)
        except psutil.Error:
            return
        while self._sampling.is_set():
            try:
                children = root.children(recursive=True)
            except psutil.Error:
                return
            for child in children:
                with contextlib.suppress(psutil.Error):
                    rss = child.memory_info().rss
                    if rss > self._peaks.get(child.pid, 0):
                        self._peaks[child.pid] = rss
            time.sleep(RSS_INTERVAL)

    def worker_pids(self) -> list[int]:
        """The worker processes seen so far."""
        return sorted(self._peaks)

    @property
    def peak_rss_mb(self) -> float | None:
        """The largest RSS any worker process reached, in MiB (``None`` if none was seen)."""
        return max(self._peaks.values()) / 2**20 if self._peaks else None

    def check(self) -> None:
        """Raise :class:`BenchError` if the supervisor or one of its worker processes has exited."""
        if self._proc is not None:
            self._proc.check()
            if self._proc.proc.poll() is not None:
                raise BenchError(f"jobloom worker exited early:\n{self._proc.output()}")
            said = self._proc.output()
            # The supervisor restarts a crashed worker and a worker retries a failed cycle, but either
            # voids the measurement: report it now rather than at the deadline.
            for sign in FAILURE_SIGNS:
                if sign in said:
                    raise BenchError(f"jobloom worker reported a failure ({sign!r}):\n{said}")

    def output(self) -> str:
        """What the worker processes printed (the end of it)."""
        return self._proc.output() if self._proc is not None else ""

    def stop(self) -> None:
        """SIGTERM the supervisor (it stops its workers gracefully) and wait; kill after a deadline."""
        self._sampling.clear()
        if self._sampler is not None:
            self._sampler.join(timeout=5)
        if self._proc is not None:
            self._proc.stop(timeout=20)


class Producer:
    """``python -m jobloom.bench.producer``: enqueues ``count`` jobs at a steady ``rate`` per second."""

    def __init__(self, box: Sandbox, *, rate: float, count: int) -> None:
        cmd = [sys.executable, "-m", "jobloom.bench.producer", "--rate", str(rate), "--count", str(count)]
        self._proc = _Proc(cmd, box.env(), "the producer")

    def done(self) -> bool:
        """Whether it has finished successfully (raises :class:`BenchError` if it failed)."""
        self._proc.check()
        return self._proc.proc.poll() == 0

    def stop(self) -> None:
        """Stop it if it is still running."""
        self._proc.stop(timeout=10)
