"""Worker processes for the tests, forked from a process that has imported jobloom once.

Each ``python -m jobloom.process APP`` a test starts spends most of its start-up importing jobloom, its
stores and their drivers (about half a second of CPU here), and the integration tests start a few hundred
of them. A :class:`Zygote` is a Python process that imports those modules once and then forks a worker
for each request: the child takes the request's environment, folder and arguments, puts the folders of
its ``PYTHONPATH`` first on ``sys.path`` (as a new interpreter would) and runs ``jobloom.process.main``.
The app module itself (``itapp``) is imported in the child, after its environment is set, as a new
process would.

A :class:`Forked` handle stands for the child as ``subprocess.Popen`` does (``pid``, ``poll``, ``wait``,
``send_signal``, ``kill``, ``terminate``, ``returncode`` with ``-N`` for a signal): the zygote is the
child's parent, so it reaps the child and sends its exit status back. A worker that must be a process of
its own from ``exec`` on (under ``faketime``'s ``LD_PRELOAD``, or a command prefix) is not started here.

The zygote is started by the first request of a test process and ends when that process does.
``JOBLOOM_TEST_NO_ZYGOTE=1`` in the tests' environment starts every worker with ``exec`` instead.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any

_SERVE = r"""
import gc, json, os, selectors, signal, socket, sys, traceback

import jobloom.process  # noqa: F401  (the point: imported once, before any fork)
import jobloom.store.sqlite.store  # noqa: F401
try:
    import jobloom.store.postgres.store  # noqa: F401
except ImportError:
    pass
gc.collect()
gc.freeze()

sock = socket.socket(fileno=int(sys.argv[1]))
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)
sel = selectors.DefaultSelector()
sel.register(sock, selectors.EVENT_READ, "request")
sel.register(wake_r, selectors.EVENT_READ, "child")
buffer = b""


def send(message):
    sock.sendall(json.dumps(message).encode() + b"\n")


def child(request):
    sel.close()
    sock.close()
    os.close(wake_r)
    os.close(wake_w)
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    code = 1
    try:
        if request.get("stderr"):
            fd = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 2)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        paths = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:0] = [os.getcwd(), *paths]
        sys.argv = ["-m", *request["argv"]]
        from jobloom.process import main

        code = main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            import logging

            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        send({"pid": pid, "status": os.waitstatus_to_exitcode(status)})


while True:
    for key, _ in sel.select():
        if key.data == "child":
            os.read(wake_r, 4096)
            reap()
            continue
        data = sock.recv(65536)
        if not data:
            sys.exit(0)
        buffer += data
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                child(request)
            send({"started": pid})
"""


class Forked:
    """A worker forked by the zygote, handled as ``subprocess.Popen`` handles a child."""

    def __init__(self, zygote: Zygote, pid: int, args: list[str]) -> None:
        self.zygote = zygote
        self.pid = pid
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit status if the worker has ended, else None."""
        if self.returncode is None:
            self.returncode = self.zygote.status(self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the worker to end (``subprocess.TimeoutExpired`` past ``timeout`` seconds)."""
        if self.returncode is None:
            self.returncode = self.zygote.status(self.pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` unless the worker has ended."""
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        """SIGTERM."""
        import signal

        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL."""
        import signal

        self.send_signal(signal.SIGKILL)


class Zygote:
    """The forking process of one test process, started on first use."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.lock = threading.Lock()
        self.changed = threading.Condition()
        self.exits: dict[int, int] = {}
        self.started: list[int] = []
        self.orphans: set[int] = set()  # children of a zygote that died: nobody reports their exits

    def start(self, argv: list[str], env: dict[str, str], cwd: str, *, stderr: str | None = None) -> Forked:
        """Fork ``python -m jobloom.process *argv`` with ``env`` in ``cwd`` (its stderr into the file
        ``stderr``, if given)."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._spawn()
            assert self.sock is not None
            with self.changed:
                before = len(self.started)
                self.sock.sendall(json.dumps({"argv": argv, "env": env, "cwd": cwd, "stderr": stderr}).encode() + b"\n")
                if not self.changed.wait_for(lambda: len(self.started) > before, timeout=30):
                    raise RuntimeError("the zygote did not fork a worker within 30 s")
                pid = self.started[before]
        return Forked(self, pid, [sys.executable, "-m", "jobloom.process", *argv])

    def status(self, pid: int, timeout: float | None) -> int | None:
        """``pid``'s exit status once the zygote has reaped it, waiting up to ``timeout`` (None: forever)."""
        with self.changed:
            self.changed.wait_for(lambda: pid in self.exits or pid in self.orphans, timeout=timeout)
            if pid in self.exits or pid not in self.orphans:
                return self.exits.get(pid)
        deadline = None if timeout is None else time.monotonic() + timeout
        while _alive(pid):  # the zygote died before this child: watch the pid itself
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(0.05)
        return ORPHAN_STATUS

    def _spawn(self) -> None:
        ours, theirs = socket.socketpair()
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVE, str(theirs.fileno())], pass_fds=[theirs.fileno()])
        theirs.close()
        self.sock = ours
        threading.Thread(target=self._read, args=(ours,), daemon=True, name="zygote").start()

    def _read(self, sock: socket.socket) -> None:
        buffer = b""
        while data := sock.recv(65536):
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                message: dict[str, Any] = json.loads(line)
                with self.changed:
                    if "started" in message:
                        self.started.append(int(message["started"]))
                    else:
                        self.exits[int(message["pid"])] = int(message["status"])
                    self.changed.notify_all()
        with self.changed:  # the zygote is gone: the children it did not report are no longer its own
            self.orphans.update(set(self.started) - set(self.exits))
            self.changed.notify_all()


ORPHAN_STATUS = -255
"""The status reported for a child that ended after its zygote died (its real status is lost)."""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie that its new parent has not reaped yet counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


ZYGOTE = Zygote()
"""This test process's zygote."""


def forkable(env: dict[str, str]) -> bool:
    """Whether a worker with ``env`` can be forked (no ``LD_PRELOAD``: ``faketime`` acts from ``exec`` on)."""
    return "LD_PRELOAD" not in env and "FAKETIME" not in env and os.environ.get("JOBLOOM_TEST_NO_ZYGOTE") != "1"
