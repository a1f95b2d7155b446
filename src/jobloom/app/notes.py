"""Notes on jobs: what a person did to a job by hand and who (an API token's name), kept with the
job's history (``jobloom_job_notes``, deleted with the job) and shown in its timeline.

The dashboard writes one after each action it takes (enqueue, start a run, send an event, trigger a
schedule, retry, cancel), in a transaction of its own just after the action's.
"""

from __future__ import annotations

from collections.abc import Sequence

from jobloom.core.queries import Q
from jobloom.core.rows import NoteRow
from jobloom.core.text import MAX_ERROR_BYTES, MAX_NAME_BYTES, storable_text
from jobloom.store import Store, Tx


async def add_notes(store: Store, job_ids: Sequence[int], actor: str, what: str) -> None:
    """Note on each of ``job_ids`` that ``actor`` did ``what`` (now)."""
    if not job_ids:
        return
    now = store.now()
    rows = [{"job_id": int(i), "at": now, "actor": storable_text(actor, MAX_NAME_BYTES) or "?",
             "what": storable_text(what, MAX_ERROR_BYTES) or ""} for i in job_ids]

    async def work(tx: Tx) -> None:
        await tx.executemany(Q.add_job_note, rows)

    await store.transact(work)


async def job_notes(tx: Tx, job_id: int) -> list[NoteRow]:
    """The notes on a job, oldest first."""
    return await tx.fetch(Q.job_notes, {"job_id": job_id})


__all__ = ["add_notes", "job_notes"]
