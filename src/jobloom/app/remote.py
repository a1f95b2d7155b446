"""The pull protocol of :class:`jobloom.App`: remote workers claim jobs of remote bindings, renew their
leases and report how their attempts ended (``App.remote_claim``, ``remote_heartbeat``, ``remote_complete``).

Every input is checked here, with errors that name the field and the value (``InvalidOption``,
``UnknownBinding``, ``JobNotFound``), so that a server in front of it can answer a bad request
without reaching the store; the decisions themselves are :mod:`jobloom.engine.remote`'s.
"""

from __future__ import annotations

import asyncio
import builtins
import time
import weakref
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from jobloom.app.bindings import register_bindings
from jobloom.app.runtime import Runtime
from jobloom.core import options as opt
from jobloom.core.errors import InvalidOption, UnknownBinding
from jobloom.core.tasks import cancel_and_wait
from jobloom.core.text import MAX_ERROR_BYTES, MAX_NAME_BYTES, check_name, checked_id, storable_text
from jobloom.engine import coordinator, registry, remote
from jobloom.engine.remote import OUTCOMES, RemoteJob

if TYPE_CHECKING:

    from jobloom.engine.jobs import Claimed
    from jobloom.engine.performer import PerformerSpec
    from jobloom.store.base import Store, Tx

MAX_CLAIM = 1000
"""Jobs one claim may ask for at most."""
MAX_WAIT = 300.0
"""Seconds one claim may wait for jobs at most (a long poll)."""
MAX_HEARTBEAT = 10_000
"""Attempts one heartbeat may renew at most."""
MAX_BINDINGS = 100
"""Bindings one claim may name at most."""


class RemoteOps:
    """The pull protocol's operations on one app (see the module)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._registered: weakref.WeakSet[Store] = weakref.WeakSet()
        self.waiting = 0
        """Long polls of this app waiting now for a job (each has looked at least once)."""
        self._seen: dict[str, tuple[tuple[str, ...], int, float, float]] = {}
        """Remote workers seen: bindings, claim size, how long they may stay silent, last registry write."""

    async def _register(self, tx: Tx, worker: str, now: float, bindings: Sequence[str] | None = None,
                        max: int | None = None, wait: float | None = None) -> Callable[[], None] | None:
        """Write the remote worker's registry row (see :func:`registry.beat_remote`) when it is new, its
        bindings changed, or a third of its silence allowance has passed since the last write: at most a
        few writes per lease, not one per claim. Returns what to remember once the transaction commits (a
        transaction run again, or rolled back, writes the row again)."""
        known = self._seen.get(worker)
        if bindings is None:
            if known is None:
                return None  # a heartbeat from a worker this process has not seen claim: its claims write the row
            bindings, max = known[0], known[1]
        every = builtins.max(self.runtime.lease, wait or 0.0, known[2] if known and wait is None else 0.0)
        names = tuple(bindings)
        size = max or 1
        if known is not None and known[0] == names and now - known[3] < every / 3:
            return None
        await registry.beat_remote(tx, worker, names, size, every, now)
        return lambda: self._seen.__setitem__(worker, (names, size, every, now))

    def _remote_spec(self, name: object) -> PerformerSpec:
        spec = self.runtime.specs.get(check_name("bindings", name, MAX_NAME_BYTES))
        if spec is None:
            raise UnknownBinding(str(name), [b for b, s in self.runtime.specs.items() if s.remote is not None])
        if spec.remote is None:
            raise InvalidOption("bindings", name, "remote bindings (declared with jobloom.RemoteBinding); this one "
                                "is performed by the app's own workers")
        return spec

    async def _store(self) -> Store:
        store = await self.runtime.store()
        if store not in self._registered:  # remote bindings' limits are stored by the app that serves them
            await register_bindings(self.runtime, [b for b, s in self.runtime.specs.items() if s.remote is not None])
            self._registered.add(store)
        return store

    async def claim(self, worker: str, bindings: Sequence[str], max: int, wait: float | None = None,
                    gone: asyncio.Event | None = None, *, only: frozenset[str] | None = None) -> list[RemoteJob]:
        """Claim up to ``max`` runnable jobs of ``bindings`` for the remote worker ``worker``, within every
        limit; with ``wait``, wait up to that many seconds for one to become runnable (a long poll).
        ``only``: the bindings the caller may claim (a binding-limited token's); another is ``ClaimRefused``.

        ``gone`` is set when the worker is no longer there to take the answer (its connection closed: a
        worker that stops aborts its long poll): the wait ends with nothing claimed, and jobs claimed
        just as it went are given back (``queued`` again, no attempt spent)."""
        check_name("worker", worker, MAX_NAME_BYTES)
        if isinstance(bindings, str | bytes) or not isinstance(bindings, Sequence):
            raise InvalidOption("bindings", bindings, "a list of binding names")
        if not 1 <= len(bindings) <= MAX_BINDINGS:
            raise InvalidOption("bindings", bindings, f"1 to {MAX_BINDINGS} binding names")
        names = list(dict.fromkeys(self._remote_spec(b).binding for b in bindings))
        for name in names:
            remote.check_allowed(only, name)
        if isinstance(max, bool) or not isinstance(max, int) or not 1 <= max <= MAX_CLAIM:
            raise InvalidOption("max", max, f"an integer from 1 to {MAX_CLAIM}")
        count = max
        limit = None if wait is None else opt.finite("wait", wait, maximum=MAX_WAIT)
        store = await self._store()
        deadline = None if not limit else time.monotonic() + limit
        lease = self.runtime.lease
        wake = None

        registered: list[Callable[[], None] | None] = [None]

        async def work(tx: Tx) -> remote.RemoteClaim:
            registered[0] = await self._register(tx, worker, store.now(), names, count, limit)
            return await remote.claim(tx, worker=worker, bindings=names, max=count, now=store.now(), lease=lease,
                                      hooks=self.runtime.hooks, clock=store.now)

        try:
            if deadline is not None:  # subscribed before the first look: a wake-up sent after it is not lost
                wake = await store.wakeups()
            while True:
                if gone is not None and gone.is_set():
                    return []
                got = await store.transact(work)
                if registered[0] is not None:  # committed: remembered, so the next claims skip the write
                    registered[0]()
                    registered[0] = None
                if got.notify:
                    await store.notify()
                if got.claimed and gone is not None and gone.is_set():
                    await self._give_back(store, worker, got.claimed)
                    return []
                if got.claimed or wake is None or deadline is None:
                    return [remote.remote_job(await self._resolved(c), lease, got.claims[c.id], store.codec)
                            for c in got.claimed]
                left = deadline - time.monotonic()
                if left <= 0:
                    return []
                if got.next_due is not None:
                    left = min(left, builtins.max(0.0, got.next_due - store.now()))
                self.waiting += 1
                try:
                    await _first(wake.wait(left), gone)
                finally:
                    self.waiting -= 1
        finally:
            if wake is not None:
                await wake.close()

    async def _resolved(self, c: Claimed) -> Claimed:
        """The claim with its payload read from the blob store if it was offloaded (remote workers get the
        payload itself, never a reference)."""
        offload = self.runtime.offload
        return c if offload is None else c._replace(payload=await offload.load(c.payload))

    async def _give_back(self, store: Store, worker: str, claimed: Sequence[Any]) -> None:
        """Release jobs claimed for a worker that left before it could be told."""
        claims = [(c.id, c.attempt, c.binding) for c in claimed]
        await store.transact(lambda tx: coordinator.release(tx, worker, claims, store.now()))
        await store.notify()

    async def heartbeat(self, worker: str, jobs: Sequence[tuple[int, int, str]], *,
                        only: frozenset[str] | None = None) -> list[tuple[int, int]]:
        """Renew the leases of ``worker``'s attempts, given as (job id, attempt, claim secret), never past an
        attempt's deadline; return the (job id, attempt)s it still holds. An attempt left out is no longer
        the worker's to run (its lease was lost, it was asked to cancel, or its deadline passed): the
        worker should stop it. ``ClaimRefused`` (nothing renewed) for a wrong claim secret, or a binding
        outside ``only``."""
        check_name("worker", worker, MAX_NAME_BYTES)
        if isinstance(jobs, str | bytes) or not isinstance(jobs, Sequence) or len(jobs) > MAX_HEARTBEAT:
            raise InvalidOption("jobs", jobs, f"a list of at most {MAX_HEARTBEAT} (job id, attempt, claim) triples")
        keys = [_triple(item, i) for i, item in enumerate(jobs)]
        if not keys:
            return []
        store = await self._store()

        registered: list[Callable[[], None] | None] = [None]

        async def work(tx: Tx) -> list[tuple[int, int]]:
            registered[0] = await self._register(tx, worker, store.now())
            return await remote.heartbeat(tx, worker, keys, store.now(), self.runtime.lease, only)

        held = await store.transact(work)
        if registered[0] is not None:
            registered[0]()
        return held

    async def complete(
        self, worker: str, job_id: int, attempt: int, outcome: str, result: Any = None, error: str | None = None,
        retry_after: float | None = None, *, claim: str, only: frozenset[str] | None = None,
    ) -> bool:
        """Report how ``worker``'s attempt ended: ``succeeded`` (with ``result``), ``failed`` (retried under the
        binding's policy), ``retry`` (another attempt, after ``retry_after`` seconds or the backoff) or
        ``permanent`` (failed now). False, with nothing changed, when the attempt no longer holds the job;
        ``ClaimRefused``, with nothing changed, when ``claim`` is not the secret its claim returned or the
        job's binding is outside ``only``."""
        check_name("worker", worker, MAX_NAME_BYTES)
        job_id = checked_id(job_id)
        attempt = opt.positive_int("attempt", attempt, allow_none=False) or 1
        claim = _claim("claim", claim)
        if outcome not in OUTCOMES:
            raise InvalidOption("outcome", outcome, " or ".join(f'"{o}"' for o in OUTCOMES))
        if result is not None and outcome != "succeeded":
            raise InvalidOption("result", result, 'no result unless the outcome is "succeeded"')
        if error is not None and not isinstance(error, str):
            raise InvalidOption("error", error, "a string (the attempt's error message)")
        if retry_after is not None:
            if outcome != "retry":
                raise InvalidOption("retry_after", retry_after, 'no retry_after unless the outcome is "retry"')
            retry_after = opt.finite("retry_after", retry_after, maximum=opt.MAX_DELAY)
        store = await self._store()

        async def work(tx: Tx) -> bool:
            return await remote.complete(
                tx, worker=worker, job_id=job_id, attempt=attempt, claim=claim, outcome=outcome,
                specs=dict(self.runtime.specs), result=result, error=storable_text(error, MAX_ERROR_BYTES),
                retry_after=retry_after, now=store.now(), hooks=self.runtime.hooks, only=only,
                offload=self.runtime.offload)

        applied = await store.transact(work)
        if applied:
            await store.notify()  # a slot, or a retry's due moment: idle workers look again
        return applied


MAX_CLAIM_CHARS = 128
"""A claim secret's length at most (a claim returns 32 characters)."""


def _claim(field: str, claim: object) -> str:
    if not isinstance(claim, str) or not 1 <= len(claim) <= MAX_CLAIM_CHARS:
        raise InvalidOption(field, "<hidden>", "the claim secret the attempt's claim returned (a string)")
    return claim


def _triple(item: object, index: int) -> tuple[int, int, str]:
    if isinstance(item, str | bytes) or not isinstance(item, Sequence) or len(item) != 3:
        raise InvalidOption(f"jobs[{index}]", item, "a (job id, attempt, claim) triple")
    job_id = checked_id(item[0], f"jobs[{index}] id", clamp=True)
    attempt = opt.positive_int(f"jobs[{index}] attempt", item[1], allow_none=False) or 1
    return job_id, attempt, _claim(f"jobs[{index}] claim", item[2])


async def _first(wait: Coroutine[Any, Any, Any], gone: asyncio.Event | None) -> None:
    """Await ``wait`` until it returns or ``gone`` is set, whichever comes first."""
    if gone is None:
        await wait
        return
    waiting, leaving = asyncio.ensure_future(wait), asyncio.ensure_future(gone.wait())
    try:
        await asyncio.wait([waiting, leaving], return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait([waiting, leaving])
