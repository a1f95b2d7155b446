"""The sweeper: deletes blobs that no row refers to once they are older than the grace period.

A blob is written before the transaction that stores its reference commits (an enqueue, a worker's
report, a step). A crash in between, a transaction that failed, a unique key already held, a payload
replaced (a debounce) or a job deletion that committed before its blobs were removed all leave a blob
no row refers to. Each pass lists blobs written before ``now - grace`` (``BlobStore.written_before``)
and only then reads which of them rows still refer to (``blob_refs_among``): a blob older than the
grace period whose transaction had not committed by that read would need a transaction longer than
the grace period (24 hours by default; a worker that cannot reach the store keeps its outcomes
meanwhile, so the grace period must also exceed the longest store outage a worker rides out).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobloom.core.blobref import PREFIX
from jobloom.core.queries import Q
from jobloom.core.rows import BlobRefRow

if TYPE_CHECKING:
    from jobloom.engine.offload import Offload
    from jobloom.store.base import Store, Tx

PAGE = 1000
"""Blobs listed (and checked against the rows in one read) at a time."""


async def sweep(store: Store, offload: Offload, now: float, *, after: str = "", pages: int = 10) -> tuple[int, str]:
    """Delete the unreferenced blobs among up to ``pages`` pages of blobs older than the grace period,
    starting after the id ``after``; return (blobs deleted, the id to go on after: "" once all were seen)."""
    deleted = 0
    for _ in range(pages):
        old = await offload.blobs.written_before(now - offload.grace, after=after, limit=PAGE)
        if not old:
            return deleted, ""
        refs = [f"{PREFIX}1:{blob_id}" for blob_id in old]

        async def work(tx: Tx, refs: list[str] = refs) -> list[BlobRefRow]:
            return await tx.fetch(Q.blob_refs_among, {"refs": refs})

        held = {str(r.ref)[len(PREFIX) + 2:] for r in await store.transact(work, exclusive=False)}
        gone = [blob_id for blob_id in old if blob_id not in held]
        await offload.forget(gone)
        deleted += len(gone)
        if len(old) < PAGE:
            return deleted, ""
        after = old[-1]
    return deleted, after


class BlobSweeper:
    """The housekeeper that deletes unreferenced blobs: a pass every ``interval`` seconds (an hour, or the
    grace period if shorter), or at once while the last pass left pages unseen."""

    name = "blobs"

    def __init__(self, offload: Offload, *, interval: float | None = None) -> None:
        self.offload = offload
        self.interval = min(3600.0, offload.grace) if interval is None else interval
        self._next = 0.0
        self._after = ""
        self.deleted = 0

    async def next_due(self, store: Store, now: float) -> float | None:
        """When to sweep next (kept in memory)."""
        return self._next

    async def planned(self, store: Store, now: float) -> float | None:
        """Nothing: a sweep deletes whatever is old enough at whatever moment it runs."""
        return None

    async def run(self, store: Store, now: float) -> bool:
        """Sweep one pass; deleting blobs never makes a job runnable, so this returns False."""
        self._next = now + self.interval
        deleted, self._after = await sweep(store, self.offload, now, after=self._after)
        self.deleted += deleted
        if self._after:
            self._next = now
        return False


__all__ = ["PAGE", "BlobSweeper", "sweep"]
