"""Acting on one job for the app's API: cancel it, queue it again, deliver an event to it. Each is one
transaction (the decision is the coordinator's, or the durable steps'), then a wake-up of the workers.

The :class:`~jobloom.app.facade.App` delegates here; bulk actions on a filter's jobs are in
:mod:`jobloom.app.bulk`.
"""

from __future__ import annotations

from typing import Any

from jobloom.app.reads import read_job
from jobloom.core.errors import InvalidOption
from jobloom.core.text import MAX_NAME_BYTES, check_name, checked_id, plain_json
from jobloom.core.types import Job
from jobloom.engine import coordinator, steps
from jobloom.engine.hooks import EngineHooks
from jobloom.store import Store, Tx


async def cancel(store: Store, job_id: int, *, hooks: EngineHooks) -> Job:
    """Cancel a job: at once unless running; a running job's worker is told and cancels its task."""
    job_id = checked_id(job_id)

    async def work(tx: Tx) -> str:
        return await coordinator.cancel(tx, job_id, store.now(), hooks=hooks)

    await store.transact(work)
    await store.notify()
    return await read_job(store, job_id)


async def retry(store: Store, job_id: int) -> Job:
    """Queue a ``failed``, ``stalled`` or ``cancelled`` job again; its history is kept."""
    job_id = checked_id(job_id)

    async def work(tx: Tx) -> None:
        await coordinator.retry(tx, job_id, store.now())

    await store.transact(work)
    await store.notify()
    return await read_job(store, job_id)


async def send_event(store: Store, job_id: int, name: str, data: Any) -> bool:
    """Deliver ``data`` to the job's ``wait_for_event(name)``; returns whether a waiting job was woken."""
    job_id = checked_id(job_id)
    check_name("event name", name, MAX_NAME_BYTES)
    try:
        payload = None if data is None else plain_json(data)
    except ValueError as exc:
        raise InvalidOption("event data", data, f"JSON data: {exc}") from None

    async def work(tx: Tx) -> bool:
        return await steps.send_event(tx, job_id, name, payload, store.now())

    woken = await store.transact(work)
    await store.notify()
    return woken


__all__ = ["cancel", "retry", "send_event"]
