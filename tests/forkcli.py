"""``python -m jobloom.cli ARGS`` (or ``python -c CODE``) as a real process, forked from a server that
has already started Python and imported the command line, instead of starting both again each time.

A command run this way is a process of its own: its own pid, exit status, standard output and error
(files), working folder, environment and ``sys.path`` (the folder, then ``PYTHONPATH``, as ``python -m``
makes it), and it ends as Python ends (threads joined, ``atexit``, streams flushed). What it shares
with its server is what the server imported, under the same environment: a server serves one
environment (``PYTHONPATH`` aside, which only makes ``sys.path``), so a command whose environment
differs in anything else gets a server of its own. A command line costs about 0.05 s instead of
about 0.45 s (most of it importing ``jobloom.cli``), and a test of the CLI runs dozens.
"""

from __future__ import annotations

import atexit
import json
import locale
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence

PRELOAD = ("jobloom.cli.main",)
"""What a server imports once: what every ``python -m jobloom.cli`` imports before it reads its arguments."""

_SERVER = r'''
import json, os, socket, sys

def _serve(fd, preload):
    for name in preload:
        __import__(name)
    import threading
    sock = socket.socket(fileno=fd)
    stream = sock.makefile("rwb", buffering=0)
    base = sys.path[1 + len([p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]):]
    for line in stream:
        request = json.loads(line)
        if threading.active_count() != 1:  # a fork would lose a thread's state: refuse, the client starts Python
            stream.write(b'{"pid": null}\n')
            continue
        sys.stdout.flush(); sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            stream.close(); sock.close()
            return request, base
        stream.write(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        stream.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
    sys.exit(0)

def _become(request, base):
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    paths = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = ["" if request["code"] is not None else os.getcwd(), *paths, *base]
    for fd, path in ((1, request["out"]), (2, request["err"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)

_request, _base = _serve(int(sys.argv[1]), sys.argv[2:])
_become(_request, _base)
del _serve, _become, _base
if _request["code"] is not None:
    sys.argv[:] = ["-c", *_request["argv"]]
    _code, _request = _request["code"], None
    exec(compile(_code, "<string>", "exec"))
else:
    import runpy
    sys.argv[:] = ["-m", *_request["argv"]]
    _module, _request = _request["module"], None
    runpy.run_module(_module, run_name="__main__", alter_sys=True)
'''


class ForkServer:
    """One server process for the environment ``env`` (``PYTHONPATH`` aside)."""

    def __init__(self, env: Mapping[str, str], preload: Sequence[str] = PRELOAD) -> None:
        # the server's own sys.path is the one this process was given; a command's is made from its env
        own = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        if os.environ.get("PYTHONPATH"):
            own["PYTHONPATH"] = os.environ["PYTHONPATH"]
        ours, theirs = socket.socketpair()
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(theirs.fileno()), *preload],
                                     env=own, pass_fds=[theirs.fileno()], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir())
        theirs.close()
        self.sock = ours
        self.stream = ours.makefile("rwb", buffering=0)
        self.lock = threading.Lock()

    def run(self, *, module: str | None = None, code: str | None = None, args: Sequence[str] = (), cwd: str,
            env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str] | None:
        """Run ``python -m module args`` or ``python -c code args`` in ``cwd`` with ``env``; None if this
        server cannot (it is busy, or gone), and the caller starts Python itself."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            with tempfile.TemporaryDirectory(prefix="jobloom-forkcli-") as folder:
                out, err = os.path.join(folder, "out"), os.path.join(folder, "err")
                request = {"module": module, "code": code, "argv": list(args), "cwd": cwd, "env": dict(env),
                           "out": out, "err": err}
                try:
                    self.stream.write(json.dumps(request).encode() + b"\n")
                    pid = json.loads(self.stream.readline())["pid"]
                except (OSError, ValueError):
                    return None
                if pid is None:
                    return None
                self.sock.settimeout(timeout)
                try:
                    rc = json.loads(self.stream.readline())["rc"]
                except TimeoutError:
                    os.kill(pid, signal.SIGKILL)
                    self.close()  # its answer about the killed command would come late: no more use
                    raise subprocess.TimeoutExpired([module or "-c", *args], timeout) from None
                finally:
                    self.sock.settimeout(None)
                encoding = locale.getpreferredencoding(False)
                with open(out, encoding=encoding) as o, open(err, encoding=encoding) as e:
                    command = [sys.executable, *(["-m", module] if module else ["-c", code or ""]), *args]
                    return subprocess.CompletedProcess(command, rc, o.read(), e.read())
        finally:
            self.lock.release()

    def close(self) -> None:
        """Stop the server (it ends when its socket closes)."""
        self.stream.close()
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_servers: dict[tuple[tuple[str, str], ...], ForkServer] = {}


def _key(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in env.items() if k != "PYTHONPATH"))


def run(args: Sequence[str], *, cwd: str | os.PathLike[str], env: Mapping[str, str], timeout: float,
        module: str = "jobloom.cli", code: str | None = None) -> subprocess.CompletedProcess[str]:
    """Like ``subprocess.run([python, "-m", module, *args], cwd=, env=, capture_output=True, text=True,
    timeout=)`` (or ``-c code``), forked from this environment's server."""
    key = _key(env)
    server = _servers.get(key)
    if server is None or server.proc.poll() is not None or server.stream.closed:
        server = _servers[key] = ForkServer(env)
    done = server.run(module=None if code is not None else module, code=code, args=args, cwd=os.fspath(cwd),
                      env=env, timeout=timeout)
    if done is not None:
        return done
    command = [sys.executable, *(["-c", code] if code is not None else ["-m", module]), *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def close_all() -> None:
    """Stop every server (a server also ends by itself with the process that started it)."""
    while _servers:
        _servers.popitem()[1].close()


atexit.register(close_all)
