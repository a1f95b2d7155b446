"""A reference model of the dispatch decision, written from the dispatch rules alone
(docs/explanation/architecture.md, "Dispatch").

It deliberately shares nothing with ``jobloom.decide`` beyond the input value types: no sort key,
no shared helper. It simulates the greedy hand-out one step at a time: scan the remaining
candidates for the best one, then apply the rules in their order (no free slot
→ stop; no rate token → stop; key full → skip and go on). Arithmetic on priorities and tokens is
exact (``Fraction``), so the model states what the decision should be without float rounding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from jobloom.core.types import Bucket, Candidate, Policy


@dataclass(frozen=True)
class ModelDecision:
    """The ids handed out, the tokens left (None without a rate limit), and what stopped it."""

    selected: tuple[int, ...]
    tokens: Fraction | None
    stopped_by: str | None


def aged_priority(cand: Candidate, now: float, aging: float | None) -> int:
    """``priority + floor(waited / aging)``, waited = now - ready_at; no aging means the plain priority."""
    if aging is None:
        return cand.priority
    waited = Fraction(now) - Fraction(cand.ready_at)
    return cand.priority + math.floor(waited / Fraction(aging))


def goes_first(a: Candidate, b: Candidate, now: float, aging: float | None) -> bool:
    """Whether ``a`` goes before ``b``: higher aged priority, then earlier ready_at, then lower id."""
    pa, pb = aged_priority(a, now, aging), aged_priority(b, now, aging)
    if pa != pb:
        return pa > pb
    if a.ready_at != b.ready_at:
        return a.ready_at < b.ready_at
    return a.id < b.id


def tokens_now(bucket: Bucket | None, policy: Policy, now: float) -> Fraction | None:
    """Tokens at ``now``: a new bucket is full (``burst``); an old one gains ``rate``/s, never above
    ``burst`` (no allowance for late dispatches: the window rule below admits none)."""
    if policy.rate is None:
        return None
    burst = Fraction(policy.rate.burst)
    if bucket is None:
        return burst
    elapsed = Fraction(now) - Fraction(bucket.updated_at)
    if elapsed < 0:
        elapsed = Fraction(0)
    return min(burst, Fraction(bucket.tokens) + elapsed * Fraction(policy.rate.rate))


def most_starts_in_a_window(starts: Sequence[float], length: Fraction) -> int:
    """The most starts that any window ``[a, a + length]`` holds, over every real ``a``.

    Sliding a window right until its left edge meets the first start inside it loses no start, so
    the windows that begin at a start are the only ones to count (brute force, no cleverness)."""
    times = [Fraction(t) for t in starts]
    return max((sum(1 for u in times if t <= u <= t + length) for t in times), default=0)


def allowed_in_a_window(policy: Policy, length: Fraction) -> Fraction:
    """The rate limit's promise: at most ``burst + rate * length`` starts in any window of that length."""
    assert policy.rate is not None
    return Fraction(policy.rate.burst) + Fraction(policy.rate.rate) * length


def model_history(policy: Policy, attempts: Sequence[tuple[float, int, int | None]]) -> list[float]:
    """Start times of a series of dispatches ``(now, candidates, capacity)`` on one rate-limited binding,
    serialized as its row lock serializes them. A dispatch whose clock reads earlier than the previous
    dispatch's time is taken to happen at that time (time never goes back for the bucket)."""
    assert policy.rate is not None
    tokens: Fraction | None = None
    last: Fraction | None = None
    starts: list[float] = []
    for now, waiting, capacity in attempts:
        at = Fraction(now) if last is None else max(Fraction(now), last)
        if tokens is None:
            tokens = Fraction(policy.rate.burst)
        else:
            assert last is not None
            tokens = min(Fraction(policy.rate.burst), tokens + (at - last) * Fraction(policy.rate.rate))
        last = at
        n = 0
        while n < waiting and (capacity is None or n < capacity) and tokens >= 1:
            tokens -= 1
            n += 1
        starts += [float(at)] * n
    return starts


def model_decide(
    now: float,
    candidates: Sequence[Candidate],
    policy: Policy,
    bucket: Bucket | None,
    *,
    running: int,
    running_by_key: Mapping[str, int],
    capacity: int | None,
) -> ModelDecision:
    """Hand out candidates greedily, one step at a time, as the rules say."""
    tokens = tokens_now(bucket, policy, now)
    held = dict(running_by_key)
    pending = list(candidates)
    selected: list[int] = []
    stopped_by: str | None = None
    while pending:
        best = pending[0]
        for cand in pending[1:]:
            if goes_first(cand, best, now, policy.priority_aging):
                best = cand
        pending.remove(best)

        if policy.concurrency is not None and running + len(selected) >= policy.concurrency:
            stopped_by = "slots"
            break
        if capacity is not None and len(selected) >= capacity:
            stopped_by = "capacity"
            break
        if tokens is not None and tokens < 1:
            stopped_by = "tokens"
            break
        if best.key is not None and held.get(best.key, 0) >= policy.key_concurrency:
            continue

        selected.append(best.id)
        if tokens is not None:
            tokens -= 1
        if best.key is not None:
            held[best.key] = held.get(best.key, 0) + 1
    return ModelDecision(tuple(selected), tokens, stopped_by)


# ---------------------------------------------------------------- limits between keys: turns, a rate per key
#
# Written from the rules of docs/how-to/fairness.md alone. The keys sit on a ring in the order of their
# names (code points), the jobs without a key as one more seat after the last name. The turn as saved
# names the seat that started last and how many starts in a row it had; the next start is that seat's
# again while its weight allows, else the next seat clockwise that has a job that may start. A seat whose
# key is full or out of its own rate tokens is passed over for the rest of the decision.


@dataclass(frozen=True)
class ModelTurnDecision:
    """The ids handed out in order, the tokens left per key that started, the seat and count that started last."""

    selected: tuple[int, ...]
    tokens: Fraction | None
    key_tokens: dict[str, Fraction]
    last: tuple[str | None, int]
    stopped_by: str | None


def seat(key: str | None) -> tuple[int, str]:
    """A key's place on the ring: names by code point, then the keyless seat."""
    return (1, "") if key is None else (0, key)


def key_tokens_now(saved: tuple[float, float] | None, policy: Policy, now: float) -> Fraction | None:
    """A key's tokens at ``now`` (None without a key rate): no saved bucket is a full one."""
    if policy.key_rate is None:
        return None
    burst = Fraction(policy.key_rate.burst)
    if saved is None:
        return burst
    tokens, at = saved
    elapsed = max(Fraction(0), Fraction(now) - Fraction(at))
    return min(burst, Fraction(tokens) + elapsed * Fraction(policy.key_rate.rate))


def clockwise(last: tuple[str | None, int], seats: list[str | None], policy: Policy) -> str | None:
    """The seat whose turn is next among ``seats`` (each has a job), after ``last``."""
    key, used = last
    weights = dict(policy.key_weights)
    if used > 0 and key is not None and key in seats and used < weights.get(key, 1):
        return key
    ring = sorted(seats, key=seat)
    if used == 0 or key is None:  # nothing started yet, or the keyless seat just had its turn: from the top
        return ring[0]
    later = [s for s in ring if seat(s) > seat(key)]
    return later[0] if later else ring[0]


def model_decide_turns(
    now: float,
    candidates: Sequence[Candidate],
    policy: Policy,
    bucket: Bucket | None,
    *,
    running: int,
    running_by_key: Mapping[str, int],
    capacity: int | None,
    last: tuple[str | None, int],
    key_buckets: Mapping[str, tuple[float, float]],
) -> ModelTurnDecision:
    """Hand out candidates seat by seat, one start at a time, as the rules say."""
    tokens = tokens_now(bucket, policy, now)
    held = dict(running_by_key)
    mine: dict[str, Fraction] = {}
    waiting: dict[str | None, list[Candidate]] = {}
    for c in candidates:
        waiting.setdefault(c.key, []).append(c)
    selected: list[int] = []
    stopped_by: str | None = None
    while waiting:
        k = clockwise(last, list(waiting), policy)
        jobs = waiting[k]
        best = jobs[0]
        for c in jobs[1:]:
            if (c.priority, -c.ready_at, -c.id) > (best.priority, -best.ready_at, -best.id):
                best = c
        if policy.concurrency is not None and running + len(selected) >= policy.concurrency:
            stopped_by = "slots"
            break
        if capacity is not None and len(selected) >= capacity:
            stopped_by = "capacity"
            break
        if k is not None:
            if k not in mine:
                have = key_tokens_now(key_buckets.get(k), policy, now)
                if have is not None:
                    mine[k] = have
            if held.get(k, 0) >= policy.key_concurrency or (k in mine and mine[k] < 1):
                del waiting[k]  # passed over: its turn goes to the next seat
                continue
        if tokens is not None and tokens < 1:
            stopped_by = "tokens"
            break
        selected.append(best.id)
        jobs.remove(best)
        if not jobs:
            del waiting[k]
        if tokens is not None:
            tokens -= 1
        if k is not None:
            held[k] = held.get(k, 0) + 1
            if k in mine:
                mine[k] -= 1
        last = (k, last[1] + 1) if last[0] == k and last[1] > 0 else (k, 1)
    started = {c.key for c in candidates if c.id in selected and c.key is not None}
    return ModelTurnDecision(tuple(selected), tokens, {k: v for k, v in mine.items() if k in started}, last,
                             stopped_by)
