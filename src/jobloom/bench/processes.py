"""Processes a benchmark starts: ``jobloom worker`` (with its memory sampled) and a steady producer.

Every process is started with its output captured to a temporary file (shown when it fails) and is
stopped by :meth:`stop` (SIGTERM, then SIGKILL after a deadline), also when a measurement fails.
A :class:`Launcher` starts them: :func:`popen` (a new Python each, as users run them) unless the
caller passes another.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, Any, Protocol

import psutil  # type: ignore[import-untyped,unused-ignore]

from jobloom.bench.performers import APP_REF
from jobloom.bench.sandbox import Sandbox
from jobloom.core.errors import JobloomError

RSS_INTERVAL = 0.05
FAILURE_SIGNS = ("worker_process_exited", "cycle failed", "Traceback (most recent call last)")


def cpu_seconds(proc: psutil.Process) -> float:
    """The CPU seconds ``proc`` has used so far, all its threads (those that ended too).

    On Linux the kernel's scheduler clock of the process, in nanoseconds: ``cpu_times()`` counts clock
    ticks (10 ms), coarser than a short drain's whole use, which then reads as none at all. Elsewhere
    ``cpu_times()``."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError, OverflowError):
            return time.clock_gettime(((~proc.pid) << 3) | 2)  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
    times = proc.cpu_times()
    return float(times.user + times.system)


class BenchError(JobloomError):
    """A measurement could not be completed (a process died, or jobs did not finish in time)."""


class Child(Protocol):
    """A started process, handled as :class:`subprocess.Popen` handles one."""

    @property
    def pid(self) -> int:
        """Its process id."""

    @property
    def args(self) -> Any:
        """The command line it was started with."""

    def poll(self) -> int | None:
        """Its exit status once it has ended, else None."""

    def wait(self, timeout: float | None = None) -> int:
        """Wait for it to end (``subprocess.TimeoutExpired`` past ``timeout`` seconds)."""

    def send_signal(self, sig: int) -> None:
        """Send it ``sig``."""

    def kill(self) -> None:
        """SIGKILL it."""


class Launcher(Protocol):
    """Starts one of the bench's processes: the command line ``args`` with the environment ``env``, its
    standard output and error into ``output``, its standard input empty.

    Another launcher may start the same program otherwise (the test suite forks it from a Python that
    has imported jobloom already), provided the returned :attr:`Child.args` is the command line of what
    the process runs: a worker process (``jobloom.process``) is then sampled as one from its start."""

    def __call__(self, args: list[str], env: dict[str, str], output: IO[bytes]) -> Child:
        """Start the process."""


def popen(args: list[str], env: dict[str, str], output: IO[bytes]) -> Child:
    """The default :class:`Launcher`: ``subprocess.Popen``, a new Python for each process."""
    return subprocess.Popen(args, env=env, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


class _Proc:
    """One child process with its output in a temporary file."""

    def __init__(self, cmd: list[str], env: dict[str, str], name: str, launcher: Launcher = popen) -> None:
        self.name = name
        self.log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self.proc = launcher(cmd, env, self.log)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self, limit: int = 4000) -> str:
        size = self.log.seek(0, 2)  # the end only: a worker at the info level writes a line per job
        self.log.seek(max(0, size - limit))
        return self.log.read().decode(errors="replace")

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

    The peak RSS is that of the worker processes (the supervisor's children, or with one process
    the process ``jobloom worker`` became), sampled every 50 ms: the largest any one of them reached.
    The supervisor itself is not counted there;
    :attr:`peak_total_rss_mb` is the largest sum of every process of the group (supervisor included)
    at one sample. With ``flags=False`` the command is ``jobloom worker APP`` alone: every default.
    ``launcher`` starts the command (see :class:`Launcher`).
    """

    def __init__(self, box: Sandbox, *, processes: int | None, concurrency: int | None, app_ref: str = APP_REF,
                 bindings: list[str] | None = None, flags: bool = True, launcher: Launcher = popen) -> None:
        self.box = box
        self.launcher = launcher
        self.app_ref = app_ref
        self.bindings = bindings
        self.processes = processes
        self.concurrency = concurrency
        self.flags = flags
        self._proc: _Proc | None = None
        self._peaks: dict[int, int] = {}
        self._total_peak = 0
        self._cpu: list[tuple[float, float]] = []  # (epoch seconds, CPU seconds of every process so far)
        self._totals: list[tuple[float, int, int]] = []  # (epoch seconds, RSS of every process, processes)
        self._sampling = threading.Event()
        self._sampler: threading.Thread | None = None

    def command(self) -> list[str]:
        """The command line (as a user would type it, with this interpreter)."""
        cmd = [sys.executable, "-m", "jobloom.cli", "worker", self.app_ref]
        if not self.flags:
            return cmd
        if self.processes is not None:
            cmd += ["--processes", str(self.processes)]
        if self.concurrency is not None:
            cmd += ["--concurrency", str(self.concurrency)]
        cmd += ["--grace", "5", "--log-level", "warning"]
        return cmd + (["--bindings", ",".join(self.bindings)] if self.bindings else [])

    def start(self) -> None:
        """Start the supervisor and the sampler thread."""
        # the group's first CPU reading, exact: a process not started yet has used none. A worker that
        # starts at once (forked by a launcher) may run its first jobs before the sampler's first sample,
        # and a drain window opening then would otherwise have no reading before it
        self._cpu.append((time.time(), 0.0))
        self._proc = _Proc(self.command(), self.box.env(), "jobloom worker", self.launcher)
        self._sampling.set()
        self._sampler = threading.Thread(target=self._sample, name="bench-rss", daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        assert self._proc is not None
        try:
            root = psutil.Process(self._proc.pid)
        except psutil.Error:
            return
        # the root is a worker process once `jobloom worker` has exec'd it (one process), or from its start
        # when a launcher started the worker process itself
        root_works = _works(self._proc.proc.args)
        while True:
            # once stopping, one last sample while the processes still run (stop() ends them after this
            # thread): a drain shorter than the interval still has a sample after its end
            last = not self._sampling.is_set()
            try:
                children = root.children(recursive=True)
                if not root_works:
                    root_works = _works(root.cmdline())
            except psutil.Error:
                return
            total, cpu = 0, 0.0
            for proc in (root, *children):
                with contextlib.suppress(psutil.Error):
                    with proc.oneshot():
                        rss = proc.memory_info().rss
                        used = cpu_seconds(proc)
                    total += rss
                    cpu += used
                    if (proc is not root or root_works) and rss > self._peaks.get(proc.pid, 0):
                        self._peaks[proc.pid] = rss
            self._total_peak = max(self._total_peak, total)
            now = time.time()
            self._cpu.append((now, cpu))
            self._totals.append((now, total, 1 + len(children)))
            if last:
                return
            time.sleep(RSS_INTERVAL)

    @property
    def peak_total_rss_mb(self) -> float | None:
        """The largest RSS of all the group's processes added up (supervisor included), in MiB."""
        return self._total_peak / 2**20 if self._total_peak else None

    def peak_total_between(self, start: float, end: float) -> float | None:
        """The largest RSS of all the group's processes added up, in MiB, sampled from ``start`` to ``end``
        (epoch seconds): while it works, not while ``jobloom worker`` checks the app before it execs."""
        peak = max((rss for _, rss, _ in self._around(start, end)), default=0)
        return peak / 2**20 if peak else None

    def processes_between(self, start: float, end: float) -> int:
        """The most processes the group had at one sample from ``start`` to ``end`` (epoch seconds)."""
        return max((n for _, _, n in self._around(start, end)), default=0)

    def _around(self, start: float, end: float) -> list[tuple[float, int, int]]:
        """The samples from ``start`` to ``end``, widened by one sample interval on each side (a short
        window may fall between two samples)."""
        return [s for s in list(self._totals) if start - RSS_INTERVAL * 1.5 <= s[0] <= end + RSS_INTERVAL * 1.5]

    def cpu_between(self, start: float, end: float) -> float | None:
        """CPU seconds all the group's processes used from ``start`` to ``end`` (epoch seconds),
        interpolated between the samples around each moment (``None`` without samples around both)."""
        def at(moment: float) -> float | None:
            for (t0, c0), (t1, c1) in zip(self._cpu, self._cpu[1:], strict=False):
                if t0 <= moment <= t1:
                    return c0 + (c1 - c0) * ((moment - t0) / (t1 - t0) if t1 > t0 else 0.0)
            return None

        first, last = at(start), at(end)
        return None if first is None or last is None else last - first

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


def _works(cmdline: Any) -> bool:
    """Whether a process of this command line is a worker process (``python -m jobloom.process ...``)."""
    return isinstance(cmdline, list | tuple) and "jobloom.process" in cmdline


class Producer:
    """``python -m jobloom.bench.producer``: enqueues ``count`` jobs at a steady ``rate`` per second."""

    def __init__(self, box: Sandbox, *, rate: float, count: int, launcher: Launcher = popen) -> None:
        cmd = [sys.executable, "-m", "jobloom.bench.producer", "--rate", str(rate), "--count", str(count)]
        self._proc = _Proc(cmd, box.env(), "the producer", launcher)

    def done(self) -> bool:
        """Whether it has finished successfully (raises :class:`BenchError` if it failed)."""
        self._proc.check()
        return self._proc.proc.poll() == 0

    def stop(self) -> None:
        """Stop it if it is still running."""
        self._proc.stop(timeout=10)
