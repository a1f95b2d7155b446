"""Batches of jobs with callbacks for the app's API (:meth:`App.batch`, :meth:`App.get_batch`); the
transaction's work is :mod:`jobloom.engine.job_batches`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobloom.app.enqueueing import admit
from jobloom.app.runtime import Runtime
from jobloom.core.errors import BatchNotFound, InvalidOption
from jobloom.core.queries import Q
from jobloom.core.types import Batch
from jobloom.engine import job_batches
from jobloom.engine.batch_counts import counts
from jobloom.engine.enqueue import DEFAULT_OPTIONS, EnqueueRequest, build_job
from jobloom.engine.jobs import NewJob
from jobloom.engine.links import build_items
from jobloom.engine.telemetry import EnqueueTold
from jobloom.store.base import Tx

COUNTS = {"batch": 0, "total": 0, "succeeded": 0, "failed": 0, "cancelled": 0}
"""The keys merged into a callback's payload (checked against its payload type at ``batch``)."""


def _callback(runtime: Runtime, name: str, value: Any, now: float) -> NewJob | None:
    """A callback ``(performer, payload)`` as a job to insert waiting; its payload must be a JSON object
    that its performer accepts with the batch's counts merged in."""
    if value is None:
        return None
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise InvalidOption(name, value, "a (performer, payload) pair")
    performer, payload = value
    spec = runtime.spec(performer)
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise InvalidOption(name, payload, "a payload that is a JSON object (the batch's counts are merged in)",
                            spec.binding)
    build_job(spec, {**payload, **COUNTS}, DEFAULT_OPTIONS, now)  # its type takes the counts
    return build_job(spec, payload, DEFAULT_OPTIONS, now)


async def batch(runtime: Runtime, items: Sequence[Any], on_complete: Any, on_success: Any) -> Batch:
    """Enqueue ``items`` as one batch with its callbacks, atomically (see :meth:`App.batch`)."""
    core = await runtime.stores.core()
    now = core.store.now()
    members = build_items(runtime.spec, await _admitted(runtime, items), now, "batch")
    if not members:
        raise InvalidOption("items", [], "at least one job")
    complete = _callback(runtime, "on_complete", on_complete, now)
    success = _callback(runtime, "on_success", on_success, now)
    if runtime.offload is not None:  # a blob whose row is not committed is left to the sweeper
        await runtime.offload.put_jobs(members)  # (callbacks stay in their rows: the counts merge into them)
    made: list[tuple[int, list[int], int | None, int | None]] = []
    notified = False

    async def work(tx: Tx) -> None:
        nonlocal notified
        made[:] = [await job_batches.insert(tx, members, complete, success, now)]
        notified = tx.notified

    with EnqueueTold(runtime.telemetry, [*members, *(cb for cb in (complete, success) if cb is not None)]) as told:
        await core.store.transact(work)
        batch_id, ids, complete_id, success_id = made[0]
        told.done([*ids, *(i for i in (complete_id, success_id) if i is not None)])
    if not notified:
        await core.store.notify()
    return Batch(batch_id, ids, len(ids), 0, 0, 0, len(ids), complete_id, success_id)


async def _admitted(runtime: Runtime, items: Sequence[Any]) -> list[Any]:
    """``items`` as the app's enqueue middleware returns them (as they are, without middleware)."""
    if not runtime.middleware.enqueues:
        return list(items)
    requests = []
    for i, item in enumerate(items):
        try:
            requests.append(item if isinstance(item, EnqueueRequest) else EnqueueRequest(*item))
        except TypeError:
            raise InvalidOption(f"items[{i}]", item,
                                "a (performer, payload[, options]) tuple or an EnqueueRequest") from None
    admitted = await admit(runtime, [(runtime.spec(r.performer), r.payload, r.options) for r in requests], "batch")
    return [EnqueueRequest(spec.binding, payload, options) for spec, payload, options in admitted]


async def get_batch(runtime: Runtime, batch_id: int) -> Batch:
    """The batch ``batch_id`` with its counts now; ``BatchNotFound`` if there is none."""
    store = await runtime.store()

    async def work(tx: Tx) -> Batch:
        row = await tx.fetchone(Q.get_batch, {"id": batch_id})
        if row is None:
            raise BatchNotFound(batch_id)
        ids = [r.id for r in await tx.fetch(Q.batch_job_ids, {"id": batch_id})]
        c = await counts(tx, batch_id)
        return Batch(row.id, ids, c["total"], c["succeeded"], c["failed"], c["cancelled"], c["pending"],
                     row.on_complete, row.on_success)

    return await store.transact(work, exclusive=False)

