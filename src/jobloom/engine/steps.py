"""Durable steps inside a job: ``step`` runs once and is remembered, ``sleep`` and ``wait_for_event``
suspend the job without holding a worker or a concurrency slot.

On resume the job runs again from the top; finished steps return their remembered results. Each
record is written only while the job's attempt still holds its lease (fencing), so a worker that
lost its job cannot leave a step behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic_core import to_json, to_jsonable_python

from jobloom.core.codecs import decode_opt, encode_opt
from jobloom.core.errors import JobloomError, PayloadTooLarge
from jobloom.core.options import MAX_DELAY, finite
from jobloom.core.queries import Q
from jobloom.core.rows import SignalRow, StepRow
from jobloom.core.text import MAX_NAME_BYTES, check_name, dumped_problem
from jobloom.engine.offload import MAX_OFFLOADED_BYTES, Offload
from jobloom.engine.step_options import PLAIN, StepOptions, run_step, run_step_sync

if TYPE_CHECKING:
    from jobloom.core.types import AttemptControl
    from jobloom.store.base import Store, Tx

MAX_STEP_BYTES = 128 * 1024
FOREVER = 10.0 ** 10  # an event wait without a timeout sleeps "forever" (until the event)


class Suspended(BaseException):
    """Raised inside ``perform`` to suspend the job until ``wake_at`` (or until ``wait`` happens).

    A ``BaseException`` so that a performer's ``except Exception`` does not swallow it.
    """

    def __init__(self, wake_at: float, wait: str | None = None) -> None:
        super().__init__(f"suspended until {wake_at}")
        self.wake_at = wake_at
        self.wait = wait


class EventTimeout(JobloomError):
    """``wait_for_event`` gave up: the event did not arrive within its timeout."""


class StepNotStorable(JobloomError):
    """A step returned a value that cannot be stored as JSON (raised in the job)."""


class LeaseLost(JobloomError):
    """The job's attempt no longer holds its lease: its steps can no longer be recorded."""


class StepContext:
    """The store access one attempt's durable steps need."""

    def __init__(self, store: Store, job_id: int, attempt: int, offload: Offload | None = None, *,
                 claim: tuple[str, float | None] = ("", None)) -> None:
        self.store = store
        self.job_id = job_id
        self.attempt = attempt
        self.claim = claim  # (lease owner, started_at) of the attempt's claim: its steps are fenced to it
        self.offload = offload  # a step result over the app's threshold goes to its blob store
        self._done: dict[str, str | None] | None = None

    async def _records(self) -> dict[str, str | None]:
        if self._done is None:
            async def load(tx: Tx) -> list[StepRow]:
                return await tx.fetch(Q.get_steps, {"job_id": self.job_id})

            self._done = {r.name: r.result for r in await self.store.transact(load, exclusive=False)}
        return self._done

    async def _save(self, name: str, data: str | None) -> None:
        if not await self.store.transact(lambda tx: self.save_in(tx, name, data)):
            raise LeaseLost(f"job {self.job_id} attempt {self.attempt} lost its lease; step {name!r} not recorded")
        self.remembered(name, data)

    async def save_in(self, tx: Tx, name: str, data: str | None) -> bool:
        """Record ``name`` in ``tx`` if the attempt still holds its lease (whether it did)."""
        return bool(await tx.execute(Q.save_step, {
            "job_id": self.job_id, "name": name, "result": data, "now": self.store.now(), "attempt": self.attempt,
            "worker": self.claim[0], "started_at": self.claim[1],
        }))

    def remembered(self, name: str, data: str | None) -> None:
        """Note a record that a committed transaction made."""
        if self._done is not None:
            self._done[name] = data

    async def recorded_as(self, key: str) -> tuple[bool, Any]:
        """Whether the record ``key`` (with its kind: ``call:<name>``) exists, and its data as stored."""
        done = await self._records()
        return (True, done[key]) if key in done else (False, None)

    async def recorded(self, name: str) -> tuple[bool, Any]:
        """Whether step ``name`` finished in an earlier run, and its remembered result."""
        check_name("step name", name, MAX_NAME_BYTES)
        done = await self._records()
        key = f"step:{name}"
        if key not in done:
            return False, None
        data = done[key]
        if data is not None and self.offload is not None:
            data = await self.offload.load(data)  # a blob holds the codec's text too, decoded there
        return True, None if data is None else json.loads(
            self.store.codec.decode(data, f"result of step {name!r} of job {self.job_id}"))

    async def remember(self, name: str, value: Any) -> Any:
        """Record step ``name``'s result (fenced by the lease); return it as it reads back from JSON."""
        if value is None:
            await self._save(f"step:{name}", None)
            return None
        offload = self.offload
        data = _step_json(name, value, MAX_STEP_BYTES if offload is None else MAX_OFFLOADED_BYTES)
        stored = data if offload is None else await offload.put(data)  # a reference goes through the codec as is
        await self._save(f"step:{name}", encode_opt(self.store.codec, stored))
        return json.loads(data)

    async def step(self, name: str, fn: Callable[..., Any], *args: Any, options: StepOptions = PLAIN) -> Any:
        """Run ``fn(*args)`` once for this job (with ``options``' retries and timeout) and remember its
        result (as JSON) across attempts."""
        found, value = await self.recorded(name)
        if found:
            return value
        return await self.remember(name, await run_step(name, fn, args, options))

    def step_sync(self, control: AttemptControl, name: str, fn: Callable[..., Any], *args: Any,
                  options: StepOptions = PLAIN) -> Any:
        """:meth:`step` from a sync job's thread: ``fn`` runs in that thread, the store is reached on the
        worker's event loop through ``control``."""
        found, value = control.call(self.recorded(name))
        if found:
            return value
        value = run_step_sync(name, fn, args, options, control.call)
        return control.call(self.remember(name, value))

    async def sleep(self, name: str, seconds: float) -> None:
        """Suspend the job for ``seconds`` (durably: a restart does not shorten or repeat the sleep)."""
        check_name("sleep name", name, MAX_NAME_BYTES)
        seconds = finite("seconds", seconds, maximum=MAX_DELAY)
        done = await self._records()
        key = f"sleep:{name}"
        if key in done:
            wake = float(done[key] or 0)
        else:
            wake = self.store.now() + seconds
            await self._save(key, repr(wake))
        if self.store.now() < wake:
            raise Suspended(wake)

    async def wait_for_event(self, name: str, timeout: float | None = None) -> Any:
        """Suspend until ``app.send_event(job_id, name, data)``; return ``data``. Raises ``EventTimeout``."""
        check_name("event name", name, MAX_NAME_BYTES)
        if timeout is not None:
            timeout = finite("timeout", timeout)
        async def signal(tx: Tx) -> SignalRow | None:
            return await tx.fetchone(Q.get_signal, {"job_id": self.job_id, "name": name})

        row = await self.store.transact(signal, exclusive=False)
        if row is not None:
            data = decode_opt(self.store.codec, row.data, f"data of event {name!r} of job {self.job_id}")
            return None if data is None else json.loads(data)
        done = await self._records()
        key = f"wait:{name}"
        if key in done:
            deadline = float(done[key] or 0)
        else:
            deadline = FOREVER if timeout is None else min(FOREVER, self.store.now() + timeout)
            await self._save(key, repr(deadline))
        if self.store.now() >= deadline:
            raise EventTimeout(f"event {name!r} did not arrive within {timeout} s")
        raise Suspended(deadline, wait=name)


def _step_json(name: str, value: Any, limit: int) -> str:
    """A step's result as JSON, or :class:`StepNotStorable` saying why it cannot be remembered."""
    try:
        data = to_json(value, inf_nan_mode="constants")
    except Exception as exc:
        raise StepNotStorable(f"step {name!r} returned a value that cannot be stored as JSON: {exc}") from None
    if len(data) > limit:
        raise PayloadTooLarge(f"result of step {name!r}", len(data), limit)
    problem = dumped_problem(data, lambda: to_jsonable_python(value, inf_nan_mode="constants"))
    if problem is not None:
        raise StepNotStorable(f"step {name!r} returned a value that cannot be stored as JSON: {problem}")
    return data.decode()


async def send_event(tx: Tx, job_id: int, name: str, data: str | None, now: float) -> bool:
    """Deliver an event to a job; wake it if it is suspended. Returns whether it was woken.

    The job's row is locked first, so the event and a report of the job suspending to wait for it
    are serialized: either the report sees the event (and the job runs again at once), or the job
    is suspended when the event arrives (and is woken). Raises :class:`~jobloom.JobNotFound`."""
    if await tx.fetchone(Q.lock_job, {"id": job_id}) is None:
        from jobloom.core.errors import JobNotFound

        raise JobNotFound(job_id)
    await tx.execute(Q.put_signal, {"job_id": job_id, "name": name, "data": encode_opt(tx.codec, data), "now": now})
    rows = await tx.fetch(Q.wake_waiting_for, {"id": job_id, "now": now, "step": f"wait:{name}"})
    if rows:
        from jobloom.engine.jobs import emit, event

        await emit(tx, [event(now, r.id, r.binding, "queued", r.attempt) for r in rows])
    return bool(rows)
