"""Worker processes (and ``jobloom serve``) for the tests, forked from a process that has imported jobloom once.

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

:func:`start_cli` starts ``python -m jobloom.cli ARGS`` the same way, for a command that runs until stopped
(``jobloom serve``, whose start-up imports FastAPI, uvicorn and the dashboard: about a second of CPU): a
zygote of its own has imported that (:data:`CLI_PRELOAD`), and its child runs the module as ``python -m``
does and ends as Python ends (``atexit``, threads joined, uvicorn's re-raised SIGTERM). The child can be
given a session of its own, a descriptor limit (``ulimit -n``) and a log file for its stdout and stderr.
A command line's zygote is started with the environment of the commands it forks (``JOBLOOM_*``, which
jobloom reads only when a command runs, and ``PYTHONPATH`` aside), so what it imported was imported as the
command would have.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tests import forkcli

WORKER_PRELOAD = ("jobloom.process", "jobloom.store.sqlite.store", "jobloom.store.postgres.store")
"""What a worker's zygote imports before any fork (one that cannot be imported is left to the worker)."""

CLI_PRELOAD = (*forkcli.PRELOAD, "jobloom.http.server", "jobloom.web", "jobloom.http.metrics",
               "jobloom.observe.exposition", "prometheus_client", "fastapi_offline", "pydantic.v1",
               "uvicorn.lifespan.on", "uvicorn.loops.auto", "uvloop", "uvicorn.protocols.websockets.auto")
"""What a command line's zygote imports: what every command imports (``tests/forkcli.py``), then what
``jobloom serve`` imports before it answers (the web stack: FastAPI, uvicorn, the dashboard, metrics)."""

_SERVE = r"""
import json, os, selectors, signal, socket, sys, traceback


def serve(fd, preload):
    # fork a child for each request, report the children's exits; in a child, return its request
    _warm(preload)
    sock = socket.socket(fileno=fd)
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

    while True:
        for key, _ in sel.select():
            if key.data == "child":
                os.read(wake_r, 4096)
                reap(send)
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
                    sel.close()
                    sock.close()
                    os.close(wake_r)
                    os.close(wake_w)
                    signal.set_wakeup_fd(-1)
                    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
                        signal.signal(sig, signal.SIG_DFL)
                    signal.signal(signal.SIGINT, signal.default_int_handler)
                    return request
                send({"started": pid})


def reap(send):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        send({"pid": pid, "status": os.waitstatus_to_exitcode(status)})


def become(request):
    # what Popen and a new interpreter would have made: session, limit, streams, folder, environment, path
    if request.get("session"):
        os.setsid()
    if request.get("max_files"):
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (request["max_files"], request["max_files"]))
    opened = {}
    for fd, path in ((1, request.get("stdout")), (2, request.get("stderr"))):
        if path:  # one file for both (stderr=STDOUT) is opened once, so they share its offset
            if path not in opened:
                opened[path] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(opened[path], fd)
    for fd in opened.values():
        os.close(fd)
    if request.get("stdout"):
        sys.stdout.reconfigure(line_buffering=sys.stdout.isatty())  # as a new Python decides it
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    paths = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:0] = [os.getcwd(), *paths]
    sys.argv = ["-m", *request["argv"]]


def work(request):
    # python -m jobloom.process: its main, then out at once
    code = 1
    try:
        become(request)
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


_request = serve(int(sys.argv[1]), sys.argv[2:])
if _request["module"] == "jobloom.process":
    work(_request)
become(_request)
import runpy  # python -m MODULE, ended as Python ends (atexit, threads joined, a re-raised signal)

_module = _request["module"]
del serve, reap, become, work, _request
runpy.run_module(_module, run_name="__main__", alter_sys=True)
"""


class Forked:
    """A process forked by a zygote, handled as ``subprocess.Popen`` handles a child."""

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
    """A forking process of one test process, started on first use: it forks ``python -m module`` (a
    worker by default), having imported ``preload``, in the environment ``env`` (None: this process's)."""

    def __init__(self, module: str = "jobloom.process", preload: Sequence[str] = WORKER_PRELOAD,
                 env: Mapping[str, str] | None = None) -> None:
        self.module = module
        self.preload = tuple(preload)
        self.env = None if env is None else dict(env)
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.lock = threading.Lock()
        self.changed = threading.Condition()
        self.exits: dict[int, int] = {}
        self.started: list[int] = []
        self.orphans: set[int] = set()  # children of a zygote that died: nobody reports their exits

    def start(self, argv: list[str], env: dict[str, str], cwd: str, *, stdout: str | None = None,
              stderr: str | None = None, new_session: bool = False, max_files: int | None = None) -> Forked:
        """Fork ``python -m MODULE *argv`` with ``env`` in ``cwd``: its stdout and stderr into those files,
        if given (the same file for both: as ``stderr=subprocess.STDOUT``), in a session of its own if
        ``new_session``, with ``max_files`` descriptors at most (``ulimit -n``) if given."""
        request = {"module": self.module, "argv": argv, "env": env, "cwd": cwd, "stdout": stdout, "stderr": stderr,
                   "session": new_session, "max_files": max_files}
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._spawn()
            assert self.sock is not None
            with self.changed:
                before = len(self.started)
                self.sock.sendall(json.dumps(request).encode() + b"\n")
                if not self.changed.wait_for(lambda: len(self.started) > before, timeout=30):
                    raise RuntimeError(f"the zygote did not fork {self.module} within 30 s")
                pid = self.started[before]
        return Forked(self, pid, [sys.executable, "-m", self.module, *argv])

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
        self.proc = subprocess.Popen([sys.executable, "-c", forkcli.WARM + _SERVE, str(theirs.fileno()), *self.preload],
                                     pass_fds=[theirs.fileno()], env=self.env)
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
"""This test process's zygote of workers."""


def forkable(env: Mapping[str, str]) -> bool:
    """Whether a process with ``env`` can be forked (no ``LD_PRELOAD``: ``faketime`` acts from ``exec`` on)."""
    return "LD_PRELOAD" not in env and "FAKETIME" not in env and os.environ.get("JOBLOOM_TEST_NO_ZYGOTE") != "1"


_CLI: dict[tuple[tuple[str, str], ...], Zygote] = {}


def start_cli(argv: Sequence[str], *, env: Mapping[str, str], cwd: str | os.PathLike[str],
              log: str | os.PathLike[str], new_session: bool = False,
              max_files: int | None = None) -> Forked | subprocess.Popen[bytes]:
    """Start ``python -m jobloom.cli *argv`` in ``cwd`` with ``env``, its stdout and stderr into the file
    ``log``, in a session of its own if ``new_session``, with ``max_files`` descriptors at most (as
    ``ulimit -n``) if given: forked from the zygote of its environment when :func:`forkable`, else with
    ``subprocess.Popen``. Handled as a ``subprocess.Popen`` either way; the caller stops it."""
    if not forkable(env):
        limit = None if max_files is None else (
            lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (max_files, max_files)))
        with open(log, "wb") as out:
            return subprocess.Popen([sys.executable, "-m", "jobloom.cli", *argv], cwd=cwd, env=env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=new_session, preexec_fn=limit)
    key = tuple(sorted((k, v) for k, v in env.items() if k not in forkcli.PER_COMMAND and not k.startswith("JOBLOOM_")))
    zygote = _CLI.get(key)
    if zygote is None:  # its own sys.path is this process's, as a forkcli server's is
        own = {**dict(key), **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {})}
        zygote = _CLI[key] = Zygote("jobloom.cli", CLI_PRELOAD, own)
    return zygote.start(list(argv), dict(env), os.fspath(cwd), stdout=os.fspath(log), stderr=os.fspath(log),
                        new_session=new_session, max_files=max_files)
