"""Offloading: stored texts (payloads, results, step results) over the app's threshold go to its blob
store, and their rows keep a reference (``core/blobref.py``).

Each point where jobloom stores such a text makes one call here after it has the text in its stored
form (serialized, then encoded by the app's codec if it has one): :meth:`Offload.put` (or
:meth:`Offload.put_jobs` for rows to insert); each point that reads one makes one call,
:meth:`Offload.load`, before decoding. The blob therefore holds exactly what the row would have held.

A blob is written before the transaction that stores its reference commits. If that transaction
fails or the process dies in between, nothing refers to the blob: the sweeper
(``housekeeping/blobs.py``) deletes blobs older than the grace period that no row refers to.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from jobloom.core.blobref import BlobRef, parse_ref
from jobloom.core.codecs import IDENTITY, Codec
from jobloom.core.types import Job
from jobloom.store.blobs import BlobStore, new_blob_id

if TYPE_CHECKING:
    from jobloom.engine.jobs import NewJob

MAX_OFFLOADED_BYTES = 64 * 1024 * 1024
"""The largest payload, result or step result an app with a blob store accepts (64 MiB): each is held
in memory several times over while it is validated, encoded and written, by the enqueuing process and
by the worker. Without a blob store the limits are ``MAX_PAYLOAD_BYTES`` and ``MAX_RESULT_BYTES``."""

DEFAULT_GRACE = 24 * 3600.0
"""How old an unreferenced blob must be before the sweeper deletes it (seconds)."""

log = logging.getLogger("jobloom.blobs")


class Offload:
    """An app's blob store and threshold: texts over ``over`` bytes go to ``blobs``."""

    def __init__(self, blobs: BlobStore, over: int, now: Callable[[], float], *,
                 grace: float = DEFAULT_GRACE, codec: Codec = IDENTITY) -> None:
        self.blobs = blobs
        self.over = over
        self.now = now
        self.grace = grace
        self.codec = codec  # a blob holds the codec's text (ciphertext); the row's reference stays plain

    def __repr__(self) -> str:
        return f"Offload({self.blobs!r}, over={self.over})"

    async def put(self, text: str) -> str:
        """``text`` (JSON) itself when it is at most ``over`` bytes, else a reference to the blob written
        now, which holds ``text`` encoded by the app's codec (encrypted, with ``Encrypted``)."""
        if len(text) <= self.over // 4:  # at most 4 bytes a character: small enough without encoding
            return text
        data = text.encode("utf-8", "surrogatepass")
        if len(data) <= self.over:
            return text
        if self.codec is not IDENTITY:
            data = self.codec.encode(text).encode()
        ref = BlobRef(new_blob_id(), len(data))
        await self.blobs.put(ref.id, data, now=self.now())
        return ref.text()

    async def put_opt(self, text: str | None) -> str | None:
        """:meth:`put` of a text that may be None."""
        return None if text is None else await self.put(text)

    async def load(self, text: str) -> str:
        """The JSON ``text`` refers to (read from the blob store and decoded by the app's codec), or ``text``
        if it is no reference."""
        ref = parse_ref(text)
        if ref is None:
            return text
        stored = (await self.blobs.get(ref.id)).decode("utf-8", "surrogatepass")
        return self.codec.decode(stored, f"blob {ref.id}")

    async def load_opt(self, text: str | None) -> str | None:
        """:meth:`load` of a text that may be None."""
        return None if text is None else await self.load(text)

    async def put_jobs(self, jobs: Sequence[NewJob]) -> dict[int, str]:
        """Offload the large payloads of rows about to be inserted, in place; return the original text
        of each, by its index in ``jobs`` (to give back to the caller, and to forget if not inserted)."""
        originals: dict[int, str] = {}
        for i, job in enumerate(jobs):
            stored = await self.put(job.payload)
            if stored is not job.payload:
                originals[i] = job.payload
                job.payload = stored
        return originals

    async def forget_jobs(self, jobs: Sequence[NewJob], which: Iterable[int]) -> None:
        """Delete the blobs written for ``jobs[i]`` of ``which`` (rows not inserted after all)."""
        await self.forget([ref.id for i in which if (ref := parse_ref(jobs[i].payload)) is not None])

    async def forget(self, blob_ids: Iterable[str]) -> None:
        """Delete blobs no row refers to any more; a failure is logged and left to the sweeper."""
        for blob_id in blob_ids:
            try:
                await self.blobs.delete(blob_id)
            except Exception:  # the sweeper deletes it later
                log.warning("could not delete blob %s; the sweeper will", blob_id, exc_info=True)

    async def resolved(self, job: Job) -> Job:
        """``job`` with its payload and result read from the blob store where they are references."""
        if parse_ref(job.payload_json) is None and parse_ref(job.result_json) is None:
            return job
        return dataclasses.replace(job, payload_json=await self.load(job.payload_json),
                                   result_json=await self.load_opt(job.result_json))


def blob_ids(texts: Iterable[str | None]) -> list[str]:
    """The ids of the blobs that ``texts`` (stored payloads, results) refer to."""
    return [ref.id for t in texts if (ref := parse_ref(t)) is not None]


__all__ = ["DEFAULT_GRACE", "MAX_OFFLOADED_BYTES", "Offload", "blob_ids"]
