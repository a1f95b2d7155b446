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
