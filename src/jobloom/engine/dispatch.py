"""Dispatch: which runnable jobs of one binding a worker starts now, decided and claimed inside the
worker's transaction (see docs/explanation/architecture.md, "Dispatch").

:func:`dispatch` reads the binding's policy and, when the binding is limited, takes its row lock
and the running count; it asks :func:`~jobloom.core.decide.decide` (pure) which candidates start,
and claims them. A paused binding (:func:`~jobloom.core.decide.held`) starts nothing. A batch
performer's binding hands out at most one batch per dispatch (``claim_batch``): up to ``batch_size``
jobs, once that many wait or the first has waited ``batch_wait``; its ``concurrency`` counts running
batches, and its key and rate limits apply per job.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from jobloom.core.decide import batch_due, decide, dispatch_time, held, room_for_batch, token_due
from jobloom.core.queries import Q, Query
from jobloom.core.records import policy_from_row
from jobloom.core.rows import CandidateRow, KeyCountRow, PolicyRow
from jobloom.core.types import Candidate, Policy
from jobloom.engine.jobs import DeferredClaim, Dispatched, Prefetched, claims, emit, event
from jobloom.store.base import Tx

TIMER_GRAIN = 0.002
"""How late an event loop's timer may fire: a wait for a token sleeps until this long before it."""
HOLD_CAP = 0.025
"""The longest a dispatch holding a rate-limited binding's lock waits for its next token."""
TOKEN_SLACK = 0.00002
"""Seconds past a token's due moment that a waiting dispatch reads the clock again: the clock then
shows the token accrued, not a hair short of it."""


async def dispatch(  # noqa: C901 (tests/test_code_shape.py)
    tx: Tx, binding: str, *, capacity: int, worker: str, now: float, lease: float,
    binding_rows: list[PolicyRow] | None = None, clock: Callable[[], float] | None = None,
    token_wait: float = 0.0, wait_for_lock: bool = True, prefetched: Prefetched | None = None,
    defer: bool = False,
) -> Dispatched:
    """Hand up to ``capacity`` runnable jobs of ``binding`` to ``worker``, within every limit.

    The jobs start at ``now``. A rate-limited binding's jobs start when its lock is held: at ``clock()``
    read then (a dispatch that waited for the lock does not record its starts as before the wait), and
    never before the bucket's last update (:func:`~jobloom.core.decide.dispatch_time`); the bucket spends
    their tokens at that moment.
    ``binding_rows``: the binding's ``get_binding`` rows if already read in this transaction, after
    ``hold_dispatch`` (as :func:`~jobloom.engine.coordinator.read_cycle` does).

    ``token_wait``: when jobs wait only for the binding's next rate token and it is due within that
    many seconds, wait for it here, under the lock, and start the first of them when it is due. A
    worker that wakes a little before the token (its timer aims early by its cycles' usual latency)
    then starts the job on time instead of a cycle late: with a burst of 1, lateness is a share of
    the rate lost for good. Needs ``clock``.

    ``wait_for_lock``: False when the transaction already holds another binding's lock. A lock is then
    only taken if free (``SKIP LOCKED``): waiting for one while holding another could deadlock with a
    transaction that took them in the other order, and keeps the held binding from every other worker
    meanwhile. A binding skipped so comes back ``contended``, to be dispatched first next time.

    ``prefetched``: the binding's candidates as :func:`~jobloom.engine.coordinator.read_cycle` read them,
    before ``binding_rows``, with nothing written in between that could make another job of the
    binding runnable. They stand for the first read of candidates when the binding's policy takes no
    lock (no concurrency or rate limit), is not a batch performer's, and they were read as this
    dispatch would read them; otherwise they are ignored (and read again).

    ``defer``: the claim may go out with the transaction's next round trip (:meth:`Tx.claim`): the
    claimed jobs are then in :attr:`Dispatched.deferred` (read them after the commit; their number is
    known now), not in :attr:`Dispatched.claimed`. A batch performer's claim is never deferred."""
    if capacity <= 0:
        return Dispatched([])
    if binding_rows is None:  # the hold first: the binding is read after any pause that commits
        _, binding_rows = await tx.fetch_batch([("hold_dispatch", {"bindings": [binding]}),
                                                (Q.get_binding, {"binding": binding})])
    row = binding_rows[0] if binding_rows else None
    policy, bucket, _ = policy_from_row(row)
    if held(policy) is not None:
        return Dispatched([])
    paced = policy.rate is not None and policy.batch_size is None
    if paced:
        # the binding's row as this transaction read it: when its next token is further off than this
        # dispatch would wait, no job can start now, and the lock is not taken for nothing (other workers
        # may be dispatching the binding; a token only comes later than this row says, never earlier)
        due = token_due(bucket, policy, now)
        if due is not None and due - now > token_wait:
            return Dispatched([], due)
    locked = False
    running: int | None = None
    key = {"binding": binding}
    count = Q.count_running if policy.batch_size is None else Q.count_running_batches
    if policy.limited:  # the lock, and the count it guards, in one batch (they run in this order)
        counted = policy.concurrency is not None
        skip = paced or not wait_for_lock
        lock_rows, *count_rows = await tx.fetch_batch(
            [(Q.try_lock_binding if skip else Q.lock_binding, key), *([(count, key)] if counted else [])])
        if paced and not lock_rows:
            # another worker is dispatching the binding now and takes the token due: wait for the next
            assert policy.rate is not None
            return Dispatched([], max(now, due or now) + 1 / policy.rate.rate)
        if skip and not lock_rows:
            return Dispatched([], contended=True)
        policy, bucket, _ = policy_from_row(lock_rows[0] if lock_rows else None)
        locked = True
        if held(policy) is not None:
            return Dispatched([])
        if count_rows:
            running = count_rows[0][0].n if count_rows[0] else 0
        if policy.rate is not None:  # under the lock: starts are recorded at times that never go back
            now = dispatch_time(clock() if clock is not None else now, bucket)
    if policy.concurrency is not None and running is None:
        running = sum(r.n for r in await tx.fetch(count, key))
    running = running or 0
    rules = policy  # what decides: a batch performer's concurrency counts batches, decided here
    if policy.batch_size is not None:
        if room_for_batch(policy, running) <= 0:
            return Dispatched([])
        rules, running, capacity = replace(policy, concurrency=None), 0, policy.batch_size
    by_key: dict[str, int] | None = None
    full: set[str] = set()
    selected: list[int] = []
    next_token_at: float | None = None
    room = capacity
    waits = 2 if token_wait > 0 and policy.rate is not None else 0
    # holding the lock, a dispatch waits for a token due within one token's time (up to HOLD_CAP): the
    # workers that found the lock held meanwhile count on this one to take that token
    hold_wait = max(token_wait, min(HOLD_CAP, 1 / policy.rate.rate)) if waits and policy.rate else 0.0
    decided_at: float | None = None
    waited = 0.0
    contended = False
    for _ in range(8 + waits):
        want = min(room, rules.concurrency - running if rules.concurrency is not None else room)
        if want <= 0:
            break
        if prefetched is not None and _usable(prefetched, policy, locked, full, want + 16):
            # read with the cycle's first reads, before the policy: no fresher policy to read after them
            cands, key_rows, fresh = _as_candidates(prefetched.rows), None, None
        else:
            # under the binding's lock, the running count per key comes along (cheap, and no round trip
            # of its own); it is only used if a candidate has a key
            # without the lock, the policy is read again after the candidates, unless this transaction
            # reads one snapshot (the policy read before them is as current as they are)
            cands, key_rows, fresh = await _candidates(
                tx, binding, policy, sorted(full), want + 16,
                with_keys=locked and by_key is None, with_policy=not locked and not tx.one_snapshot)
        prefetched = None
        if fresh is not None and policy_from_row(fresh[0] if fresh else None)[0] != policy:
            # the limits changed since they were read (set_limits committed in between; the candidates
            # may include jobs enqueued after it): decide again by the limits in force, under the lock
            return await dispatch(tx, binding, capacity=capacity, worker=worker, now=now, lease=lease,
                                  binding_rows=fresh, clock=clock, token_wait=token_wait, wait_for_lock=wait_for_lock)
        if not cands:
            break
        if policy.batch_size is not None and not selected:
            due, fill_by = batch_due(now, cands, policy)
            if not due:  # a batch not full yet, and its first job has not waited batch_wait: wake then
                return Dispatched([], fill_by, batch=True)
        if by_key is None and any(c.key is not None for c in cands):
            if not locked:
                if wait_for_lock:
                    await tx.fetchone(Q.lock_binding, key)
                elif await tx.fetchone(Q.try_lock_binding, key) is None:
                    contended = True  # keyed jobs wait for the lock: the ones already picked start
                    break
                locked = True
            if key_rows is None:
                key_rows = await tx.fetch(Q.running_by_key, {"binding": binding})
            by_key = {r.concurrency_key: r.n for r in key_rows}
            newly_full = {k for k, n in by_key.items() if n >= policy.key_concurrency}
            if any(c.key in newly_full for c in cands):
                full |= newly_full
                continue
        if decided_at is None and policy.rate is not None:
            decided_at = now
        decision = decide(
            now, cands, rules, bucket, running=running, running_by_key=by_key, capacity=room
        )
        bucket = decision.bucket
        next_token_at = decision.next_token_at
        if not decision.selected:
            if (waits and clock is not None and not selected and next_token_at is not None
                    and next_token_at - now <= hold_wait):
                waits -= 1  # the next token is due in a moment: wait for it holding the lock, then decide again
                began = time.monotonic()
                now = dispatch_time(await _until(next_token_at + TOKEN_SLACK, clock), bucket)
                waited += time.monotonic() - began
                continue
            break
        selected.extend(decision.selected)
        picked = set(decision.selected)
        for c in cands:
            if c.id in picked and c.key is not None and by_key is not None:
                by_key[c.key] = by_key.get(c.key, 0) + 1
                if by_key[c.key] >= policy.key_concurrency:
                    full.add(c.key)
        running += len(decision.selected)
        room -= len(decision.selected)
        if not decision.skipped_keys or decision.blocked_by is not None:
            break
    if policy.rate is not None and bucket is not None:
        # nothing reads its result: a store may send it with the next statement
        await tx.executemany(
            "save_bucket", [{"binding": binding, "tokens": bucket.tokens, "tokens_at": bucket.updated_at}]
        )
    batched = policy.batch_size is not None
    if not selected:
        return Dispatched([], next_token_at, batched, decided_at, waited, locked, contended)
    params = {"ids": selected, "worker": worker, "lease_expires": now + lease, "now": now}
    if batched:  # the jobs claimed together are one batch, named by its lowest job id
        rows = await tx.fetch(Q.claim_batch, params | {"batch": min(selected)})
        await emit(tx, [event(now, r.id, r.binding, "started", r.attempt) for r in rows])
        return Dispatched(claims(rows, now), next_token_at, batched, decided_at, waited, locked, contended)
    later = await tx.claim(params)
    if defer:  # the candidates are locked by this transaction: every selected job is claimed
        return Dispatched([], next_token_at, batched, decided_at, waited, locked, contended,
                          DeferredClaim(later, now, len(selected)))
    await tx.flush()
    return Dispatched(claims(later.rows(), now), next_token_at, batched, decided_at, waited, locked, contended)


PREFETCH_BINDINGS = 8
"""The most bindings whose candidates one cycle reads with its first reads."""


class Expected:
    """The bindings a worker expects to dispatch without a lock (no concurrency or rate limit, not paused,
    not a batch performer's), as its last cycle read their policies. On a store whose batches of reads
    cost one round trip, a cycle reads their candidates with its first reads: an idle worker woken for
    a job then claims it in two round trips (the reads, the claim) before its commit, not three."""

    def __init__(self) -> None:
        self._aging: dict[str, bool] = {}  # binding: whether its policy ages priorities

    def prefetch(self, order: list[str], limit: int) -> dict[str, tuple[int, bool]]:
        """What :func:`~jobloom.engine.coordinator.read_cycle` reads ahead for a cycle dispatching the
        bindings in ``order``: the first few expected bindings, up to ``limit`` candidates each."""
        out: dict[str, tuple[int, bool]] = {}
        for binding in order:
            aging = self._aging.get(binding)
            if aging is not None:
                out[binding] = (limit, aging)
                if len(out) >= PREFETCH_BINDINGS:
                    break
        return out

    def learn(self, bindings: dict[str, list[PolicyRow]]) -> None:
        """Note the policies a cycle read (``get_binding`` rows by binding)."""
        for binding, rows in bindings.items():
            policy = policy_from_row(rows[0] if rows else None)[0]
            if policy.limited or policy.paused or policy.batch_size is not None:
                self._aging.pop(binding, None)
            else:
                self._aging[binding] = bool(policy.priority_aging)


def paced(binding_rows: list[PolicyRow]) -> bool:
    """Whether a binding (its ``get_binding`` rows) is rate-limited and not batched: its dispatch takes
    the binding's lock only if free, and holds it to take a token on time. A cycle dispatches such
    bindings after the others, so that it holds their locks for the least time: while it does, every
    other worker skips them."""
    policy = policy_from_row(binding_rows[0] if binding_rows else None)[0]
    return policy.rate is not None and policy.batch_size is None


async def _until(moment: float, clock: Callable[[], float]) -> float:
    """Wait until ``clock()`` reaches ``moment`` and return it. An event loop's timer fires up to a
    millisecond or two late, and for a token that is a share of the rate: sleep until shortly before,
    then yield to the loop's other tasks until the moment comes."""
    now = clock()
    if moment - now > TIMER_GRAIN:
        await asyncio.sleep(moment - now - TIMER_GRAIN)
        now = clock()
    while now < moment:
        await asyncio.sleep(0)
        now = clock()
    return now


def _usable(prefetched: Prefetched, policy: Policy, locked: bool, full: set[str], limit: int) -> bool:
    """Whether prefetched candidates stand for the read a dispatch is about to make."""
    return (not locked and not policy.limited and policy.batch_size is None and not full
            and prefetched.aging == bool(policy.priority_aging) and prefetched.limit >= limit)


def candidate_reads(
    binding: str, full_keys: list[str], limit: int, *, aging: bool
) -> list[tuple[Query[Any], dict[str, Any] | None]]:
    """The reads of a binding's candidates, without the jobs of ``full_keys``: by priority, and by age
    too with priority aging (merge their rows with :func:`merge_by_age`). A cycle that reads them ahead
    (:func:`~jobloom.engine.coordinator.read_cycle`) reads them as dispatch does."""
    params = {"binding": binding, "full_keys": full_keys, "limit": limit}
    return [(Q.candidates_by_priority, params), *([(Q.candidates_by_age, params)] if aging else [])]


def merge_by_age(by_priority: list[CandidateRow], by_age: list[CandidateRow]) -> list[CandidateRow]:
    """Candidates by priority, then those read by age that are not among them (with priority aging, the
    oldest jobs may have aged past higher priorities)."""
    seen = {r.id for r in by_priority}
    return by_priority + [r for r in by_age if r.id not in seen]


async def _candidates(
    tx: Tx, binding: str, policy: Policy, full_keys: list[str], limit: int, *, with_keys: bool, with_policy: bool
) -> tuple[list[Candidate], list[KeyCountRow] | None, list[PolicyRow] | None]:
    """Candidates in priority order (and in age order with priority aging: the oldest jobs may have
    aged past higher priorities), all read in one batch; with ``with_keys``, ``running_by_key`` too;
    with ``with_policy``, the binding's row read after them (on PostgreSQL each statement sees what
    was committed when it began: limits set before any candidate was enqueued are seen)."""
    queries = candidate_reads(binding, full_keys, limit, aging=bool(policy.priority_aging))
    if with_keys:
        queries.append((Q.running_by_key, {"binding": binding}))
    if with_policy:
        queries.append((Q.get_binding, {"binding": binding}))
    results = await tx.fetch_batch(queries)
    rows: list[CandidateRow] = results[0]
    if policy.priority_aging:
        rows = merge_by_age(rows, results[1])
    key_rows = results[1 + bool(policy.priority_aging)] if with_keys else None
    fresh = results[-1] if with_policy else None
    return _as_candidates(rows), key_rows, fresh


def _as_candidates(rows: list[CandidateRow]) -> list[Candidate]:
    """Candidate rows as the decision weighs them."""
    return [Candidate(r.id, r.priority, r.run_at, r.concurrency_key) for r in rows]
