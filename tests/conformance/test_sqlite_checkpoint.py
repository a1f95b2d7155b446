"""SQLite: an idle worker checkpoints the write-ahead log on a thread of its own, so that the commits
on a waiting job's way do not (``jobloom.store.sqlite.checkpoint``)."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import time
from pathlib import Path

import jobloom
from jobloom.store.sqlite.checkpoint import Checkpointer
from jobloom.store.sqlite.store import SQLiteStore

from .performers import Echo


async def _until(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_an_idle_worker_checkpoints_the_log_into_the_file(tmp_path: Path) -> None:
    app = jobloom.App(f"sqlite:///{tmp_path}/jobloom.db", performers=[Echo])
    worker = jobloom.Worker(app, grace=2)
    task = asyncio.create_task(worker.run())
    try:
        store = await app.store()
        assert isinstance(store, SQLiteStore)
        store.checkpointer.every = 0.0  # every idle moment: the test waits for the one after the last job
        jobs = [await app.enqueue(Echo, {"n": i}) for i in range(20)]
        for job in jobs:
            assert (await app.wait(job.id, timeout=10)).state == "succeeded"
        runs = store.checkpointer.runs

        def copied_file_holds_them() -> bool:
            if store.checkpointer.runs <= runs:
                return False
            # the database file alone, without its log: what a checkpoint has copied into it
            shutil.copy(tmp_path / "jobloom.db", tmp_path / "alone.db")
            conn = sqlite3.connect(tmp_path / "alone.db")
            try:
                return conn.execute("SELECT count(*) FROM jobloom_jobs WHERE state = 'succeeded'").fetchone()[0] == 20
            finally:
                conn.close()

        worker._wakes.all()  # an idle moment after the last report
        await _until(copied_file_holds_them)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 10)
        await app.close()


async def test_idle_moments_checkpoint_at_most_every_so_often(tmp_path: Path) -> None:
    store = SQLiteStore(f"sqlite:///{tmp_path}/s.db")
    await store.open()
    try:
        store.conn.execute("CREATE TABLE t (x)")
        store.conn.execute("INSERT INTO t VALUES (1)")
        store.checkpointer.every = 60.0
        first = store.checkpointer.idle()
        assert first is not None
        first.result(timeout=10)
        assert store.checkpointer.runs == 1
        store.idle()  # within the minute: none
        assert store.checkpointer.idle() is None and store.checkpointer.runs == 1
        store.checkpointer.every = 0.0
        store.checkpointer._next = 0.0
        again = store.checkpointer.idle()
        assert again is not None
        again.result(timeout=10)
        assert store.checkpointer.runs == 2
    finally:
        await store.close()


def test_a_checkpoint_that_finds_the_file_gone_is_skipped(tmp_path: Path) -> None:
    checkpointer = Checkpointer(str(tmp_path / "missing" / "x.db"), every=0.0)
    done = checkpointer.idle()
    assert done is not None
    done.result(timeout=10)  # no exception: the commits' own threshold still holds
    assert checkpointer.runs == 0
    checkpointer.close()


def test_a_checkpoint_lets_a_writer_commit_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("CREATE TABLE t (x)")
    for _ in range(300):
        writer.execute("INSERT INTO t VALUES (randomblob(4000))")
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchone()  # holds a snapshot: the checkpoint cannot finish
    checkpointer = Checkpointer(str(path), every=0.0)
    try:
        done = checkpointer.idle()
        assert done is not None
        writer.execute("PRAGMA busy_timeout = 0")
        writer.execute("INSERT INTO t VALUES (1)")  # PASSIVE takes no lock a writer waits for
        done.result(timeout=10)
        assert checkpointer.runs == 1
    finally:
        reader.execute("ROLLBACK")
        checkpointer.close()
        reader.close()
        writer.close()
