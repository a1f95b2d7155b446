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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from jobloom.core.dispatch_plan import (
    READ_EXTRA,
    Ask,
    CountRunning,
    LockBinding,
    Need,
    Plan,
    ReadAhead,
    ReadBinding,
    ReadCandidates,
    ReadClock,
    ReadKeyBuckets,
    ReadKeys,
    Steps,
    TakeLock,
    TurnRead,
    WaitUntil,
    plan,
)
from jobloom.core.queries import Q, Query
from jobloom.core.records import policy_from_row
from jobloom.core.rows import CandidateRow, KeyCountRow, PolicyRow, TurnCandidateRow
from jobloom.core.turns import Found, cut_at, found_by_turn
from jobloom.core.types import Candidate
from jobloom.engine.jobs import DeferredClaim, Dispatched, Prefetched, claims, emit, event
from jobloom.store.base import Tx

TIMER_GRAIN = 0.002
"""How late an event loop's timer may fire: a wait for a token sleeps until this long before it."""
_turn_extra: dict[str, int] = {}  # binding under turns: the keys its last dispatch in this process passed


async def dispatch(
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
    known now), not in :attr:`Dispatched.claimed`. A batch performer's claim is never deferred.

    What to start is planned by :func:`~jobloom.core.dispatch_plan.plan` (pure: it is sent what this
    function reads for it); this function reads, waits, and applies the plan."""
    ahead = ReadAhead(_as_candidates(prefetched.rows), prefetched.limit, prefetched.aging) if prefetched else None
    ask = Ask(capacity, now, binding_rows, token_wait, wait_for_lock, clock is not None, ahead, tx.one_snapshot,
              _turn_extra.get(binding, READ_EXTRA))
    chosen, waited = await _run(tx, binding, plan(ask), clock)
    while chosen.restart is not None:  # the limits changed as it read: plan again by the limits in force
        ask = replace(ask, binding_rows=chosen.restart, capacity=chosen.capacity, now=chosen.at, ahead=None)
        defer = False
        chosen, waited = await _run(tx, binding, plan(ask), clock)
    if chosen.turn is not None:  # under turns: read next time as many keys beyond the starts as passed now
        _turn_extra[binding] = min(READ_EXTRA, chosen.passed)
    return await _apply(tx, binding, chosen, waited, worker=worker, lease=lease, defer=defer)


async def _run(tx: Tx, binding: str, steps: Steps, clock: Callable[[], float] | None) -> tuple[Plan, float]:
    """Answer a plan's reads in ``tx`` until it is made; the plan, and the seconds spent waiting for tokens."""
    waited = 0.0
    answer: Any = None
    try:
        while True:
            need = steps.send(answer)
            if isinstance(need, WaitUntil):
                assert clock is not None
                began = time.monotonic()
                answer = await _until(need.moment, clock)
                waited += time.monotonic() - began
            else:
                answer = await _answer(tx, binding, need, clock)
    except StopIteration as made:
        return made.value, waited


async def _answer(tx: Tx, binding: str, need: Need, clock: Callable[[], float] | None) -> Any:
    """Read what a plan needs (:data:`~jobloom.core.dispatch_plan.Need`)."""
    key = {"binding": binding}
    match need:
        case ReadBinding():
            _, rows = await tx.fetch_batch([(Q.hold_dispatch, {"bindings": [binding]}), (Q.get_binding, key)])
            return rows
        case LockBinding(skip=skip, count=counted, batches=batches):
            count = Q.count_running_batches if batches else Q.count_running
            lock_rows, *count_rows = await tx.fetch_batch(
                [(Q.try_lock_binding if skip else Q.lock_binding, key), *([(count, key)] if counted else [])])
            return lock_rows, (count_rows[0][0].n if count_rows[0] else 0) if count_rows else None
        case CountRunning(batches=batches):
            return sum(r.n for r in await tx.fetch(Q.count_running_batches if batches else Q.count_running, key))
        case ReadClock():
            assert clock is not None
            return clock()
        case ReadCandidates():
            return await _candidates(tx, binding, need)
        case TakeLock(skip=skip):
            if skip:
                return await tx.fetchone(Q.try_lock_binding, key) is not None
            await tx.fetchone(Q.lock_binding, key)
            return True
        case ReadKeys():
            return await tx.fetch(Q.running_by_key, key)
        case ReadKeyBuckets(keys=keys):
            return await tx.fetch(Q.key_buckets, key | {"keys": keys})
    raise AssertionError(f"a dispatch plan needs what no read answers: {need!r}")


async def _apply(
    tx: Tx, binding: str, chosen: Plan, waited: float, *, worker: str, lease: float, defer: bool
) -> Dispatched:
    """Save the bucket and claim the jobs a plan chose."""
    if not chosen.complete:
        return Dispatched([], chosen.next_token_at, chosen.batch, contended=chosen.contended)
    if chosen.save is not None:  # nothing reads its result: a store may send it with the next statement
        saved = {"binding": binding, "tokens": chosen.save.tokens, "tokens_at": chosen.save.updated_at}
        await tx.executemany(Q.save_bucket, [saved])
    await save_keys(tx, binding, chosen)
    told = (chosen.next_token_at, chosen.batch, chosen.decided_at, waited, chosen.locked, chosen.contended)
    if not chosen.selected:
        return Dispatched([], *told)
    now = chosen.at
    params = {"ids": list(chosen.selected), "worker": worker, "lease_expires": now + lease, "now": now}
    if chosen.batch:  # the jobs claimed together are one batch, named by its lowest job id
        rows = await tx.fetch(Q.claim_batch, params | {"batch": min(chosen.selected)})
        await emit(tx, [event(now, r.id, r.binding, "started", r.attempt) for r in rows])
        return Dispatched(claims(rows, now), *told)
    later = await tx.claim(params)
    if defer:  # the candidates are locked by this transaction: every selected job is claimed
        return Dispatched([], *told, DeferredClaim(later, now, len(chosen.selected)))
    await tx.flush()
    return Dispatched(claims(later.rows(), now), *told)


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

    def unlocked(self, binding: str) -> bool:
        """Whether the last policy read of ``binding`` needs no lock (a job named by a wake-up may then be
        claimed directly: :meth:`~jobloom.engine.worker.cycle.Cycle.run_direct`)."""
        return binding in self._aging

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


def candidate_reads(
    binding: str, full_keys: list[str], limit: int, *, aging: bool
) -> list[tuple[Query[Any], dict[str, Any] | None]]:
    """The reads of a binding's candidates, without the jobs of ``full_keys``: by priority, and by age
    too with priority aging (merge their rows with :func:`merge_by_age`). A cycle that reads them ahead
    (:func:`~jobloom.engine.coordinator.read_cycle`) reads them as dispatch does."""
    params = {"binding": binding, "full_keys": full_keys, "limit": limit}
    return [(Q.candidates_by_priority, params), *([(Q.candidates_by_age, params)] if aging else [])]


def turn_reads(
    binding: str, full_keys: list[str], turns: TurnRead, *, peek: bool = False, wrap: bool | None = None
) -> list[tuple[Query[Any], dict[str, Any] | None]]:
    """The reads of a binding's candidates under round-robin fairness: key by key from the turn's key on,
    from the first key on (the turn goes round; ``wrap``: only that read, False: not it, None: both),
    and the jobs without a key (``peek``: without claiming them, as a diagnosis reads them)."""
    by_turn, keyless = (Q.peek_by_turn, Q.peek_keyless) if peek else (Q.candidates_by_turn, Q.candidates_keyless)
    params = {"binding": binding, "full_keys": full_keys, "keys": turns.keys, "per_key": turns.per_key,
              "want": turns.want, "weight": turns.weight, "picked": list(turns.picked)}
    first: tuple[Query[Any], dict[str, Any] | None] = (by_turn, params | {"low": "", "strict": 0})
    if wrap:
        return [first]
    reads: list[tuple[Query[Any], dict[str, Any] | None]] = [] if turns.after is not None and wrap is False else [first]
    if turns.after is not None:
        reads.insert(0, (by_turn, params | {"low": turns.after, "strict": 0}))
    # the jobs picked by earlier rounds are among the first read again (not yet claimed): read past them
    reads.append((keyless, {"binding": binding, "limit": turns.keyless + len(turns.picked)}))
    return reads


def _goes_round(need: ReadCandidates, rows: Iterable[CandidateRow | TurnCandidateRow]) -> bool:
    """Whether a read of candidates by turn from the turn's key found fewer keys than it looked for:
    the keys from the first name on are read then (the turn goes round)."""
    turns = need.turns
    if turns is None or turns.after is None:
        return False
    return len({r.concurrency_key for r in rows if r.concurrency_key is not None}) < turns.keys - len(need.full_keys)


def merge_by_age(by_priority: list[CandidateRow], by_age: list[CandidateRow]) -> list[CandidateRow]:
    """Candidates by priority, then those read by age that are not among them (with priority aging, the
    oldest jobs may have aged past higher priorities)."""
    seen = {r.id for r in by_priority}
    return by_priority + [r for r in by_age if r.id not in seen]


async def _candidates(
    tx: Tx, binding: str, need: ReadCandidates
) -> tuple[list[Candidate], list[KeyCountRow] | None, list[PolicyRow] | None, Found | None]:
    """Candidates in priority order (and in age order with priority aging: the oldest jobs may have
    aged past higher priorities), all read in one batch; with ``with_keys``, ``running_by_key`` too;
    with ``with_policy``, the binding's row read after them (on PostgreSQL each statement sees what
    was committed when it began: limits set before any candidate was enqueued are seen). Under turns,
    what the reads by turn found besides comes last (:func:`~jobloom.core.turns.found_by_turn`)."""
    if need.turns is not None:
        queries = turn_reads(binding, need.full_keys, need.turns, wrap=False)
    else:
        queries = candidate_reads(binding, need.full_keys, need.limit, aging=need.aging)
    if need.with_keys:
        queries.append((Q.running_by_key, {"binding": binding}))
    if need.with_policy:
        queries.append((Q.get_binding, {"binding": binding}))
    results = await tx.fetch_batch(queries)
    rows: list[CandidateRow] | list[TurnCandidateRow] = results[0]
    reads = len(queries) - need.with_keys - need.with_policy
    found: Found | None = None
    if need.turns is not None:
        by_turn: list[TurnCandidateRow] = [r for part in results[:reads - 1] for r in part]
        seen: dict[int, CandidateRow | TurnCandidateRow] = {r.id: r for r in by_turn}
        seen.update((r.id, r) for r in results[reads - 1])  # the jobs without a key
        wrapped: list[TurnCandidateRow] | None = None
        if _goes_round(need, seen.values()):  # fewer keys after the turn's than it may start: from the first
            wrapped = await tx.fetch(*turn_reads(binding, need.full_keys, need.turns, wrap=True)[0])
            seen.update((r.id, r) for r in wrapped)
        edge = cut_at(need.turns.keys - len(need.full_keys), need.turns.after, by_turn, wrapped)
        found = found_by_turn(by_turn + (wrapped or []), need.turns.per_key, *edge)
        rows = list(seen.values())  # type: ignore[assignment]
    elif need.aging:
        rows = merge_by_age(rows, results[1])  # type: ignore[arg-type]
    key_rows = results[reads] if need.with_keys else None
    fresh = results[-1] if need.with_policy else None
    return _as_candidates(rows), key_rows, fresh, found


KEY_BUCKET_KEEP = 5.0
"""Seconds a key's rate bucket stays full before its row is deleted: a key whose jobs come and go keeps
its row, and saving its bucket updates the row in place instead of inserting it again."""
KEY_BUCKET_PRUNE_EVERY = 1.0
"""Seconds between a worker process's prunes of a binding's key buckets: a prune reads every bucket of
the binding, so not every dispatch does."""
_pruned: dict[str, float] = {}  # binding: when this process last pruned its key buckets


async def save_keys(tx: Tx, binding: str, chosen: Plan) -> None:
    """Save what a plan changed between keys: the turn, the keys' buckets spent from (but those full again
    at once: when the last of them is full, :attr:`~jobloom.core.dispatch_plan.Plan.key_full_at`), and,
    every :data:`KEY_BUCKET_PRUNE_EVERY` seconds, delete the buckets of keys full for
    :data:`KEY_BUCKET_KEEP` (a missing bucket is a full one: idle keys keep no row)."""
    if chosen.turn is not None:
        await tx.executemany(Q.save_turn, [{"binding": binding, "turn_key": chosen.turn.key,
                                            "turn_used": chosen.turn.used, "key_full_at": chosen.key_full_at}])
    elif chosen.key_full_at is not None:
        await tx.executemany(Q.save_key_full_at, [{"binding": binding, "key_full_at": chosen.key_full_at}])
    rate = chosen.key_rate
    if rate is None:
        return
    at = chosen.at
    last = _pruned.get(binding)
    if last is None or not last <= at < last + KEY_BUCKET_PRUNE_EVERY:  # (a clock set back prunes too)
        _pruned[binding] = at
        await tx.executemany(Q.prune_key_buckets, [{"binding": binding, "now": at, "keep": KEY_BUCKET_KEEP,
                                                    "rate": rate.rate, "burst": rate.burst}])
    if chosen.key_buckets:
        await tx.executemany(Q.save_key_bucket, [
            {"binding": binding, "key": k, "tokens": b.tokens, "tokens_at": b.updated_at,
             "full_at": b.updated_at + max(0.0, rate.burst - b.tokens) / rate.rate}
            for k, b in sorted(chosen.key_buckets.items())])


def _as_candidates(rows: Sequence[CandidateRow | TurnCandidateRow]) -> list[Candidate]:
    """Candidate rows as the decision weighs them."""
    return [Candidate(r.id, r.priority, r.run_at, r.concurrency_key) for r in rows]
