"""A batch's counts: read from its jobs' states, and merged into its callbacks' payloads when they are
released (inside the transaction that ended the batch's last job)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from jobloom.core.codecs import ENCRYPTED, is_encrypted, readable
from jobloom.core.queries import Q
from jobloom.core.rows import StateNRow
from jobloom.core.states import ACTIVE_STATES, CANCELLED, SUCCEEDED
from jobloom.store.base import Tx


def summary(rows: Iterable[StateNRow]) -> dict[str, int]:
    """``total``, ``succeeded``, ``failed`` (failed, stalled or skipped), ``cancelled`` and ``pending``
    (not finished) of a batch's jobs counted by state."""
    out = {"total": 0, "succeeded": 0, "failed": 0, "cancelled": 0, "pending": 0}
    for r in rows:
        out["total"] += r.n
        if r.state == SUCCEEDED:
            out["succeeded"] += r.n
        elif r.state == CANCELLED:
            out["cancelled"] += r.n
        elif r.state in ACTIVE_STATES:
            out["pending"] += r.n
        else:
            out["failed"] += r.n
    return out


async def counts(tx: Tx, batch_id: int) -> dict[str, int]:
    """The batch's counts now (see :func:`summary`)."""
    return summary(await tx.fetch(Q.batch_counts, {"id": batch_id}))


async def merge_counts(tx: Tx, callbacks: Mapping[int, int]) -> None:
    """Merge ``{"batch", "total", "succeeded", "failed", "cancelled"}`` into the payloads of the batch
    callbacks about to be released (job id: batch id)."""
    for job_id, batch_id in sorted(callbacks.items()):
        row = await tx.fetchone(Q.get_job, {"id": job_id})
        if row is None or row.state != "waiting":
            continue
        done = await counts(tx, batch_id)
        raw = readable(tx.codec, row.payload, f"payload of job {job_id}")
        if raw == ENCRYPTED and is_encrypted(row.payload):
            continue  # no configured key opens it: released as it was, without the counts
        payload = json.loads(raw) if raw else {}
        if isinstance(payload, dict):
            payload.update({"batch": batch_id, "total": done["total"], "succeeded": done["succeeded"],
                            "failed": done["failed"], "cancelled": done["cancelled"]})
        await tx.execute(Q.set_callback_payload, {"id": job_id, "payload": tx.codec.encode(json.dumps(payload))})
