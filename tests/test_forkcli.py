"""A command forked from ``tests/forkcli.py``'s server behaves as the same command run by a new Python:
same exit status, standard output and error, folder, environment and ``sys.path``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forkcli

PROBE = r'''
import atexit, json, os, sys, threading, time
atexit.register(lambda: print("atexit ran"))
def late():
    time.sleep(0.05)
    print("thread joined")
threading.Thread(target=late).start()
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "path1": sys.path[1], "cwd": os.getcwd(),
                  "probe": os.environ.get("PROBE"), "name": __name__}))
print("to stderr", file=sys.stderr)
if sys.argv[1:] == ["fail"]:
    raise RuntimeError("failed")
sys.exit(int(sys.argv[1]) if sys.argv[1:] else 0)
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("JOBLOOM_")},
            "PYTHONPATH": str(tmp_path), "COLUMNS": "200", "NO_COLOR": "1"}


def _real(args: list[str], tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args", [[], ["3"], ["fail"]])
def test_python_c_forked_is_python_c(tmp_path: Path, env: dict[str, str], args: list[str]) -> None:
    real = _real(["-c", PROBE, *args], tmp_path, {**env, "PROBE": "a"})
    forked = forkcli.run(args, code=PROBE, cwd=tmp_path, env={**env, "PROBE": "a"}, timeout=60)
    assert (forked.returncode, forked.stdout) == (real.returncode, real.stdout)
    assert forked.stderr.splitlines()[0] == real.stderr.splitlines()[0] == "to stderr"
    assert forked.stderr.splitlines()[-1] == real.stderr.splitlines()[-1]  # the exception, if any
    assert "atexit ran" in forked.stdout and "thread joined" in forked.stdout


@pytest.mark.parametrize("args", [
    ["--version"],
    ["jobs", "list", "--url", "sqlite:///{db}", "--state", "done"],
    ["jobs", "list", "--url", "sqlite:///{db}", "--limit", "many"],
    ["enqueue", "Nope", "{{}}", "--app", "nowhere:app"],
    ["--help"],  # registers `jobloom bench` first: the server's ready-built command is not that one
    ["bench", "--help"],
    ["jobs", "--help"],
])
def test_jobloom_forked_is_jobloom(tmp_path: Path, env: dict[str, str], args: list[str]) -> None:
    args = [a.format(db=tmp_path / "x.db") for a in args]
    real = _real(["-m", "jobloom.cli", *args], tmp_path, env)
    forked = forkcli.run(args, cwd=tmp_path, env=env, timeout=60)
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)


def test_each_environment_has_its_own_server(tmp_path: Path, env: dict[str, str]) -> None:
    code = "import os; print(os.environ['PROBE'], os.getpid(), os.getppid())"
    a = forkcli.run([], code=code, cwd=tmp_path, env={**env, "PROBE": "a"}, timeout=60).stdout.split()
    b = forkcli.run([], code=code, cwd=tmp_path, env={**env, "PROBE": "b"}, timeout=60).stdout.split()
    a2 = forkcli.run([], code=code, cwd=tmp_path, env={**env, "PROBE": "a", "PYTHONPATH": "/nowhere"},
                     timeout=60).stdout.split()
    assert (a[0], b[0], a2[0]) == ("a", "b", "a")
    assert a[2] == a2[2] != b[2], "PYTHONPATH aside, one environment, one server"
    assert len({a[1], b[1], a2[1]}) == 3, "each command a process of its own"


def test_the_running_tests_name_does_not_make_a_server_per_test(tmp_path: Path, env: dict[str, str]) -> None:
    code = "import os; print(os.environ['PYTEST_CURRENT_TEST'], os.getppid())"
    one = forkcli.run([], code=code, cwd=tmp_path, env={**env, "PYTEST_CURRENT_TEST": "t1"}, timeout=60)
    two = forkcli.run([], code=code, cwd=tmp_path, env={**env, "PYTEST_CURRENT_TEST": "t2"}, timeout=60)
    assert one.stdout.split()[0] == "t1" and two.stdout.split()[0] == "t2"  # each command sees its own
    assert one.stdout.split()[1] == two.stdout.split()[1], "one server for both"


SHELL = """
jobloom --version
jobloom jobs list --url sqlite:///x.db --limit many || echo "status $?"
out=$(jobloom jobs list --url sqlite:///x.db --state done 2>&1) || echo "status $?: $out"
jobloom jobs list --text "" --url sqlite:///x.db || echo "status $?"
"""


def _bash(program: str, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", program], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_jobloom_in_bash_forked_is_jobloom(tmp_path: Path, env: dict[str, str]) -> None:
    env = {**env, "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])}
    real = _bash(SHELL, tmp_path, env)
    server = forkcli.ShellServer(env)
    try:
        forked = _bash(forkcli.BASH_FUNCTION + SHELL, tmp_path, {**env, "FORKCLI_PORT": str(server.port)})
        assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)
        assert "status 1" in real.stdout and "status 2" in real.stdout
        failing = _bash(forkcli.BASH_FUNCTION + "jobloom jobs list --limit many --url sqlite:///x.db\necho on\n",
                        tmp_path, {**env, "FORKCLI_PORT": str(server.port)})
        assert failing.returncode != 0 and "on" not in failing.stdout  # set -e stops at the failed command
        # an environment the block changed: the real jobloom runs, and sees it
        exported = _bash(forkcli.BASH_FUNCTION + "export NO_COLOR=; jobloom --version\n", tmp_path,
                         {**env, "FORKCLI_PORT": str(server.port)})
        assert exported.returncode == 0 and exported.stdout == real.stdout.splitlines(keepends=True)[0]
    finally:
        server.close()
