"""Encrypted payloads between real processes: `jobloom worker` processes with the key run the jobs an
app with the same key enqueued, and store their results encrypted; a worker process without the key fails
the attempt with an error naming the job, and a second key in place decrypts as the first did."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

import jobloom
from jobloom.codecs import Encrypted, is_encrypted, key_id, new_key
from tests.helpers import eventually

from .conftest import Processes

pytestmark = pytest.mark.slow

MARK = "Narwhal-Process-9d41"
OLD, NEW = new_key(), new_key()


def _app(procs: Processes, *keys: str) -> jobloom.App:
    import os
    import sys

    os.environ["JOBLOOM_IT_DIR"] = str(procs.state_dir)
    if str(procs.state_dir) not in sys.path:
        sys.path.insert(0, str(procs.state_dir))
    import itapp  # type: ignore[import-not-found]

    return jobloom.App(procs.url, performers=[itapp.Plain, itapp.StepsThenHang], auto_migrate=True,
                       codec=Encrypted(keys=list(keys)) if keys else None)


def _raw(url: str) -> bytes:
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT payload, coalesce(result, '') FROM jobloom_jobs").fetchall()
        steps = conn.execute("SELECT coalesce(result, '') FROM jobloom_steps").fetchall()
    return "\n".join(v for row in [*rows, *steps] for v in row).encode()


async def test_worker_processes_with_the_key_run_encrypted_jobs(procs: Processes) -> None:
    app = _app(procs, NEW, OLD)
    try:
        before = _app(procs, OLD)  # a job of the old key, still queued when the keys rotate
        old_job = await before.enqueue("Plain", {"n": 41, "note": MARK})
        await before.close()
        jobs = [await app.enqueue("Plain", {"n": i, "note": MARK}) for i in range(20)]
        procs.worker(env={"JOBLOOM_IT_KEYS": f"{NEW},{OLD}"})
        procs.worker(env={"JOBLOOM_IT_KEYS": f"{NEW},{OLD}"})
        for job in [old_job, *jobs]:
            done = await app.wait(job.id, timeout=60)
            assert done.state == "succeeded", done.error
            assert done.result == done.payload["n"] and done.payload["note"] == MARK
        assert MARK.encode() not in _raw(procs.url)
        store = await app.store()
        rows = await store.transact(lambda tx: tx.fetch_rows("coded_payloads", {"after_id": 0, "limit": 100}),
                                    exclusive=False)
        assert len(rows) == 21 and all(is_encrypted(r[2]) for r in rows)
    finally:
        await app.close()


async def test_a_worker_process_without_the_key_names_the_job(procs: Processes) -> None:
    app = _app(procs, NEW)
    try:
        job = await app.enqueue("Plain", {"n": 1, "note": MARK})
        procs.worker(env={"JOBLOOM_IT_KEYS": OLD})  # a wrong key: it opens nothing of NEW's

        async def failed_once() -> bool:
            return any(a.error for a in await app.attempts(job.id))

        await eventually(failed_once, timeout=60)
        error = next(a.error for a in await app.attempts(job.id) if a.error)
        assert f"payload of job {job.id}" in error and key_id(base64.b64decode(NEW)) in error
        assert "not among the configured keys" in error
    finally:
        await app.close()
