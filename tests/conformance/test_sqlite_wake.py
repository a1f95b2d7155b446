"""SQLite wake-ups work for a database file at a path too long for a Unix socket beside it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import jobloom
from jobloom.store.sqlite import wake_folder

from .performers import Echo


def test_short_paths_keep_the_folder_beside_the_file() -> None:
    assert wake_folder("/tmp/a/jobloom.db") == "/tmp/a/jobloom.db.wake"


def test_long_paths_get_a_short_folder_named_after_the_file() -> None:
    long = "/tmp/" + "x" * 120 + "/jobloom.db"
    folder = wake_folder(long)
    assert len(folder) < 60 and folder == wake_folder(long) and folder != wake_folder(long + "2")


async def test_a_worker_on_a_long_path_wakes_on_enqueue(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    app = jobloom.App(f"sqlite:///{deep}/jobloom.db", performers=[Echo])
    worker = jobloom.Worker(app, grace=2)
    task = asyncio.create_task(worker.run())
    try:
        await app.list_jobs()
        job = await app.enqueue(Echo, {"n": 1})
        done = await app.wait(job.id, timeout=10)
        assert done.state == "succeeded"
    finally:
        worker.stop()
        await asyncio.wait_for(task, 10)
        await app.close()
