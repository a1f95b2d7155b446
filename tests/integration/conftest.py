"""Real worker processes for the integration tests, always cleaned up."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import jobloom
from tests.zygote import ZYGOTE, forkable

HERE = Path(__file__).parent


class Processes:
    """Starts worker processes of ``itapp`` and kills whatever is left at the end of the test."""

    APP = "itapp:app"
    """The app the worker processes run."""

    def __init__(self, url: str, state_dir: Path) -> None:
        self.url = url
        self.state_dir = state_dir
        self.procs: list[Any] = []  # subprocess.Popen, or tests.zygote.Forked
        shutil.copy(HERE / "itapp.py", state_dir / "itapp.py")
        # the caller's PYTHONPATH is kept behind the app's folder (a worktree's src runs in the workers too)
        path = os.pathsep.join(p for p in (str(state_dir), os.environ.get("PYTHONPATH", "")) if p)
        self.env = {**os.environ, "PYTHONPATH": path, "JOBLOOM_IT_URL": url,
                    "JOBLOOM_IT_DIR": str(state_dir)}

    def worker(self, *, concurrency: int = 16, grace: float = 5.0, lease: float = 1.0,
               env: dict[str, str] | None = None, prefix: list[str] | None = None) -> Any:
        """A worker process of APP (:meth:`spawn`)."""
        env = {**self.env, "JOBLOOM_IT_LEASE": str(lease), **(env or {})}
        argv = [self.APP, "--concurrency", str(concurrency), "--grace", str(grace), "--log-level", "warning"]
        return self.spawn(argv, env, prefix=prefix)

    def spawn(self, argv: list[str], env: dict[str, str], *, prefix: list[str] | None = None,
              stderr: Path | None = None) -> Any:
        """``python -m jobloom.process *argv`` in the test's folder, registered for cleanup: forked from the
        zygote (``tests/zygote.py``) unless it must be a process of its own from ``exec`` on (a command
        prefix, ``faketime``). Handled as a ``subprocess.Popen``; its stderr into the file ``stderr``."""
        proc: Any
        if prefix is None and forkable(env):
            proc = ZYGOTE.start(argv, env, str(self.state_dir), stderr=None if stderr is None else str(stderr))
        else:
            with contextlib.ExitStack() as stack:
                err = None if stderr is None else stack.enter_context(open(stderr, "wb"))
                proc = subprocess.Popen([*(prefix or []), sys.executable, "-m", "jobloom.process", *argv], env=env,
                                        cwd=self.state_dir, stderr=err)
        self.procs.append(proc)
        return proc

    def python(self, code: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", code], env=self.env, cwd=self.state_dir,
                                stdout=subprocess.PIPE)
        self.procs.append(proc)
        return proc

    def read(self, name: str) -> list[str]:
        path = self.state_dir / name
        return path.read_text().split("\n")[:-1] if path.exists() else []

    def cleanup(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        for p in self.procs:
            p.wait(timeout=10)


@pytest.fixture
def procs(store_url: str, tmp_path: Path) -> Iterator[Processes]:
    p = Processes(store_url, tmp_path)
    try:
        yield p
    finally:
        p.cleanup()


@pytest.fixture
async def it_app(procs: Processes) -> AsyncIterator[jobloom.App]:
    """An App on the test's store with itapp's performers and flows (imported from the test's folder)."""
    import sys

    sys.path.insert(0, str(procs.state_dir))
    os.environ["JOBLOOM_IT_DIR"] = str(procs.state_dir)
    import importlib

    import itapp  # type: ignore[import-not-found]

    importlib.reload(itapp)
    app = jobloom.App(procs.url, performers=list(itapp.app.specs[b].cls for b in itapp.app.specs),
                      flows=list(itapp.app.flows.values()), auto_migrate=True, lease=1.0)
    await app.store()
    yield app
    await app.close()
    sys.path.remove(str(procs.state_dir))


@pytest.fixture
async def app(it_app: jobloom.App) -> jobloom.App:
    """``it_app`` under its usual name."""
    return it_app
