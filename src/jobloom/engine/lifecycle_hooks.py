"""Performers' lifecycle hooks (``on_success``, ``on_failure``, ``on_retry``): recorded with the outcome,
run after it is stored, at least once.

When a worker stores an outcome whose performer has the matching hook (a success, a failure for good,
an attempt failed with a retry scheduled), the same transaction writes a row of ``jobloom_hooks``
(:func:`record`), due ``hook_lease`` seconds later. Once the transaction commits, the worker runs the
hook on a background task (:class:`HookRunner`, a bounded number at once: never in the claiming
cycle's way) and deletes the row once the hook returned or raised. A row still there when it is due
(its worker died, or was stopped, before the hook ended) is claimed again by any worker of the
binding, its lease renewed, and run again: so a hook runs at least once, and more than once only
when a worker died or stopped in between.

A hook that raises is logged (``hook_failed``) and counted (:attr:`HookRunner.failed`), and not run
again: the job's outcome stands, whatever its hooks do.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jobloom.core.codecs import decode_opt
from jobloom.core.queries import Q
from jobloom.core.rows import HookRow
from jobloom.core.tasks import cancel_and_wait
from jobloom.core.types import JobContext

if TYPE_CHECKING:
    from jobloom.engine.host import Host
    from jobloom.engine.jobs import Outcome
    from jobloom.engine.performer import PerformerSpec
    from jobloom.store.base import Tx

log = logging.getLogger("jobloom.worker")

KINDS = {"succeeded": "success", "failed": "failure", "retried": "retry"}
"""The outcome event that runs each hook: ``on_success``, ``on_failure`` (failed for good), ``on_retry``."""
AT_ONCE = 16
"""Hooks a worker runs at once; more wait for a place."""
HELD = 1000
"""Hooks a worker holds (running or waiting) at most; those past it are left to their rows' lease."""
SWEEP_EVERY = 1.0
"""Seconds between two looks of a worker for hooks whose lease ran out."""


async def record(tx: Tx, specs: Mapping[str, PerformerSpec], ended: Sequence[tuple[Outcome, str, str]],
                 now: float) -> list[HookRow]:
    """Write, in the outcome's transaction, a row for each hook that these ended attempts run."""
    rows = []
    params = []
    for o, binding, event in ended:
        kind = KINDS.get(event)
        spec = specs.get(binding)
        if kind is None or spec is None or kind not in spec.hooks:
            continue
        error = None if kind == "success" else o.error
        rows.append(HookRow(o.job_id, o.attempt, kind, binding, error))
        params.append({"job_id": o.job_id, "attempt": o.attempt, "kind": kind, "binding": binding, "error": error,
                       "due_at": now + spec.hook_lease})
    if params:
        await tx.executemany(Q.insert_hook, params)
    return rows


class HookRunner:
    """A worker's lifecycle hooks: run on background tasks, at most :data:`AT_ONCE` at once."""

    def __init__(self, app: Host, worker: str, now: Any) -> None:
        self._app = app
        self._worker = worker
        self._now = now
        self._gate = asyncio.Semaphore(AT_ONCE)
        self._tasks: dict[tuple[int, int, str], asyncio.Task[None]] = {}
        self._swept = float("-inf")
        self.ran = 0
        """Hooks run to their end (returned or raised)."""
        self.failed = 0
        """Hooks that raised (logged as ``hook_failed``; not run again)."""

    @property
    def running(self) -> int:
        """Hooks held now (running, or waiting for a place)."""
        return len(self._tasks)

    def start(self, rows: Sequence[HookRow]) -> None:
        """Run these hooks (their rows committed) on background tasks."""
        for row in rows:
            key = (row.job_id, row.attempt, row.kind)
            if key in self._tasks or len(self._tasks) >= HELD:
                continue  # running already, or too many held: the row's lease brings it back
            self._tasks[key] = asyncio.get_running_loop().create_task(self._run(key, row))

    async def sweep(self) -> None:
        """Claim the hooks of this worker's bindings whose lease ran out, and run them."""
        specs = {b: s for b, s in self._app.specs.items() if s.hooks}
        if not specs or time.monotonic() - self._swept < SWEEP_EVERY or len(self._tasks) >= HELD:
            return
        self._swept = time.monotonic()
        now = self._now()
        params = {"now": now, "until": now + max(s.hook_lease for s in specs.values()), "bindings": sorted(specs),
                  "limit": HELD - len(self._tasks)}
        try:
            store = await self._app.store()
            rows = await store.transact(lambda tx: tx.fetch(Q.claim_hooks, params))
        except Exception as exc:  # the store is failing: the next look tries again
            log.warning("hooks_sweep_failed error=%s: %s", type(exc).__name__, exc)
            return
        self.start(rows)

    async def wait(self) -> None:
        """Wait for every hook held now (and those they make meanwhile) to end."""
        while self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def close(self, timeout: float) -> None:
        """Give the hooks held ``timeout`` seconds to end, then stop them (their rows bring them back)."""
        if self._tasks:
            await asyncio.wait(list(self._tasks.values()), timeout=timeout)
        await cancel_and_wait(list(self._tasks.values()))

    async def _run(self, key: tuple[int, int, str], row: HookRow) -> None:
        try:
            async with self._gate:
                try:
                    await self._call(row)
                except Exception as exc:
                    self.failed += 1
                    log.error("hook_failed job_id=%d binding=%s hook=on_%s error=%s: %s", row.job_id, row.binding,
                              row.kind, type(exc).__name__, exc, exc_info=exc,
                              extra={"event": "hook_failed", "job_id": row.job_id, "binding": row.binding,
                                     "hook": f"on_{row.kind}"})
                self.ran += 1
                store = await self._app.store()
                await store.autocommit(lambda tx: tx.execute(Q.delete_hook, {
                    "job_id": row.job_id, "attempt": row.attempt, "kind": row.kind}))
        except Exception as exc:  # the row could not be deleted: its lease brings the hook back
            log.warning("hook_not_cleared job_id=%d hook=on_%s error=%s: %s", row.job_id, row.kind,
                        type(exc).__name__, exc)
        finally:
            self._tasks.pop(key, None)

    async def _call(self, row: HookRow) -> None:
        """Run one hook: the job read back, its payload (and result) loaded as the performer's types."""
        spec = self._app.specs.get(row.binding)
        store = await self._app.store()
        job = await store.autocommit(lambda tx: tx.fetchone(Q.get_job, {"id": row.job_id}))
        if spec is None or job is None:
            return  # the job was deleted meanwhile: nothing to tell
        performer = spec.cls()
        performer.env = self._app.env
        performer.ctx = JobContext(job.id, job.binding, row.attempt, None, self._worker, job.max_attempts,
                                   job.run_id, job.node)
        offload = self._app.offload  # an offloaded payload or result is read from the blob store
        raw = decode_opt(store.codec, job.payload or None, f"payload of job {job.id}")
        if offload is not None:
            raw = await offload.load_opt(raw)
        payload = spec.load_payload(raw) if raw else None
        if row.kind == "success":
            data = decode_opt(store.codec, job.result, f"result of job {job.id}")
            if offload is not None:
                data = await offload.load_opt(data)
            result = None if data is None else spec.result_adapter.validate_json(data)
            await performer.on_success(payload, result)  # type: ignore[attr-defined]
        elif row.kind == "failure":
            await performer.on_failure(payload, row.error)  # type: ignore[attr-defined]
        else:
            await performer.on_retry(payload, row.error, row.attempt)  # type: ignore[attr-defined]


__all__ = ["AT_ONCE", "HELD", "KINDS", "SWEEP_EVERY", "HookRunner", "record"]
