"""The zygote's workers (``tests/zygote.py``) are what ``python -m jobloom.process`` would be: the
request's environment, folder and ``PYTHONPATH``, the app imported in the child, and the exit status
``subprocess.Popen`` would give (a signal as ``-N``); its ``jobloom serve`` is what the exec'd one is."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.zygote import ORPHAN_STATUS, ZYGOTE, Forked, Zygote, forkable, start_cli

APP = '''
import contextlib
import os
from pathlib import Path

import jobloom

Path("seen.txt").write_text(f"{os.environ['ZYGOTE_MARK']} {os.getcwd()} {__file__}")


class Noop(jobloom.Performer[dict, None]):
    async def perform(self, payload: dict) -> None:
        pass


app = jobloom.App(f"sqlite:///{os.getcwd()}/z.db", performers=[Noop], auto_migrate=True)
'''


def _env(folder: Path, **more: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(folder / "lib"), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **more}


def _until(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_forked_worker_has_its_environment_folder_and_path_and_stops_as_a_process_would(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "zapp.py").write_text(APP)
    work = tmp_path / "work"
    work.mkdir()
    proc = ZYGOTE.start(["zapp:app", "--log-level", "warning"], _env(tmp_path, ZYGOTE_MARK="first"), str(work))
    try:
        seen = work / "seen.txt"
        _until("the app imported in the child", seen.exists)
        mark, cwd, source = seen.read_text().split()
        assert (mark, cwd, source) == ("first", str(work), str(tmp_path / "lib" / "zapp.py"))
        _until("the worker's store", (work / "z.db").exists)
        assert proc.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        again = ZYGOTE.start(["zapp:app"], _env(tmp_path, ZYGOTE_MARK="second"), str(work))
        _until("the second app", lambda: seen.read_text().startswith("second "))
        again.kill()
        assert again.wait(timeout=30) == -signal.SIGKILL
    finally:
        for p in (proc, locals().get("again")):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(timeout=10)


def test_a_worker_that_cannot_start_exits_1_with_its_error_in_its_stderr_file(tmp_path: Path) -> None:
    err = tmp_path / "err.log"
    proc = ZYGOTE.start(["nosuchmodule_zy:app"], _env(tmp_path), str(tmp_path), stderr=str(err))
    assert proc.wait(timeout=30) == 1
    assert "nosuchmodule_zy" in err.read_text()


def test_faketime_workers_are_not_forked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOBLOOM_TEST_NO_ZYGOTE", raising=False)
    assert forkable({"PATH": "/bin"})
    assert not forkable({"LD_PRELOAD": "/usr/lib/faketime/libfaketime.so.1", "FAKETIME": "+2m"})


def test_a_worker_outliving_its_zygote_is_still_waited_for(tmp_path: Path) -> None:
    """A zygote that dies reports no more exits: its children's handles watch the pids themselves
    (a wait would otherwise last for ever)."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "zapp.py").write_text(APP)
    zygote = Zygote()
    proc = zygote.start(["zapp:app", "--log-level", "warning"], _env(tmp_path, ZYGOTE_MARK="orphan"), str(tmp_path))
    try:
        _until("the app imported in the child", (tmp_path / "seen.txt").exists)
        assert zygote.proc is not None
        zygote.proc.kill()
        zygote.proc.wait(timeout=30)
        _until("the zygote's children orphaned", lambda: proc.pid in zygote.orphans)
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.1)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == ORPHAN_STATUS
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)


SERVE_APP = '''
import json
import os
import sys
from pathlib import Path

import jobloom

Path("seen.json").write_text(json.dumps({"mark": os.environ["ZYGOTE_MARK"], "cwd": os.getcwd(),
                                         "path": sys.path[:2], "file": __file__}))
app = jobloom.App(f"sqlite:///{os.getcwd()}/s.db", auto_migrate=True)
'''


def _cli(tmp_path: Path, name: str, argv: list[str], monkeypatch: pytest.MonkeyPatch, *, forked: bool,
         max_files: int | None = None) -> tuple[Any, Path]:
    """``jobloom ARGS`` started by ``tests.zygote.start_cli`` in the folder ``name``: forked, or exec'd (as under
    ``JOBLOOM_TEST_NO_ZYGOTE=1``); the handle and the log."""
    if forked:
        monkeypatch.delenv("JOBLOOM_TEST_NO_ZYGOTE", raising=False)
    else:
        monkeypatch.setenv("JOBLOOM_TEST_NO_ZYGOTE", "1")
    work, log = tmp_path / name, tmp_path / f"{name}.log"
    work.mkdir()
    proc = start_cli(argv, env=_env(tmp_path, ZYGOTE_MARK=name), cwd=work, log=log, new_session=True,
                     max_files=max_files)
    assert isinstance(proc, Forked) is forked
    return proc, log


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_and_stop(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch, *, forked: bool) -> tuple[int, str]:
    """Start ``jobloom serve --app sapp:app``, check what it is, SIGTERM it: its status and its log (pids and
    port replaced)."""
    port = _free_port()
    proc, log = _cli(tmp_path, name, ["serve", "--app", "sapp:app", "--port", str(port), "--log-level", "info"],
                     monkeypatch, forked=forked, max_files=300)

    def up() -> bool:
        assert proc.poll() is None, log.read_text()
        return _answers(port)

    try:
        _until(f"the {name} server to answer", up, timeout=60)
        assert os.getsid(proc.pid) == os.getpgid(proc.pid) == proc.pid  # a session of its own, it leads
        limits = Path(f"/proc/{proc.pid}/limits").read_text()
        assert re.search(r"Max open files\s+300\s+300\s", limits), limits
        seen = json.loads((tmp_path / name / "seen.json").read_text())
        assert seen == {"mark": name, "cwd": str(tmp_path / name), "file": str(tmp_path / "lib" / "sapp.py"),
                        "path": [str(tmp_path / name), str(tmp_path / "lib")]}
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    said = [line for line in log.read_text().splitlines() if "GET /v1/health" not in line]  # as often as polled
    return status, re.sub(r"\[\d+\]", "[PID]", "\n".join(said)).replace(str(port), "PORT")


def test_a_forked_serve_is_the_execd_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``jobloom serve`` forked by ``start_cli`` has what the exec'd command has: a pid and a session of its own,
    its descriptor limit, folder, environment and ``sys.path``, both streams in its log; and SIGTERM ends
    it with the same status and the same last words."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "sapp.py").write_text(SERVE_APP)
    forked = _serve_and_stop(tmp_path, "forked", monkeypatch, forked=True)
    execd = _serve_and_stop(tmp_path, "execd", monkeypatch, forked=False)
    assert forked == execd
    assert forked[0] == -signal.SIGTERM and "Finished server process [PID]" in forked[1]
    assert "note: no token exists" in forked[1]  # what it wrote to stderr


@pytest.mark.parametrize("argv", [["--version"], ["jobs", "list", "--limit", "many"], ["nosuchcommand"]])
def test_a_forked_command_writes_and_exits_as_the_execd_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            argv: list[str]) -> None:
    done = {}
    for name, forked in (("forked", True), ("execd", False)):
        proc, log = _cli(tmp_path, name, argv, monkeypatch, forked=forked)
        done[name] = (proc.wait(timeout=60), log.read_text())
    assert done["forked"] == done["execd"]
    assert done["forked"][1]
