"""The dispatch decision: a pure function of (now, candidates, policy, bucket) and the running counts."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace

from jobloom.core.options import RateLimit
from jobloom.core.turns import by_turns
from jobloom.core.types import Bucket, Candidate, Decision, Policy, Turn


def effective_priority(candidate: Candidate, now: float, aging: float | None) -> int:
    """``priority + waited // aging``: a job that waits long enough overtakes higher priorities."""
    if not aging:
        return candidate.priority
    waited = now - candidate.ready_at
    return candidate.priority + (int(waited // aging) if waited > 0 else 0)


def refill_rate(bucket: Bucket | None, rate: RateLimit, now: float) -> Bucket:
    """A bucket of ``rate`` at ``now`` (see :func:`refill`); None is a full one."""
    if bucket is None:
        return Bucket(tokens=rate.burst, updated_at=now)
    elapsed = max(0.0, now - bucket.updated_at)
    return Bucket(tokens=min(rate.burst, bucket.tokens + elapsed * rate.rate), updated_at=max(now, bucket.updated_at))


def refill(bucket: Bucket | None, policy: Policy, now: float) -> Bucket | None:
    """The bucket at ``now``: tokens accrue at ``rate`` per second up to ``burst``, never more.

    With a bucket capped at ``burst`` and one token spent per start, every window of W seconds sees
    at most ``burst + rate * W`` starts, whatever the window: a dispatch that comes late loses the
    time it was late by (when the bucket was full) rather than making it up later. The worker's timer
    aims at the moment the next token is due (:attr:`Decision.next_token_at`) so that little is lost.
    """
    return None if policy.rate is None else refill_rate(bucket, policy.rate, now)


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
    turn: Turn | None = None,
    key_buckets: Mapping[str, Bucket] | None = None,
    unread: Collection[str] = (),
    edge: tuple[str, bool] | None = None,
) -> Decision:
    """Choose which candidates to start now.

    Greedy in effective-priority order: no free slot (binding concurrency or the asking worker's
    ``capacity``) stops; no rate token stops; a candidate whose key is full, or out of its own rate
    tokens (``key_rate``; ``key_buckets`` as saved, a missing one is full), is skipped and the next one
    is considered. Each started job takes one token, one slot of its key and one token of its key. A
    binding that is :func:`held` starts nothing (``blocked_by`` says why).

    Under round-robin fairness the keys take turns instead (:func:`jobloom.core.turns.by_turns`, from
    ``turn``, the turn as saved); the same limits apply to each start. ``unread``: keys that may have
    more jobs than the candidates hold; when the turn comes to one whose candidates are all started,
    the hand-out stops there (``Decision.unread``: read on from the turn). ``edge``: the last key read
    when keys after it were left unread, and whether its read went round (:attr:`~jobloom.core.turns.Found.edge`);
    the hand-out stops when the turn would pass it (as for ``unread``).
    """
    hold = held(policy)
    if hold is not None:
        return Decision((), bucket, hold)
    room = Room(policy, now, refill(bucket, policy, now), dict(running_by_key or {}), dict(key_buckets or {}),
                math.inf if policy.concurrency is None else policy.concurrency - running,
                math.inf if capacity is None else capacity)
    after: Turn | None = None
    short = False
    if policy.fairness is not None:
        after, short = by_turns(candidates, room, turn or Turn(), unread, edge)
    else:
        for cand in order(candidates, now, policy.priority_aging):
            if room.step(cand) == "stop":
                break
    return room.decision(after, short)


@dataclass(slots=True)
class Room:
    """What is left to start as :func:`decide` hands out: slots, the worker's room, the binding's tokens
    (``state``), the running count and the bucket of each key; what started and what was skipped."""

    policy: Policy
    now: float
    state: Bucket | None
    per_key: dict[str, int]
    key_buckets: dict[str, Bucket]
    slots: float
    room: float
    selected: list[int] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # key: "keys" (full) or "key_tokens"
    spent: dict[str, Bucket] = field(default_factory=dict)
    started_keys: set[str] = field(default_factory=set)
    blocked: str | None = None

    def key_hold(self, key: str | None) -> str | None:
        """Why a job of ``key`` cannot start now whatever the other limits: ``"keys"`` (its running
        jobs fill ``key_concurrency``), ``"key_tokens"`` (its bucket is empty), or None."""
        if key is None:
            return None
        if key in self.skipped:
            return self.skipped[key]
        if self.per_key.get(key, 0) >= self.policy.key_concurrency:
            return "keys"
        tokens = self.key_bucket(key)
        if tokens is not None and tokens.tokens < 1:
            return "key_tokens"
        return None

    def key_bucket(self, key: str) -> Bucket | None:
        """The bucket of ``key`` now (None without a key rate)."""
        rate = self.policy.key_rate
        if rate is None:
            return None
        if key not in self.spent:
            self.spent[key] = refill_rate(self.key_buckets.get(key), rate, self.now)
        return self.spent[key]

    def step(self, cand: Candidate) -> str:
        """Start ``cand`` if the limits allow: ``"started"``, ``"skipped"`` (its key holds it back, noted)
        or ``"stop"`` (no slot, no room or no binding token: ``blocked`` says which)."""
        if self.slots <= 0:
            self.blocked = "slots"
            return "stop"
        if self.room <= 0:
            self.blocked = "capacity"
            return "stop"
        why = self.key_hold(cand.key)
        if why is not None:
            assert cand.key is not None
            self.skipped[cand.key] = why
            return "skipped"
        if self.state is not None and self.state.tokens < 1:
            self.blocked = "tokens"
            return "stop"
        self.start(cand)
        return "started"

    def start(self, cand: Candidate) -> None:
        """Start ``cand``: one slot, one token, one slot and one token of its key."""
        if self.state is not None:
            self.state.tokens -= 1
        if cand.key is not None:
            self.per_key[cand.key] = self.per_key.get(cand.key, 0) + 1
            self.started_keys.add(cand.key)
            key_state = self.key_bucket(cand.key)
            if key_state is not None:
                key_state.tokens -= 1
        self.selected.append(cand.id)
        self.slots -= 1
        self.room -= 1

    def decision(self, turn: Turn | None, unread: bool = False) -> Decision:
        """The decision once the hand-out is over (``unread``: it stopped at a key whose jobs were not all read)."""
        blocked, due = self.blocked, None
        if blocked is None and self.skipped and not self.selected and not unread:
            blocked = "keys" if "keys" in self.skipped.values() else "key_tokens"
        if blocked == "tokens" and self.state is not None and self.policy.rate is not None:
            due = self.now + (1 - self.state.tokens) / self.policy.rate.rate
        elif self.policy.key_rate is not None:
            short = [self.spent[k].tokens for k, why in self.skipped.items() if why == "key_tokens"]
            if short:
                due = self.now + (1 - max(short)) / self.policy.key_rate.rate
        spent = {k: b for k, b in self.spent.items() if k in self.started_keys}
        return Decision(tuple(self.selected), self.state, blocked, due, frozenset(self.skipped), turn, spent, unread)


@dataclass(frozen=True, slots=True)
class WhyNot:
    """Why :func:`decide` does not start one candidate (see :func:`why_not`).

    ``limits``: every limit that holds the candidate back on its own, as :attr:`Decision.blocked_by`
    names them (``"paused"``, ``"slots"``, ``"keys"``, ``"key_tokens"``, ``"tokens"``), in the order
    decide checks them. ``ahead``: when no limit holds it alone, the candidates decide starts before it
    (they take the room it would need); ``turn``: they start first because their keys' turns come
    before its key's (round-robin fairness). ``next_token_at``: with ``"tokens"`` or ``"key_tokens"``,
    when the next token comes. Nothing in ``limits`` or ``ahead``: decide starts it."""

    limits: tuple[str, ...] = ()
    ahead: tuple[int, ...] = ()
    next_token_at: float | None = None
    turn: bool = False

    @property
    def starts(self) -> bool:
        """Whether :func:`decide` starts the candidate."""
        return not self.limits and not self.ahead


@dataclass(frozen=True, slots=True)
class Inputs:
    """What :func:`decide` is given besides the candidates (see its parameters)."""

    now: float
    policy: Policy
    bucket: Bucket | None
    running: int = 0
    running_by_key: Mapping[str, int] | None = None
    capacity: int | None = None
    turn: Turn | None = None
    key_buckets: Mapping[str, Bucket] | None = None

    def decide(self, candidates: Iterable[Candidate], policy: Policy | None = None,
               running_by_key: Mapping[str, int] | None = None) -> Decision:
        """:func:`decide` on ``candidates`` with these inputs (``policy``, ``running_by_key``: instead)."""
        return decide(self.now, candidates, policy or self.policy, self.bucket, running=self.running,
                      running_by_key=self.running_by_key if running_by_key is None else running_by_key,
                      capacity=self.capacity, turn=self.turn, key_buckets=self.key_buckets)


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
    turn: Turn | None = None,
    key_buckets: Mapping[str, Bucket] | None = None,
) -> WhyNot:
    """Ask :func:`decide` why it does not start ``candidate`` (among ``others``), with the same inputs.

    Every answer is decide's own: the candidate alone is decided, and each limit decide reports
    (``blocked_by``) is noted and then lifted, until decide would start it (at most once per limit).
    A candidate no limit holds back on its own, but that decide does not pick among ``others``, waits
    behind the ones it picks first. ``why_not(...).starts`` is exactly whether ``candidate.id`` is in
    ``decide(now, [candidate, *others], ...).selected``."""
    given = Inputs(now, policy, bucket, running, running_by_key, capacity, turn, key_buckets)
    limits, next_token_at = _limits_alone(given, candidate)
    if limits:
        return WhyNot(tuple(limits), (), next_token_at)
    pool = [candidate, *(c for c in others if c.id != candidate.id)]
    chosen = given.decide(pool)
    if candidate.id in chosen.selected:
        return WhyNot()
    if policy.fairness is not None:  # every job started is of a key whose turn came first
        return WhyNot((), chosen.selected, chosen.next_token_at, turn=True)
    ahead = _ahead(now, candidate, pool, chosen, policy, running, running_by_key, capacity)
    return WhyNot((), tuple(c.id for c in ahead), chosen.next_token_at)


def _limits_alone(given: Inputs, candidate: Candidate) -> tuple[list[str], float | None]:
    """Every limit that holds ``candidate`` back on its own, as :func:`decide` reports them (each noted,
    then lifted, until decide would start it), and when the next token comes if tokens are one."""
    limits: list[str] = []
    next_token_at: float | None = None
    by_key = dict(given.running_by_key or {})
    rules = given.policy
    for _ in range(6):
        alone = given.decide([candidate], rules, by_key)
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
        elif reason in ("tokens", "key_tokens"):
            next_token_at = alone.next_token_at if next_token_at is None else next_token_at
            rules = replace(rules, rate=None) if reason == "tokens" else replace(rules, key_rate=None)
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
