"""The dispatch decision: a pure function of (now, candidates, policy, bucket) and the running counts."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from jobloom.core.types import Bucket, Candidate, Decision, Policy


def effective_priority(candidate: Candidate, now: float, aging: float | None) -> int:
    """``priority + waited // aging``: a job that waits long enough overtakes higher priorities."""
    if not aging:
        return candidate.priority
    waited = now - candidate.ready_at
    return candidate.priority + (int(waited // aging) if waited > 0 else 0)


def refill(bucket: Bucket | None, policy: Policy, now: float) -> Bucket | None:
    """The bucket at ``now``: tokens accrue at ``rate`` per second up to ``burst``, never more.

    With a bucket capped at ``burst`` and one token spent per start, every window of W seconds sees
    at most ``burst + rate * W`` starts, whatever the window: a dispatch that comes late loses the
    time it was late by (when the bucket was full) rather than making it up later. The worker's timer
    aims at the moment the next token is due (:attr:`Decision.next_token_at`) so that little is lost.
    """
    if policy.rate is None:
        return None
    if bucket is None:
        return Bucket(tokens=policy.rate.burst, updated_at=now)
    elapsed = max(0.0, now - bucket.updated_at)
    tokens = min(policy.rate.burst, bucket.tokens + elapsed * policy.rate.rate)
    return Bucket(tokens=tokens, updated_at=max(now, bucket.updated_at))


def token_due(bucket: Bucket | None, policy: Policy, now: float) -> float | None:
    """When the binding's next rate token is there: ``now`` if one is, None without a rate limit."""
    state = refill(bucket, policy, now)
    if state is None or policy.rate is None:
        return None
    return now if state.tokens >= 1 else now + (1 - state.tokens) / policy.rate.rate


def dispatch_time(now: float, bucket: Bucket | None) -> float:
    """The moment a dispatch's starts are recorded at: ``now``, never earlier than the bucket's last
    update. Dispatches of a rate-limited binding are serialized (its row lock), and each one's time is
    at least the previous one's, even when their clocks differ a little (each PostgreSQL client
    estimates the server's clock): the bucket then accounts every start at the time it is recorded at."""
    return now if bucket is None else max(now, bucket.updated_at)


def order(candidates: Iterable[Candidate], now: float, aging: float | None) -> list[Candidate]:
    """Candidates by effective priority (desc), then ready time, then id."""
    return sorted(candidates, key=lambda c: (-effective_priority(c, now, aging), c.ready_at, c.id))


def held(policy: Policy) -> str | None:
    """Why the binding starts nothing whatever its candidates and counts, or None: ``"paused"``
    (``App.pause_binding``; running jobs finish, queued ones wait)."""
    return "paused" if policy.paused else None


def room_for_batch(policy: Policy, running_batches: int) -> int:
    """How many batches a batch performer's binding may start now: one, unless its ``concurrency``
    (which counts batches, not jobs) is reached."""
    if policy.concurrency is not None and running_batches >= policy.concurrency:
        return 0
    return 1


def batch_due(now: float, candidates: Iterable[Candidate], policy: Policy) -> tuple[bool, float | None]:
    """Whether a batch performer's binding hands out a batch now: when ``batch_size`` candidates wait,
    or when the one that became runnable first has waited ``batch_wait`` seconds. If not, the moment
    the wait is over (the worker wakes then). Any other binding: always."""
    if policy.batch_size is None:
        return True, None
    ready = [c.ready_at for c in candidates]
    if not ready:
        return False, None
    if len(ready) >= policy.batch_size:
        return True, None
    fill_by = min(ready) + policy.batch_wait
    return (True, None) if fill_by <= now else (False, fill_by)


def decide(
    now: float,
    candidates: Iterable[Candidate],
    policy: Policy,
    bucket: Bucket | None,
    *,
    running: int = 0,
    running_by_key: Mapping[str, int] | None = None,
    capacity: int | None = None,
) -> Decision:
    """Choose which candidates to start now.

    Greedy in effective-priority order: no free slot (binding concurrency or the asking worker's
    ``capacity``) stops; no rate token stops; a candidate whose key is full is skipped and the next
    one is considered. Each started job takes one token and one slot of its key. A binding that is
    :func:`held` starts nothing (``blocked_by`` says why).
    """
    hold = held(policy)
    if hold is not None:
        return Decision((), bucket, hold)
    per_key = dict(running_by_key or {})
    state = refill(bucket, policy, now)
    slots = math.inf if policy.concurrency is None else policy.concurrency - running
    room = math.inf if capacity is None else capacity
    selected: list[int] = []
    skipped: set[str] = set()
    blocked: str | None = None
    for cand in order(candidates, now, policy.priority_aging):
        if slots <= 0:
            blocked = "slots"
            break
        if room <= 0:
            blocked = "capacity"
            break
        if cand.key is not None and per_key.get(cand.key, 0) >= policy.key_concurrency:
            skipped.add(cand.key)
            continue
        if state is not None and state.tokens < 1:
            blocked = "tokens"
            break
        if state is not None:
            state.tokens -= 1
        if cand.key is not None:
            per_key[cand.key] = per_key.get(cand.key, 0) + 1
        selected.append(cand.id)
        slots -= 1
        room -= 1
    else:
        if skipped and not selected:
            blocked = "keys"
    next_token_at = None
    if blocked == "tokens" and state is not None and policy.rate is not None:
        next_token_at = now + (1 - state.tokens) / policy.rate.rate
    return Decision(tuple(selected), state, blocked, next_token_at, frozenset(skipped))


@dataclass(frozen=True, slots=True)
class WhyNot:
    """Why :func:`decide` does not start one candidate (see :func:`why_not`).

    ``limits``: every limit that holds the candidate back on its own, as :attr:`Decision.blocked_by`
    names them (``"paused"``, ``"slots"``, ``"keys"``, ``"tokens"``), in the order decide checks them.
    ``ahead``: when no limit holds it alone, the candidates decide starts before it (they take the room
    it would need). ``next_token_at``: with ``"tokens"``, when the next token comes. Nothing in
    ``limits`` or ``ahead``: decide starts it."""

    limits: tuple[str, ...] = ()
    ahead: tuple[int, ...] = ()
    next_token_at: float | None = None

    @property
    def starts(self) -> bool:
        """Whether :func:`decide` starts the candidate."""
        return not self.limits and not self.ahead


def why_not(
    now: float,
    candidate: Candidate,
    others: Iterable[Candidate],
    policy: Policy,
    bucket: Bucket | None,
    *,
    running: int = 0,
    running_by_key: Mapping[str, int] | None = None,
    capacity: int | None = None,
) -> WhyNot:
    """Ask :func:`decide` why it does not start ``candidate`` (among ``others``), with the same inputs.

    Every answer is decide's own: the candidate alone is decided, and each limit decide reports
    (``blocked_by``) is noted and then lifted, until decide would start it (at most once per limit).
    A candidate no limit holds back on its own, but that decide does not pick among ``others``, waits
    behind the ones it picks first. ``why_not(...).starts`` is exactly whether ``candidate.id`` is in
    ``decide(now, [candidate, *others], ...).selected``."""
    limits, next_token_at = _limits_alone(now, candidate, policy, bucket, running, running_by_key, capacity)
    if limits:
        return WhyNot(tuple(limits), (), next_token_at)
    pool = [candidate, *(c for c in others if c.id != candidate.id)]
    chosen = decide(now, pool, policy, bucket, running=running, running_by_key=running_by_key, capacity=capacity)
    if candidate.id in chosen.selected:
        return WhyNot()
    ahead = _ahead(now, candidate, pool, chosen, policy, running, running_by_key, capacity)
    return WhyNot((), tuple(c.id for c in ahead), chosen.next_token_at)


def _limits_alone(
    now: float, candidate: Candidate, policy: Policy, bucket: Bucket | None, running: int,
    running_by_key: Mapping[str, int] | None, capacity: int | None,
) -> tuple[list[str], float | None]:
    """Every limit that holds ``candidate`` back on its own, as :func:`decide` reports them (each noted,
    then lifted, until decide would start it), and when the next token comes if tokens are one."""
    limits: list[str] = []
    next_token_at: float | None = None
    by_key = dict(running_by_key or {})
    rules = policy
    for _ in range(5):
        alone = decide(now, [candidate], rules, bucket, running=running, running_by_key=by_key, capacity=capacity)
        if alone.selected:
            break
        reason = alone.blocked_by or "keys"
        limits.append(reason)
        if reason == "paused":
            rules = replace(rules, paused=False)
        elif reason == "slots":
            rules = replace(rules, concurrency=None)
        elif reason == "keys" and candidate.key is not None:
            by_key.pop(candidate.key, None)
        elif reason == "tokens":
            next_token_at = alone.next_token_at
            rules = replace(rules, rate=None)
        else:  # "capacity": no room at all was given
            break
    return limits, next_token_at


def _ahead(
    now: float, candidate: Candidate, pool: list[Candidate], chosen: Decision, policy: Policy, running: int,
    running_by_key: Mapping[str, int] | None, capacity: int | None,
) -> list[Candidate]:
    """The candidates :func:`decide` picks before ``candidate`` that took the room it needed, checked in
    decide's order: a slot, the worker's room, then a slot of its key (only those of its key took it),
    then a token."""
    ordered = order(pool, now, policy.priority_aging)
    place = {c.id: i for i, c in enumerate(ordered)}
    picked = set(chosen.selected)
    ahead = [c for c in ordered if c.id in picked and place[c.id] < place[candidate.id]]
    out_of_slots = policy.concurrency is not None and running + len(ahead) >= policy.concurrency
    out_of_room = capacity is not None and len(ahead) >= capacity
    if not (out_of_slots or out_of_room) and candidate.key is not None:
        mine = [c for c in ahead if c.key == candidate.key]
        if (running_by_key or {}).get(candidate.key, 0) + len(mine) >= policy.key_concurrency:
            ahead = mine
    return ahead
