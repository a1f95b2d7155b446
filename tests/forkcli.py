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

PRELOAD = ("jobloom.cli.main", "jobloom.store.sqlite", "jobloom.store.postgres", "typer._adapters",
           "pydantic.plugin._loader")
"""What a server imports once: what every ``python -m jobloom.cli`` imports before it reads its arguments,
then what nearly every command imports once it has them (a store, typer's parameter adapters and
pydantic's plugin loader: about 0.15 s a command). One that cannot be imported is left to the command."""

WARM = r"""
import gc
import sys


def _warm(preload):
    # once, before any fork: what nearly every command does first
    for name in preload:
        try:
            __import__(name)
        except ImportError:  # not installed: the command that needs it says so itself
            pass
    if "jobloom.cli.main" in sys.modules:  # (a worker's zygote imports no command line)
        # typer builds the click command from the functions' signatures (about 0.15 s), the same each time
        import typer.main
        from jobloom.cli.main import cli

        build = typer.main.get_command

        def registered():
            return [id(c) for c in cli.registered_commands], [id(g) for g in cli.registered_groups]

        built, seen = build(cli), registered()

        def get_command(typer_instance):  # a command that registers more (bench, on help) builds its own
            return built if typer_instance is cli and registered() == seen else build(typer_instance)

        typer.main.get_command = get_command
    gc.collect()
    gc.freeze()  # what is loaded now is never garbage: a fork's collections, and its exit, need not walk it
"""
"""Run by a server before it forks any command (the servers below, and ``tests/zygote.py``'s, are this, then
their own code)."""

_SERVER = r'''
import json, os, socket, sys

def _serve(fd, preload):
    _warm(preload)
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
        self.proc = subprocess.Popen([sys.executable, "-c", WARM + _SERVER, str(theirs.fileno()), *preload],
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


PER_COMMAND = ("PYTHONPATH", "PYTEST_CURRENT_TEST")
"""Variables a command may have of its own on a shared server: ``PYTHONPATH`` only makes ``sys.path``, and
pytest names the running test in ``PYTEST_CURRENT_TEST`` (with it, each test would start a server)."""


def _key(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in env.items() if k not in PER_COMMAND))


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


# -- the same for a shell: ``jobloom`` as a bash function ------------------------------------------------
# A shell block of the docs runs ``jobloom`` a few dozen times. ``ShellServer`` listens on a loopback
# port; ``BASH_FUNCTION`` defines ``jobloom`` to send it its arguments, folder and environment and to
# print what the forked command wrote, returning its status. A command whose environment differs from
# the server's (the block exported something) is run by the real ``jobloom`` instead.

_SHELL_SERVER = r'''
import os, socket, sys

SHELL_OWN = ("PWD", "OLDPWD", "SHLVL", "_", "PYTHONPATH", "PYTEST_CURRENT_TEST", "FORKCLI_PORT")

def _fields(conn):
    """NUL-ended fields: a count N, the folder, the stdout and stderr files, N arguments, then NAME=VALUE
    fields of the environment up to an empty one."""
    buf, fields, n = b"", [], None
    while True:
        while b"\0" in buf:
            field, buf = buf.split(b"\0", 1)
            fields.append(os.fsdecode(field))
            n = int(fields[0]) if n is None else n
            if len(fields) > 4 + n and fields[-1] == "":
                return fields[1], fields[2], fields[3], fields[4:4 + n], fields[4 + n:-1]
        chunk = conn.recv(65536)
        if not chunk:
            raise EOFError
        buf += chunk

def _serve(preload):
    _warm(preload)
    own = {k: v for k, v in os.environ.items() if k not in SHELL_OWN}
    base = sys.path[1 + len([p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]):]
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    print(srv.getsockname()[1], flush=True)
    while True:
        conn, _ = srv.accept()
        try:
            cwd, out, err, argv, env = _fields(conn)
        except (EOFError, ValueError):
            conn.close()
            continue
        env = dict(e.split("=", 1) for e in env)
        if {k: v for k, v in env.items() if k not in SHELL_OWN} != own:
            conn.sendall(b"fallback\n")
            conn.close()
            continue
        if os.fork() == 0:  # one child per command, so a command left running does not hold the others
            srv.close()
            pid = os.fork()
            if pid == 0:
                conn.close()
                return cwd, out, err, argv, env, base
            _, status = os.waitpid(pid, 0)
            rc = os.waitstatus_to_exitcode(status)
            conn.sendall(f"{rc if rc >= 0 else 128 - rc}\n".encode())
            os._exit(0)
        conn.close()
        while True:  # reap the children that are done
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break

def _become(cwd, out, err, env, base):
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.getcwd(), *paths, *base]
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)

_cwd, _out, _err, _argv, _env, _base = _serve(sys.argv[1:])
_become(_cwd, _out, _err, _env, _base)
del _serve, _become, _fields, _cwd, _out, _err, _env, _base
import runpy
sys.argv[:] = ["-m", *_argv]
del _argv
runpy.run_module("jobloom.cli", run_name="__main__", alter_sys=True)
'''

BASH_FUNCTION = r"""
jobloom() {  # the command forked from a Python that has already imported it (tests/forkcli.py)
  local out err rc fd
  out=$(mktemp) err=$(mktemp)
  exec {fd}<>"/dev/tcp/127.0.0.1/$FORKCLI_PORT"
  { printf '%s\0' "$#" "$PWD" "$out" "$err" "$@"; env -0; printf '\0'; } >&"$fd"
  read -r rc <&"$fd" || rc="lost"
  exec {fd}>&-
  if [ "$rc" = fallback ]; then
    rm -f "$out" "$err"
    command jobloom "$@"
    return
  fi
  cat "$out"
  cat "$err" >&2
  rm -f "$out" "$err"
  [ "$rc" != lost ] || { echo "jobloom $*: the fork server did not answer" >&2; return 1; }
  return "$rc"
}
"""
"""Defines ``jobloom`` in bash as a client of the ``ShellServer`` at ``$FORKCLI_PORT``."""


class ShellServer:
    """A server that forks ``jobloom`` commands for ``BASH_FUNCTION``, for a shell whose environment is
    ``env``; ``port`` is where it listens (pass it as ``FORKCLI_PORT``)."""

    def __init__(self, env: Mapping[str, str], preload: Sequence[str] = PRELOAD) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", WARM + _SHELL_SERVER, *preload], env=dict(env),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     cwd=tempfile.gettempdir())
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.close()
            raise RuntimeError(f"the shell fork server did not start (it said {line!r})")
        self.port = int(line)

    def close(self) -> None:
        """Stop the server (commands it started and that still run are left to end by themselves)."""
        self.proc.kill()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
