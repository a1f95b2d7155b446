"""A job that calls another and waits for it: ``result = await self.call(Binding, payload)``.

The child is made once, like a step: its id is recorded in ``jobloom_steps`` under ``call:<name>``
in the transaction that inserts it (fenced by the caller's lease; the child's unique key
``call:<caller>:<name>`` makes it once even so), with the caller as its ``parent_id``. While the
child runs, the caller is suspended (no worker, no slot, no attempt spent). A child that ends wakes
its caller in the transaction that ends it (:func:`wake_callers`); a caller whose child ends while it
is on its way to suspending sees that end in its own report, which locks the children after the
caller (:func:`children_ended`). The caller then runs again from the top and the call returns the
child's result, or raises :class:`~jobloom.core.signals.ChildFailed`.

Calls awaited together (``asyncio.gather``) make all their children before the caller suspends: a
call whose child is still running waits until every call begun meanwhile knows its child's state.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from jobloom.core.codecs import decode_opt
from jobloom.core.errors import InvalidOption
from jobloom.core.queries import Q
from jobloom.core.signals import ChildFailed
from jobloom.core.states import FINISHED_STATES
from jobloom.core.text import MAX_NAME_BYTES, check_name
from jobloom.engine.callers import CALL_WAIT
from jobloom.engine.enqueue import EnqueueOptions, build_job, insert_in
from jobloom.engine.offload import Offload
from jobloom.engine.performer import give_durable
from jobloom.engine.steps import FOREVER, LeaseLost, StepContext, Suspended

if TYPE_CHECKING:
    from jobloom.engine.performer import PerformerSpec
    from jobloom.store.base import Store, Tx

NEVER = 1e18  # unique_until of a called child: its key is taken for good

_OPTIONS = tuple(f.name for f in fields(EnqueueOptions) if f.name != "unique_key")
"""The enqueue options a call takes (its key is its own)."""


class Calls:
    """The calls of one attempt: their names, and the children still running when the caller suspends."""

    def __init__(self, steps: StepContext, spec: Callable[[Any], PerformerSpec]) -> None:
        self.steps = steps
        self.spec = spec
        self.made = 0  # calls begun, numbering those without a name
        self.in_flight = 0  # calls that do not know their child's state yet
        self.pending: list[int] = []  # children still running
        self._settled = asyncio.Event()

    def name(self, name: str | None) -> str:
        """The call's key among the job's calls: its ``name``, or its number in the order of calls."""
        self.made += 1
        if name is None:
            return f"#{self.made}"
        return check_name("call name", name, MAX_NAME_BYTES)

    async def call(self, key: str, performer: Any, payload: Any, options: dict[str, Any]) -> Any:
        """Make the child once, then return its result, raise ``ChildFailed``, or suspend until it ends."""
        self.in_flight += 1
        try:
            spec = self.spec(performer)
            child_id = await self._child(key, spec, payload, options)
            store = self.steps.store
            row = await store.transact(lambda tx: tx.fetchone(Q.call_child, {"id": child_id}), exclusive=False)
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self._settled.set()
        if row is None:
            raise ChildFailed(child_id, spec.binding, "deleted", "the child job no longer exists")
        if row.state == "succeeded":
            data = decode_opt(store.codec, row.result, f"result of job {child_id}")
            if self.steps.offload is not None:
                data = await self.steps.offload.load_opt(data)
            value = None if data is None else json.loads(data)
            return spec.result_adapter.validate_python(value)
        if row.state in FINISHED_STATES:
            raise ChildFailed(child_id, row.binding, row.state, row.error)
        self.pending.append(child_id)
        await asyncio.sleep(0)  # calls gathered with this one begin
        while self.in_flight:
            self._settled.clear()
            await self._settled.wait()
        raise Suspended(FOREVER, wait=CALL_WAIT + ",".join(map(str, sorted(set(self.pending)))))

    async def _child(self, key: str, spec: PerformerSpec, payload: Any, options: dict[str, Any]) -> int:
        """The id of the call's child: recorded by an earlier attempt, or made now with its record."""
        found, value = await self.steps.recorded_as(f"call:{key}")
        if found:
            return int(value)
        for option in options:
            if option not in _OPTIONS:
                raise InvalidOption(f"call option {option!r}", options[option],
                                    f"one of {', '.join(_OPTIONS)} (a call makes its child once by its name)",
                                    spec.binding)
        steps = self.steps
        job = build_job(spec, payload, EnqueueOptions(**options), steps.store.now())
        job.unique_key, job.unique_until = f"call:{steps.job_id}:{key}", NEVER
        if steps.offload is not None:  # a blob a failed transaction leaves is the sweeper's
            await steps.offload.put_jobs([job])

        async def make(tx: Tx) -> int:
            child = (await insert_in(tx, [job]))[0]
            await tx.execute(Q.set_parent, {"id": child.id, "parent_id": steps.job_id})
            if not await steps.save_in(tx, f"call:{key}", str(child.id)):
                raise LeaseLost(f"job {steps.job_id} attempt {steps.attempt} lost its lease; "
                                f"call {key!r} made no child")
            return child.id

        child_id = await steps.store.transact(make)
        steps.remembered(f"call:{key}", str(child_id))
        await steps.store.notify()
        return child_id


async def durable(store: Store, performer: Any, spec: Callable[[Any], PerformerSpec], version: int,
                  offload: Offload | None = None) -> None:
    """Give a performer its attempt's durable steps and calls (``spec``: a performer or binding's spec),
    and, if its code has a ``version``, the version that first ran the job as ``ctx.version``
    (``offload``: the app's blob store, for large step results)."""
    ctx = performer.ctx
    steps = StepContext(store, ctx.job_id, ctx.attempt, offload, claim=(ctx.worker, ctx.started_at))
    give_durable(performer, steps, Calls(steps, spec))
    if version != 1:
        performer.ctx = dataclasses.replace(ctx, version=await first_version(store, ctx.job_id, ctx.attempt, version))


async def first_version(store: Store, job_id: int, attempt: int, version: int) -> int:
    """The version that first ran a job: ``version`` stored now on its first attempt, else as stored (none
    stored: code without a ``version`` ran it first, which is version 1)."""
    if attempt == 1:
        await store.transact(lambda tx: tx.execute(Q.set_version, {"id": job_id, "version": version}))
        return version
    row = await store.transact(lambda tx: tx.fetchone(Q.job_version, {"id": job_id}), exclusive=False)
    return 1 if row is None or row.version is None else int(row.version)
