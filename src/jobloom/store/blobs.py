"""Blob stores: where payloads and results larger than an app's ``offload_over`` are kept.

A blob store holds opaque bytes under ids that jobloom chooses (32 random lowercase hex digits, see
``core/blobref.py``); it never sees a name made from user data. The interface is four calls, small
enough for an S3-compatible object store (``PUT``, ``GET``, ``DELETE`` and ``ListObjectsV2`` with each
object's ``LastModified``). :class:`Directory` keeps them as files.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from pathlib import Path
from typing import Protocol, runtime_checkable

from jobloom.core.blobref import BLOB_ID
from jobloom.core.errors import InvalidOption, JobloomError


class BlobMissing(JobloomError):
    """A blob that a row refers to is not in the blob store (deleted by hand, or another store)."""

    def __init__(self, blob_id: str, where: str) -> None:
        self.blob_id = blob_id
        super().__init__(f"blob {blob_id} is not in the blob store {where}")


@runtime_checkable
class BlobStore(Protocol):
    """Where offloaded payloads and results live. Every id is 32 lowercase hex digits; an implementation
    refuses any other (``InvalidOption``). Each call may be repeated: ``put`` of an id is done once, but
    ``delete`` of a missing blob is no error."""

    async def put(self, blob_id: str, data: bytes, *, now: float) -> None:
        """Write ``data`` as blob ``blob_id``, all of it or nothing (a reader never sees part of it).
        ``now`` is the app's clock: the time of writing that :meth:`written_before` compares with (a
        store that keeps its own time of writing, such as S3's ``LastModified``, may use that instead)."""
        ...

    async def get(self, blob_id: str) -> bytes:
        """The bytes of blob ``blob_id``; ``BlobMissing`` if there is none."""
        ...

    async def delete(self, blob_id: str) -> None:
        """Remove blob ``blob_id``; nothing happens if it is not there."""
        ...

    async def written_before(self, moment: float, *, after: str = "", limit: int = 1000) -> list[str]:
        """Up to ``limit`` ids of blobs written before ``moment`` (epoch seconds), greater than ``after``,
        in ascending order (a page: the next one starts after the last id of this one)."""
        ...


def check_blob_id(blob_id: str) -> str:
    """``blob_id`` if it is a blob id (32 lowercase hex digits), else ``InvalidOption``: no path, no
    ``..``, nothing a caller could use to reach outside the store."""
    if not isinstance(blob_id, str) or BLOB_ID.fullmatch(blob_id) is None:
        raise InvalidOption("blob_id", blob_id, "32 lowercase hex digits (an id jobloom chose)")
    return blob_id


class Directory:
    """A :class:`BlobStore` in a folder: blob ``ab12...`` is the file ``<path>/ab/ab12...``.

    A write goes to a temporary file in the same folder, is flushed to disk (``fsync``), renamed over
    its name (atomic on POSIX) and the folder is flushed, so a crash leaves the whole blob or none. A
    blob's time of writing is its file's modification time, set to the app's clock at the write. A
    temporary file that a crash left behind is removed by :meth:`written_before` once it is older than
    the moment asked about. Every worker and API server of an app must see the same folder (a local
    disk for one host, a shared file system for several).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.root = Path(path).absolute()

    def __repr__(self) -> str:
        return f"Directory({str(self.root)!r})"

    def path_of(self, blob_id: str) -> Path:
        """The file of blob ``blob_id`` (its id checked: nothing outside :attr:`root` is ever named)."""
        check_blob_id(blob_id)
        return self.root / blob_id[:2] / blob_id

    async def put(self, blob_id: str, data: bytes, *, now: float) -> None:
        """Write the blob atomically (temporary file, fsync, rename, fsync of the folder)."""
        await asyncio.to_thread(self._put, self.path_of(blob_id), data, now)

    def _put(self, final: Path, data: bytes, now: float) -> None:
        folder = final.parent
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{final.name}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.utime(tmp, (now, now))
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    async def get(self, blob_id: str) -> bytes:
        """The blob's bytes; ``BlobMissing`` if its file is not there."""
        path = self.path_of(blob_id)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise BlobMissing(blob_id, str(self.root)) from None

    async def delete(self, blob_id: str) -> None:
        """Remove the blob's file (none: nothing to do)."""
        await asyncio.to_thread(self.path_of(blob_id).unlink, missing_ok=True)

    async def written_before(self, moment: float, *, after: str = "", limit: int = 1000) -> list[str]:
        """Ids of blobs whose file is older than ``moment``, after ``after``, in order; removes older
        temporary files on the way."""
        return await asyncio.to_thread(self._written_before, moment, after, limit)

    def _written_before(self, moment: float, after: str, limit: int) -> list[str]:
        out: list[str] = []
        try:
            shards = sorted(e.name for e in os.scandir(self.root) if e.is_dir() and len(e.name) == 2)
        except FileNotFoundError:
            return out
        for shard in shards:
            if shard < after[:2]:
                continue
            for name in sorted(os.listdir(self.root / shard)):
                path = self.root / shard / name
                try:
                    old = path.stat().st_mtime < moment
                except FileNotFoundError:
                    continue  # deleted meanwhile
                if not old:
                    continue
                if name.endswith(".tmp"):
                    path.unlink(missing_ok=True)
                elif name > after and BLOB_ID.fullmatch(name):
                    out.append(name)
                    if len(out) >= limit:
                        return out
        return out


def new_blob_id() -> str:
    """A fresh random blob id (128 bits)."""
    return secrets.token_hex(16)


__all__ = ["BlobMissing", "BlobStore", "Directory", "check_blob_id", "new_blob_id"]
