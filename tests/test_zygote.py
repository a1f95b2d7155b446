"""The zygote's workers (``tests/zygote.py``) are what ``python -m jobloom.process`` would be: the
request's environment, folder and ``PYTHONPATH``, the app imported in the child, and the exit status
``subprocess.Popen`` would give (a signal as ``-N``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.zygote import ORPHAN_STATUS, ZYGOTE, Zygote, forkable

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
