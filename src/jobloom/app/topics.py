"""Publishing to topics: one job per binding subscribed (``triggers``), all in one transaction.

``App.publish(topic, data)`` validates ``data`` against each subscriber's payload type first: one
that refuses it refuses the whole publish (the error names the binding), and nothing is enqueued.
A topic that no binding subscribes to is accepted and enqueues nothing: the jobs returned are the
count (an empty list). With ``connection=`` the jobs are inserted in the caller's own transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobloom.app.enqueueing import admit
from jobloom.app.loops import Core
from jobloom.app.runtime import Runtime
from jobloom.core.types import Job
from jobloom.engine.enqueue import DEFAULT_OPTIONS, build_job, insert_in, restored
from jobloom.engine.jobs import NewJob
from jobloom.engine.telemetry import EnqueueTold
from jobloom.engine.topics import check_topic, subscribers
from jobloom.store.base import Tx


def topics(runtime: Runtime) -> dict[str, list[str]]:
    """Each topic that a binding of the app subscribes to, with those bindings (both sorted)."""
    return subscribers((s.binding, s.triggers) for s in runtime.specs.values() if s.remote is None)


async def _jobs(runtime: Runtime, items: Sequence[tuple[str, Any]], now: float,
                ) -> tuple[list[NewJob], list[tuple[str, int]]]:
    """The jobs to insert, each through the app's enqueue middleware, and each item's topic with the
    number of jobs it makes (0: nobody subscribes)."""
    subscribed = topics(runtime)
    jobs, counts = [], []
    for i, item in enumerate(items):
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError(f"publish_many items are (topic, data) tuples; item {i} is {item!r}")
        topic, data = item
        bindings = subscribed.get(check_topic(topic), [])
        for binding in bindings:
            try:
                [(spec, payload, options)] = await admit(runtime, [(runtime.specs[binding], data, DEFAULT_OPTIONS)])
                jobs.append(build_job(spec, payload, options, now))
            except Exception as exc:
                exc.add_note(f"publishing to topic {topic!r} (subscriber {binding}); nothing was enqueued")
                raise
        counts.append((topic, len(bindings)))
    return jobs, counts


async def publish_many(runtime: Runtime, items: Sequence[tuple[str, Any]], connection: Any = None) -> list[Job]:
    """Publish each ``(topic, data)``: one job per subscribed binding, all in one transaction."""
    core = await runtime.stores.core()
    jobs, counts = await _jobs(runtime, items, core.store.now())
    created = await _insert(runtime, core, jobs, connection) if jobs else []
    for topic, n in counts:
        runtime.telemetry.published(topic, n)
    return created


async def _insert(runtime: Runtime, core: Core, jobs: list[NewJob], connection: Any) -> list[Job]:
    if connection is None:
        return await core.enqueuer.insert(jobs)
    originals = {} if runtime.offload is None else await runtime.offload.put_jobs(jobs)

    async def work(tx: Tx) -> list[Job]:
        return await insert_in(tx, jobs)

    with EnqueueTold(runtime.telemetry, jobs) as told:
        created = restored(await core.store.transact_on(connection, work), jobs, originals)
        told.done([j.id for j in created])  # in the caller's transaction, not committed yet
    return created


__all__ = ["publish_many", "topics"]
