"""Offloaded payloads between real processes: a `jobloom` worker process reads a 20 MB payload from the
blob store that the enqueuing app wrote, and its 20 MB result is read back through `app.wait`."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

import jobloom
from jobloom.blobs import Directory, parse_ref

from .conftest import Processes

pytestmark = pytest.mark.slow

MB20 = 20 * 1000 * 1000

BLOBAPP = textwrap.dedent('''
    import os
    from typing import Any

    import jobloom
    from jobloom.blobs import Directory

    class Grow(jobloom.Performer[dict[str, Any], dict[str, Any]]):
        async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
            text = payload["data"]
            return {"data": text + "!", "seen": len(text), "pid": os.getpid()}

    app = jobloom.App(os.environ["JOBLOOM_IT_URL"], performers=[Grow],
                      blobs=Directory(os.environ["JOBLOOM_IT_DIR"] + "/blobs"), offload_over=64 * 1024)
''')


class Grow(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    """The worker process's performer, by name (this process never runs it)."""

    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover
        raise AssertionError("performed by the worker process")


class BlobProcesses(Processes):
    APP = "blobapp:app"


@pytest.fixture
def blob_procs(store_url: str, tmp_path: Path) -> Any:
    p = BlobProcesses(store_url, tmp_path)
    (tmp_path / "blobapp.py").write_text(BLOBAPP)
    try:
        yield p
    finally:
        p.cleanup()


async def test_a_worker_process_performs_a_20_mb_payload_and_stores_a_20_mb_result(blob_procs: Processes) -> None:
    folder = blob_procs.state_dir / "blobs"
    app = jobloom.App(blob_procs.url, performers=[Grow], auto_migrate=True, blobs=Directory(folder),
                      offload_over=64 * 1024)
    try:
        text = "w" * MB20
        job = await app.enqueue(Grow, {"data": text})
        worker = blob_procs.worker()
        done = await app.wait(job.id, timeout=120)
        assert done.state == "succeeded", done.error
        assert done.result["seen"] == MB20 and done.result["data"] == text + "!"
        assert done.result["pid"] == worker.pid  # performed by the worker process, not here
        [raw] = [j for j in await app.list_jobs() if j.id == job.id]
        assert parse_ref(raw.payload_json) is not None and parse_ref(raw.result_json) is not None
        assert len([p for p in folder.glob("*/*")]) == 2
    finally:
        await app.close()
