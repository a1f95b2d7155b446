"""The Directory blob store: atomic writes under random ids, a path from anywhere else refused, and
listing by age in pages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jobloom.blobs import BlobMissing, BlobStore, Directory
from jobloom.core.errors import InvalidOption
from jobloom.store.blobs import new_blob_id


async def test_put_get_delete_and_no_temporary_file_left(tmp_path: Path) -> None:
    store = Directory(tmp_path)
    assert isinstance(store, BlobStore)
    blob_id = new_blob_id()
    await store.put(blob_id, b"hello", now=1000.0)
    assert await store.get(blob_id) == b"hello"
    path = store.path_of(blob_id)
    assert path == tmp_path / blob_id[:2] / blob_id and path.stat().st_mtime == 1000.0
    assert [p.name for p in path.parent.iterdir()] == [blob_id]  # the temporary file was renamed
    await store.delete(blob_id)
    await store.delete(blob_id)  # again: no error
    with pytest.raises(BlobMissing, match=blob_id):
        await store.get(blob_id)


@pytest.mark.parametrize("bad", ["../../etc/passwd", "/etc/passwd", "a" * 31, "A" * 32, "a" * 31 + "/", "", "..",
                                 "a" * 30 + "/."])
async def test_anything_but_a_blob_id_is_refused(tmp_path: Path, bad: str) -> None:
    store = Directory(tmp_path)
    for call in (store.get(bad), store.delete(bad), store.put(bad, b"x", now=0.0)):
        with pytest.raises(InvalidOption, match="32 lowercase hex digits"):
            await call
    assert list(tmp_path.iterdir()) == []


async def test_written_before_lists_old_blobs_in_pages_and_drops_old_temporary_files(tmp_path: Path) -> None:
    store = Directory(tmp_path)
    ids = sorted(new_blob_id() for _ in range(5))
    for i, blob_id in enumerate(ids):
        await store.put(blob_id, b"x", now=100.0 + i)
    stale = tmp_path / ids[0][:2] / f".{ids[0]}.0000.tmp"
    stale.write_bytes(b"half")
    fresh = tmp_path / ids[0][:2] / f".{ids[0]}.1111.tmp"
    fresh.write_bytes(b"half")
    os.utime(stale, (50.0, 50.0))
    assert await store.written_before(103.0) == ids[:3]
    assert not stale.exists() and fresh.exists()
    first = await store.written_before(1000.0, limit=2)
    rest = await store.written_before(1000.0, after=first[-1], limit=10)
    assert first + rest == ids
    assert await store.written_before(1000.0, after=ids[-1]) == []
