"""The pure dispatch decision: one example per rule, then properties against a reference model."""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, replace
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobloom.core.decide import decide, dispatch_time, effective_priority, order, refill
from jobloom.core.options import RateLimit
from jobloom.core.types import Bucket, Candidate, Decision, Policy

from .reference_model import (
    ModelDecision,
    allowed_in_a_window,
    model_decide,
    model_history,
    most_starts_in_a_window,
    tokens_now,
)

NOW = 10_000.0
STRICT = Policy(priority_aging=None)


Spec = tuple[int, int] | tuple[int, int, str | None] | tuple[int, int, str | None, float]


def cands(*specs: Spec) -> list[Candidate]:
    """``(id, priority[, key[, waited]])`` → candidates ready ``waited`` seconds before NOW (default 0)."""
    out = []
    for spec in specs:
        cid, prio = spec[0], spec[1]
        key = spec[2] if len(spec) > 2 else None
        waited = spec[3] if len(spec) > 3 else 0.0
        out.append(Candidate(id=cid, priority=prio, ready_at=NOW - waited, key=key))
    return out


# ---------------------------------------------------------------- no limits


def test_no_limits_hands_out_everything_in_priority_order() -> None:
    d = decide(NOW, cands((1, 0), (2, 5), (3, -1), (4, 2)), STRICT, None)
    assert d.selected == (2, 4, 1, 3)
    assert d.blocked_by is None
    assert d.bucket is None
    assert d.next_token_at is None
    assert d.skipped_keys == frozenset()


def test_no_candidates_selects_nothing_and_is_not_blocked() -> None:
    d = decide(NOW, [], Policy(concurrency=2, rate=RateLimit(1.0, 2.0)), None)
    assert d.selected == ()
    assert d.blocked_by is None
    assert d.next_token_at is None
    assert d.bucket == Bucket(tokens=2.0, updated_at=NOW)


# ---------------------------------------------------------------- slots and capacity


def test_binding_slots_stop_the_hand_out() -> None:
    policy = Policy(concurrency=3, priority_aging=None)
    d = decide(NOW, cands((1, 5), (2, 4), (3, 3), (4, 2)), policy, None, running=1)
    assert d.selected == (1, 2)
    assert d.blocked_by == "slots"


def test_no_free_slot_selects_nothing() -> None:
    policy = Policy(concurrency=2, priority_aging=None)
    assert decide(NOW, cands((1, 0)), policy, None, running=2).selected == ()
    assert decide(NOW, cands((1, 0)), policy, None, running=2).blocked_by == "slots"
    # the limit was lowered below what is running: still nothing, not a negative count
    over = decide(NOW, cands((1, 0), (2, 0)), policy, None, running=5)
    assert over.selected == ()
    assert over.blocked_by == "slots"


def test_exactly_enough_slots_is_not_reported_as_blocked() -> None:
    policy = Policy(concurrency=2, priority_aging=None)
    d = decide(NOW, cands((1, 1), (2, 0)), policy, None, running=0)
    assert d.selected == (1, 2)
    assert d.blocked_by is None


def test_worker_capacity_stops_the_hand_out() -> None:
    d = decide(NOW, cands((1, 3), (2, 2), (3, 1)), STRICT, None, capacity=2)
    assert d.selected == (1, 2)
    assert d.blocked_by == "capacity"


def test_zero_capacity_selects_nothing() -> None:
    d = decide(NOW, cands((1, 3)), STRICT, None, capacity=0)
    assert d.selected == ()
    assert d.blocked_by == "capacity"


def test_the_smaller_of_slots_and_capacity_wins() -> None:
    many = cands(*[(i, 0) for i in range(1, 10)])
    by_slots = decide(NOW, many, Policy(concurrency=5, priority_aging=None), None, running=3, capacity=4)
    assert by_slots.selected == (1, 2)
    assert by_slots.blocked_by == "slots"
    by_capacity = decide(NOW, many, Policy(concurrency=5, priority_aging=None), None, running=0, capacity=3)
    assert by_capacity.selected == (1, 2, 3)
    assert by_capacity.blocked_by == "capacity"


# ---------------------------------------------------------------- rate tokens


def test_first_use_of_a_bucket_is_full_at_burst() -> None:
    policy = Policy(rate=RateLimit(rate=1.0, burst=3.0), priority_aging=None)
    d = decide(NOW, cands((1, 0), (2, 0), (3, 0), (4, 0), (5, 0)), policy, None)
    assert d.selected == (1, 2, 3)
    assert d.bucket == Bucket(tokens=0.0, updated_at=NOW)
    assert d.blocked_by == "tokens"
    assert d.next_token_at == pytest.approx(NOW + 1.0)


def test_no_token_selects_nothing_and_says_when_the_next_one_comes() -> None:
    policy = Policy(rate=RateLimit(rate=2.0, burst=1.0), priority_aging=None)
    d = decide(NOW, cands((1, 0)), policy, Bucket(tokens=0.5, updated_at=NOW))
    assert d.selected == ()
    assert d.blocked_by == "tokens"
    assert d.next_token_at == pytest.approx(NOW + 0.25)  # 0.5 token missing at 2 tokens/s
    assert d.bucket is not None
    assert d.bucket.tokens == pytest.approx(0.5)


def test_fractional_tokens_leave_the_remainder_in_the_bucket() -> None:
    policy = Policy(rate=RateLimit(rate=4.0, burst=5.0), priority_aging=None)
    d = decide(NOW, cands((1, 0), (2, 0), (3, 0)), policy, Bucket(tokens=2.5, updated_at=NOW))
    assert d.selected == (1, 2)
    assert d.bucket is not None
    assert d.bucket.tokens == pytest.approx(0.5)
    assert d.next_token_at == pytest.approx(NOW + 0.5 / 4.0)


def test_tokens_refill_at_rate_since_the_bucket_was_saved() -> None:
    policy = Policy(rate=RateLimit(rate=2.0, burst=5.0), priority_aging=None)
    d = decide(NOW, cands(*[(i, 0) for i in range(1, 8)]), policy, Bucket(tokens=0.0, updated_at=NOW - 1.5))
    assert d.selected == (1, 2, 3)  # 1.5 s * 2/s = 3 tokens
    assert d.bucket == Bucket(tokens=0.0, updated_at=NOW)


def test_refill_is_capped_at_burst() -> None:
    policy = Policy(rate=RateLimit(rate=10.0, burst=4.0), priority_aging=None)
    d = decide(NOW, cands(*[(i, 0) for i in range(1, 10)]), policy, Bucket(tokens=1.0, updated_at=NOW - 100))
    assert d.selected == (1, 2, 3, 4)  # never more than burst at one instant
    assert d.bucket == Bucket(tokens=0.0, updated_at=NOW)
    idle = refill(Bucket(tokens=1.0, updated_at=NOW - 100), policy, NOW)
    assert idle == Bucket(tokens=4.0, updated_at=NOW)


def test_a_burst_after_idling_is_followed_by_the_rate_not_by_one_more() -> None:
    # "4/4s burst 4": after an idle period 4 start at once, and the fifth waits a whole token (1 s)
    policy = Policy(rate=RateLimit.parse("4/4s burst 4"), priority_aging=None)
    first = decide(NOW, cands(*[(i, 0) for i in range(1, 9)]), policy, Bucket(tokens=0.0, updated_at=NOW - 60))
    assert first.selected == (1, 2, 3, 4)
    assert first.next_token_at == pytest.approx(NOW + 1.0)
    early = decide(NOW + 0.65, cands(*[(i, 0) for i in range(5, 9)]), policy, first.bucket)
    assert early.selected == ()
    assert early.next_token_at == pytest.approx(NOW + 1.0)
    due = decide(NOW + 1.0, cands(*[(i, 0) for i in range(5, 9)]), policy, early.bucket)
    assert due.selected == (5,)


def test_a_late_dispatch_loses_the_time_it_was_late_by() -> None:
    policy = Policy(rate=RateLimit(rate=20.0, burst=1.0), priority_aging=None)
    # the token was due at NOW - 0.02 (the bucket was full since): the next one is a whole period away
    d = decide(NOW, cands((1, 0), (2, 0)), policy, Bucket(tokens=0.0, updated_at=NOW - 0.07))
    assert d.selected == (1,)
    assert d.next_token_at == pytest.approx(NOW + 0.05)


def test_dispatching_at_each_next_token_at_delivers_the_full_rate() -> None:
    policy = Policy(rate=RateLimit(rate=50.0, burst=1.0), priority_aging=None)
    bucket, at, starts, wakeups = None, NOW, 0, 0
    while at <= NOW + 5.0 + 1e-6:  # (1e-6: the float sum of 250 periods)
        d = decide(at, cands(*[(i, 0) for i in range(1, 4)]), policy, bucket)
        starts += len(d.selected)
        wakeups += 1
        bucket = d.bucket
        assert d.next_token_at is not None and d.next_token_at > at
        at = d.next_token_at
    assert starts == 1 + 250  # the first token, then 50 per second for 5 s
    assert wakeups == starts  # a dispatch at next_token_at always finds its token


def test_dispatch_time_never_goes_back_before_the_bucket() -> None:
    assert dispatch_time(NOW, None) == NOW
    assert dispatch_time(NOW, Bucket(tokens=0.0, updated_at=NOW - 1)) == NOW
    # a worker whose clock estimate runs a little behind the last dispatch's records its starts at that
    assert dispatch_time(NOW, Bucket(tokens=0.0, updated_at=NOW + 0.003)) == NOW + 0.003


def test_a_bucket_above_a_lowered_burst_is_cut_down_to_it() -> None:
    policy = Policy(rate=RateLimit(rate=1.0, burst=2.0), priority_aging=None)
    d = decide(NOW, cands(*[(i, 0) for i in range(1, 10)]), policy, Bucket(tokens=50.0, updated_at=NOW - 1))
    assert d.selected == (1, 2)


def test_refill_without_a_rate_limit_has_no_bucket() -> None:
    assert refill(Bucket(tokens=3.0, updated_at=NOW), Policy(), NOW) is None
    assert refill(None, Policy(rate=RateLimit(5.0, 7.0)), NOW) == Bucket(tokens=7.0, updated_at=NOW)


def test_refill_never_goes_back_in_time() -> None:
    policy = Policy(rate=RateLimit(rate=1.0, burst=10.0))
    later = refill(Bucket(tokens=2.0, updated_at=NOW + 5), policy, NOW)
    assert later == Bucket(tokens=2.0, updated_at=NOW + 5)


def test_decide_does_not_mutate_its_inputs() -> None:
    policy = Policy(concurrency=5, rate=RateLimit(rate=1.0, burst=3.0), priority_aging=None)
    bucket = Bucket(tokens=3.0, updated_at=NOW)
    by_key = {"a": 0}
    d = decide(NOW, cands((1, 0, "a"), (2, 0, "a"), (3, 0)), policy, bucket, running_by_key=by_key)
    assert d.selected == (1, 3)
    assert bucket == Bucket(tokens=3.0, updated_at=NOW)
    assert by_key == {"a": 0}
    assert d.bucket is not bucket


# ---------------------------------------------------------------- concurrency keys


def test_a_full_key_is_skipped_and_other_keys_go_on() -> None:
    policy = Policy(key_concurrency=1, priority_aging=None)
    d = decide(
        NOW,
        cands((1, 9, "a"), (2, 8, "a"), (3, 7, "b"), (4, 6, None), (5, 5, "b"), (6, 4, "c")),
        policy,
        None,
        running_by_key={"a": 1},
    )
    # a is full already; b gets one slot (3), so 5 is skipped: it counts the job just dispatched
    assert d.selected == (3, 4, 6)
    assert d.skipped_keys == frozenset({"a", "b"})
    assert d.blocked_by is None


def test_keys_never_block_keyless_jobs() -> None:
    policy = Policy(key_concurrency=1, priority_aging=None)
    d = decide(
        NOW,
        cands((1, 9, "a"), (2, 9, "b"), (3, 1, None), (4, 0, None)),
        policy,
        None,
        running_by_key={"a": 1, "b": 3},
    )
    assert d.selected == (3, 4)
    assert d.skipped_keys == frozenset({"a", "b"})


def test_key_concurrency_counts_jobs_dispatched_in_the_same_decision() -> None:
    policy = Policy(key_concurrency=3, priority_aging=None)
    d = decide(
        NOW,
        cands((1, 0, "t"), (2, 0, "t"), (3, 0, "t"), (4, 0, "t"), (5, 0, "u")),
        policy,
        None,
        running_by_key={"t": 1},
    )
    assert d.selected == (1, 2, 5)
    assert d.skipped_keys == frozenset({"t"})


def test_a_skipped_job_takes_neither_token_nor_slot() -> None:
    rate = RateLimit(rate=1.0, burst=1.0)
    policy = Policy(concurrency=1, key_concurrency=1, rate=rate, priority_aging=None)
    d = decide(NOW, cands((1, 9, "a"), (2, 0, "b")), policy, None, running_by_key={"a": 1})
    assert d.selected == (2,)
    assert d.bucket is not None
    assert d.bucket.tokens == pytest.approx(0.0)


def test_only_full_keys_reports_keys() -> None:
    policy = Policy(key_concurrency=2, priority_aging=None)
    d = decide(NOW, cands((1, 0, "a"), (2, 0, "b")), policy, None, running_by_key={"a": 2, "b": 2})
    assert d.selected == ()
    assert d.blocked_by == "keys"
    assert d.skipped_keys == frozenset({"a", "b"})


def test_tokens_run_out_after_a_skip_reports_tokens() -> None:
    policy = Policy(rate=RateLimit(rate=0.5, burst=1.0), priority_aging=None)
    d = decide(
        NOW, cands((1, 9, "a"), (2, 5), (3, 4)), policy, Bucket(0.0, NOW - 2), running_by_key={"a": 1}
    )
    assert d.selected == (2,)
    assert d.blocked_by == "tokens"
    assert d.skipped_keys == frozenset({"a"})
    assert d.next_token_at == pytest.approx(NOW + 2.0)


# ---------------------------------------------------------------- ordering and aging


def test_ties_break_by_ready_at_then_id() -> None:
    same = [
        Candidate(id=7, priority=1, ready_at=NOW - 5),
        Candidate(id=3, priority=1, ready_at=NOW - 1),
        Candidate(id=9, priority=1, ready_at=NOW - 5),
        Candidate(id=1, priority=1, ready_at=NOW - 1),
        Candidate(id=2, priority=2, ready_at=NOW),
    ]
    for seed in range(5):
        shuffled = list(same)
        random.Random(seed).shuffle(shuffled)
        assert decide(NOW, shuffled, STRICT, None).selected == (2, 7, 9, 1, 3)
        assert [c.id for c in order(shuffled, NOW, None)] == [2, 7, 9, 1, 3]


def test_effective_priority_adds_one_per_full_aging_period() -> None:
    c = Candidate(id=1, priority=2, ready_at=NOW - 119.75)
    assert effective_priority(c, NOW, 60.0) == 3
    assert effective_priority(replace(c, ready_at=NOW - 120.0), NOW, 60.0) == 4
    assert effective_priority(replace(c, ready_at=NOW - 59.5), NOW, 60.0) == 2
    assert effective_priority(replace(c, ready_at=NOW), NOW, 60.0) == 2
    assert effective_priority(replace(c, ready_at=NOW - 10_000), NOW, None) == 2


def test_aging_lifts_an_old_low_priority_job_exactly_at_the_boundary() -> None:
    policy = Policy(priority_aging=60.0)
    new_high = Candidate(id=1, priority=3, ready_at=NOW)
    # waited 179.75 s: 0 + 2 < 3, the new high-priority job goes first
    not_yet = Candidate(id=2, priority=0, ready_at=NOW - 179.75)
    assert decide(NOW, [new_high, not_yet], policy, None).selected == (1, 2)
    # waited 180 s: 0 + 3 ties with 3, and the older one goes first
    tied = Candidate(id=2, priority=0, ready_at=NOW - 180.0)
    assert decide(NOW, [new_high, tied], policy, None).selected == (2, 1)
    # with capacity for one, only the lifted job runs
    assert decide(NOW, [new_high, tied], policy, None, capacity=1).selected == (2,)


def test_aging_lifts_strictly_above_not_just_to_a_tie() -> None:
    policy = Policy(priority_aging=10.0)
    # both waited; the low one has waited long enough to go strictly above the high one
    high = Candidate(id=1, priority=5, ready_at=NOW - 5)  # 5 + 0
    low = Candidate(id=2, priority=0, ready_at=NOW - 60)  # 0 + 6
    low_short = Candidate(id=3, priority=0, ready_at=NOW - 49.5)  # 0 + 4
    assert decide(NOW, [high, low, low_short], policy, None).selected == (2, 1, 3)


def test_no_aging_is_strict_priority() -> None:
    ancient = Candidate(id=1, priority=0, ready_at=NOW - 1_000_000)
    fresh = Candidate(id=2, priority=1, ready_at=NOW)
    assert decide(NOW, [ancient, fresh], STRICT, None).selected == (2, 1)
    assert decide(NOW, [ancient, fresh], Policy(priority_aging=60.0), None).selected == (1, 2)


# ---------------------------------------------------------------- properties against the reference model

KEYS = ("a", "b", "c")
RATES = (0.25, 0.5, 1.0, 2.0, 2.5, 10.0)  # exact in binary, like every time below: no rounding at 1 token
AGINGS = (None, 0.5, 1.0, 7.0, 30.0, 60.0, 90.25)


@dataclass(frozen=True)
class Scenario:
    now: float
    candidates: list[Candidate]
    policy: Policy
    bucket: Bucket | None
    running: int
    running_by_key: dict[str, int]
    capacity: int | None

    def run(self) -> tuple[Decision, ModelDecision]:
        args = (self.now, self.candidates, self.policy, self.bucket)
        got = decide(*args, running=self.running, running_by_key=self.running_by_key, capacity=self.capacity)
        want = model_decide(
            *args, running=self.running, running_by_key=self.running_by_key, capacity=self.capacity
        )
        return got, want


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    now = NOW + draw(st.integers(0, 400)) * 0.25
    ids = draw(st.lists(st.integers(1, 200), max_size=14, unique=True))
    candidates = [
        Candidate(
            id=cid,
            priority=draw(st.integers(-2, 3)),
            ready_at=now - draw(st.integers(0, 40)) * draw(st.sampled_from([0.25, 4.0, 15.0])),
            key=draw(st.sampled_from((None, *KEYS))),
        )
        for cid in ids
    ]
    rate = draw(
        st.one_of(
            st.none(),
            st.builds(RateLimit, rate=st.sampled_from(RATES), burst=st.integers(1, 6).map(float)),
        )
    )
    policy = Policy(
        concurrency=draw(st.one_of(st.none(), st.integers(0, 5))),
        key_concurrency=draw(st.integers(1, 3)),
        rate=rate,
        priority_aging=draw(st.sampled_from(AGINGS)),
    )
    bucket = draw(
        st.one_of(
            st.none(),
            st.builds(
                Bucket,
                tokens=st.integers(0, 32).map(lambda q: q * 0.25),
                updated_at=st.integers(0, 40).map(lambda q: now - q * 0.25),
            ),
        )
    )
    return Scenario(
        now=now,
        candidates=candidates,
        policy=policy,
        bucket=bucket,
        running=draw(st.integers(0, 6)),
        running_by_key={k: n for k in KEYS if (n := draw(st.integers(0, 3)))},
        capacity=draw(st.one_of(st.none(), st.integers(0, 6))),
    )


def check_matches_the_model(s: Scenario, got: Decision, want: ModelDecision) -> None:
    assert got.selected == want.selected
    if want.tokens is None:
        assert got.bucket is None
    else:
        assert got.bucket is not None
        assert got.bucket.tokens == pytest.approx(float(want.tokens), abs=1e-9)
        assert got.bucket.updated_at == s.now
    # a stop by slots or capacity is reported as such
    if want.stopped_by in ("slots", "capacity"):
        assert got.blocked_by == want.stopped_by
    # a stop by tokens says when the next whole token arrives
    if got.blocked_by == "tokens":
        assert s.policy.rate is not None and want.tokens is not None
        missing = 1 - float(want.tokens)
        assert got.next_token_at == pytest.approx(s.now + missing / s.policy.rate.rate)
    else:
        assert got.next_token_at is None


def check_no_limit_exceeded(s: Scenario, got: Decision) -> None:
    by_id = {c.id: c for c in s.candidates}
    assert len(set(got.selected)) == len(got.selected)
    assert set(got.selected) <= set(by_id)

    free = math.inf
    if s.policy.concurrency is not None:
        free = max(0, s.policy.concurrency - s.running)
    if s.capacity is not None:
        free = min(free, s.capacity)
    assert len(got.selected) <= free

    per_key = Counter(by_id[i].key for i in got.selected if by_id[i].key is not None)
    for key, n in per_key.items():
        assert s.running_by_key.get(key, 0) + n <= s.policy.key_concurrency

    available = tokens_now(s.bucket, s.policy, s.now)
    if available is not None:
        assert len(got.selected) <= math.floor(available)
        assert got.bucket is not None
        assert got.bucket.tokens >= -1e-9


def check_jobs_left_behind_without_a_stop_had_a_full_key(s: Scenario, got: Decision) -> None:
    if got.blocked_by is None:
        picked = set(got.selected)
        for c in s.candidates:
            if c.id not in picked:
                assert c.key is not None
                assert c.key in got.skipped_keys


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_decide_matches_the_reference_model_and_keeps_every_limit(s: Scenario) -> None:
    got, want = s.run()
    check_matches_the_model(s, got, want)
    check_no_limit_exceeded(s, got)
    check_jobs_left_behind_without_a_stop_had_a_full_key(s, got)


# ---------------------------------------------------------------- the rate limit over time

TICK = 1 / 64  # times are multiples of it: exact in binary, so the float bucket is exact too


@dataclass(frozen=True)
class History:
    policy: Policy
    attempts: list[tuple[float, int, int | None]]  # (the dispatching clock's now, candidates, capacity)
    windows: list[tuple[float, float]]  # (start, length): arbitrary windows to count directly


@st.composite
def histories(draw: st.DrawFn) -> History:
    rate = RateLimit(rate=draw(st.sampled_from(RATES)), burst=float(draw(st.integers(1, 6))))
    policy = Policy(rate=rate, priority_aging=None)
    at, attempts = NOW, []
    for _ in range(draw(st.integers(1, 40))):
        at += draw(st.sampled_from((0, 0, 1, 3, 16, 64, 640))) * TICK * draw(st.integers(0, 3))
        lag = draw(st.sampled_from((0, 0, 0, 1, 5))) * TICK  # this worker's clock runs a little behind
        attempts.append((at - lag, draw(st.integers(0, 8)), draw(st.one_of(st.none(), st.integers(0, 8)))))
    span = max(1.0, at - NOW)
    windows = [
        (NOW - 1 + draw(st.floats(0, 1)) * (span + 2), draw(st.floats(0, 1)) * span)
        for _ in range(draw(st.integers(0, 8)))
    ]
    return History(policy, attempts, windows)


def run_history(h: History) -> list[float]:
    """Dispatch each attempt in turn as the coordinator does: at ``dispatch_time``, the bucket carried on."""
    bucket: Bucket | None = None
    starts: list[float] = []
    next_id = 1
    for now, waiting, capacity in h.attempts:
        at = dispatch_time(now, bucket)
        waiting_cands = [Candidate(id=next_id + i, priority=0, ready_at=at) for i in range(waiting)]
        d = decide(at, waiting_cands, h.policy, bucket, capacity=capacity)
        next_id += waiting
        starts += [at] * len(d.selected)
        bucket = d.bucket
        assert d.bucket is not None and d.bucket.updated_at == at
    return starts


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_every_window_holds_at_most_burst_plus_rate_times_its_length(h: History) -> None:
    starts = run_history(h)
    assert starts == model_history(h.policy, h.attempts)
    assert starts == sorted(starts)  # each dispatch is at or after the one before it
    # Every window: the tightest window around the starts i..j is [starts[i], starts[j]], so checking
    # each pair covers windows that begin and end anywhere.
    for i in range(len(starts)):
        for j in range(i, len(starts)):
            length = Fraction(starts[j]) - Fraction(starts[i])
            inside = sum(1 for t in starts if starts[i] <= t <= starts[j])
            assert inside <= allowed_in_a_window(h.policy, length), (i, j, starts)
    # the same rule counted directly on windows that begin at arbitrary moments
    for begin, length in h.windows:
        inside = sum(1 for t in starts if begin <= t <= begin + length)
        assert inside <= allowed_in_a_window(h.policy, Fraction(length)), (begin, length, starts)
    for length in {Fraction(0), Fraction(1), Fraction(starts[-1]) - Fraction(starts[0]) if starts else Fraction(0)}:
        assert most_starts_in_a_window(starts, length) <= allowed_in_a_window(h.policy, length)
