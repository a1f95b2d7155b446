"""Lifecycle hooks run at least once: a worker killed after the outcome committed and before its hook
ended leaves the hook to another worker."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import jobloom
from jobloom.core.queries import Q
from tests.helpers import eventually

from .conftest import HERE, Processes

pytestmark = pytest.mark.slow


class HookProcesses(Processes):
    """Worker processes of ``hooksapp``."""

    APP = "hooksapp:app"

    def __init__(self, url: str, state_dir: Path) -> None:
        super().__init__(url, state_dir)
        shutil.copy(HERE / "hooksapp.py", state_dir / "hooksapp.py")


@pytest.fixture
def hprocs(store_url: str, tmp_path: Path) -> Iterator[HookProcesses]:
    p = HookProcesses(store_url, tmp_path)
    try:
        yield p
    finally:
        p.cleanup()


@pytest.fixture
async def app(hprocs: HookProcesses, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[jobloom.App]:
    """A client of the store the workers use (it runs no jobs itself)."""
    monkeypatch.setenv("JOBLOOM_IT_URL", hprocs.url)
    monkeypatch.setenv("JOBLOOM_IT_DIR", str(hprocs.state_dir))
    sys.path.insert(0, str(hprocs.state_dir))
    try:
        import hooksapp  # type: ignore[import-not-found]

        app = jobloom.App(hprocs.url, performers=[hooksapp.Noted], auto_migrate=True)
        await app.store()
        yield app
        await app.close()
    finally:
        sys.path.remove(str(hprocs.state_dir))
        sys.modules.pop("hooksapp", None)


async def hook_rows(app: jobloom.App) -> int:
    store = await app.store()
    row = await store.autocommit(lambda tx: tx.fetchone(Q.count_hooks, {}))
    return 0 if row is None else row.n


async def test_a_worker_killed_before_its_hook_ran_leaves_it_to_another(hprocs: HookProcesses,
                                                                         app: jobloom.App) -> None:
    first = hprocs.worker()
    job = await app.enqueue("Noted", {"n": 5})
    # the hook has begun: the outcome committed before it (hooks run after the cycle's commit)
    await eventually(lambda: hprocs.read(f"entered-{first.pid}"), timeout=60, what="the first worker's hook")
    assert (await app.get_job(job.id)).state == "succeeded"
    assert await hook_rows(app) == 1
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    assert hprocs.read(f"ran-{first.pid}") == []  # killed inside the hook, before it ended
    (hprocs.state_dir / "release").touch()
    second = hprocs.worker()
    await eventually(lambda: hprocs.read(f"ran-{second.pid}"), timeout=60, what="the second worker's hook")
    assert hprocs.read(f"ran-{second.pid}") == [f"{job.id} 5"]
    await eventually(lambda: _none_left(app), timeout=30, what="the row deleted")
    assert sorted(p.name for p in hprocs.state_dir.iterdir() if p.name.startswith("ran-")) == [f"ran-{second.pid}"]
    assert os.path.exists(hprocs.state_dir / f"entered-{second.pid}")


async def _none_left(app: jobloom.App) -> bool:
    return await hook_rows(app) == 0
