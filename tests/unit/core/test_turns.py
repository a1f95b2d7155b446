"""Limits between keys in the pure decision: round-robin turns and a rate per key, one example per rule,
then properties against the reference model."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobloom.core.decide import decide, why_not
from jobloom.core.options import RateLimit
from jobloom.core.turns import turn_order
from jobloom.core.types import Bucket, Candidate, Decision, Policy, Turn

from .reference_model import ModelTurnDecision, allowed_in_a_window, model_decide_turns, tokens_now

NOW = 10_000.0
FAIR = Policy(fairness="round_robin", key_concurrency=100, priority_aging=None)


def jobs(*keys: str | None, priority: int = 0) -> list[Candidate]:
    return [Candidate(i + 1, priority, NOW - 100 + i, k) for i, k in enumerate(keys)]


def keys_of(d: Decision, cands: list[Candidate]) -> list[str | None]:
    by_id = {c.id: c.key for c in cands}
    return [by_id[i] for i in d.selected]


# ---------------------------------------------------------------- examples, one per rule


def test_keys_take_turns_in_the_order_of_their_names() -> None:
    cands = jobs(*["A"] * 5, *["B"] * 5, "C")
    d = decide(NOW, cands, FAIR, None, capacity=7)
    assert keys_of(d, cands) == ["A", "B", "C", "A", "B", "A", "B"]
    assert d.turn == Turn("B", 1)


def test_the_turn_goes_on_after_the_key_that_started_last() -> None:
    cands = jobs("A", "B", "C")
    d = decide(NOW, cands, FAIR, None, capacity=1, turn=Turn("A", 1))
    assert keys_of(d, cands) == ["B"]
    d = decide(NOW, cands, FAIR, None, capacity=1, turn=Turn("C", 1))
    assert keys_of(d, cands) == ["A"]  # round again
    d = decide(NOW, cands, FAIR, None, capacity=1, turn=Turn("AA", 1))  # a key gone since: the next by name
    assert keys_of(d, cands) == ["B"]


def test_a_weight_is_that_many_starts_in_a_row() -> None:
    policy = Policy(fairness="round_robin", key_concurrency=100, key_weights=(("gold", 3),))
    cands = jobs(*["gold"] * 9, *["iron"] * 9)
    d = decide(NOW, cands, policy, None, capacity=8)
    assert keys_of(d, cands) == ["gold"] * 3 + ["iron"] + ["gold"] * 3 + ["iron"]
    assert d.turn == Turn("iron", 1)
    d = decide(NOW, cands, policy, None, capacity=2, turn=Turn("gold", 1))
    assert keys_of(d, cands) == ["gold", "gold"]  # the turn saved goes on


def test_priority_orders_a_keys_jobs_but_not_the_turns() -> None:
    cands = [Candidate(1, 0, NOW, "A"), Candidate(2, 9, NOW, "A"), Candidate(3, -9, NOW, "B")]
    assert decide(NOW, cands, FAIR, None, capacity=3).selected == (2, 3, 1)


def test_aging_does_not_apply_under_turns() -> None:
    cands = [Candidate(1, 0, NOW - 10_000, "A"), Candidate(2, 1, NOW, "A")]
    policy = Policy(fairness="round_robin", priority_aging=1.0)
    assert decide(NOW, cands, policy, None, capacity=1).selected == (2,)


def test_jobs_without_a_key_take_one_turn_after_the_last_name() -> None:
    cands = jobs(None, None, "B", "A", "A")
    d = decide(NOW, cands, FAIR, None, capacity=5)
    assert keys_of(d, cands) == ["A", "B", None, "A", None]
    assert turn_order(["B", None, "A"], Turn(None, 1), FAIR) == ["A", "B", None]


def test_a_full_key_passes_its_turn() -> None:
    policy = Policy(fairness="round_robin", key_concurrency=1)
    cands = jobs("A", "A", "B", "C")
    d = decide(NOW, cands, policy, None, running_by_key={"B": 1}, capacity=5)
    assert keys_of(d, cands) == ["A", "C"]
    assert d.skipped_keys == {"A", "B"}


def test_binding_slots_stop_the_turns() -> None:
    policy = Policy(fairness="round_robin", concurrency=2, key_concurrency=5)
    cands = jobs("A", "A", "B")
    d = decide(NOW, cands, policy, None, running=1)
    assert keys_of(d, cands) == ["A"] and d.blocked_by == "slots" and d.turn == Turn("A", 1)


def test_each_key_has_a_bucket_and_both_rates_must_allow() -> None:
    policy = Policy(key_concurrency=100, rate=RateLimit(1.0, 3.0), key_rate=RateLimit(0.5, 2.0),
                    priority_aging=None)
    cands = jobs("a", "a", "a", "b", "b")
    d = decide(NOW, cands, policy, None)
    assert keys_of(d, cands) == ["a", "a", "b"]  # a's bucket holds 2, the binding's 3
    assert d.blocked_by == "tokens"
    assert d.key_buckets == {"a": Bucket(0.0, NOW), "b": Bucket(1.0, NOW)}


def test_a_key_out_of_tokens_is_skipped_and_says_when_its_next_token_comes() -> None:
    policy = Policy(key_rate=RateLimit(0.5, 1.0), key_concurrency=10, priority_aging=None)
    cands = jobs("a", "b")
    d = decide(NOW, cands, policy, None, key_buckets={"a": Bucket(0.5, NOW), "b": Bucket(0.0, NOW - 1)})
    assert d.selected == () and d.blocked_by == "key_tokens"
    assert d.next_token_at == pytest.approx(NOW + 1.0)  # a's: half a token short at 0.5/s
    d = decide(NOW + 1, cands, policy, None, key_buckets={"a": Bucket(0.5, NOW), "b": Bucket(0.0, NOW - 1)})
    assert d.selected == (1, 2)


def test_why_not_names_the_turn_and_the_key_tokens() -> None:
    cands = jobs("A", "B")
    w = why_not(NOW, cands[1], cands, FAIR, None, capacity=1)
    assert w.limits == () and w.ahead == (1,)
    policy = Policy(key_rate=RateLimit(0.5, 1.0), priority_aging=None)
    w = why_not(NOW, cands[0], cands, policy, None, key_buckets={"A": Bucket(0.0, NOW)})
    assert w.limits == ("key_tokens",) and w.next_token_at == pytest.approx(NOW + 2.0)


# ---------------------------------------------------------------- properties against the reference model

KEYS = ("a", "b", "bb", "c")
RATES = (0.25, 0.5, 1.0, 2.0)


@dataclass(frozen=True)
class Scenario:
    candidates: list[Candidate]
    policy: Policy
    bucket: Bucket | None
    running: int
    running_by_key: dict[str, int]
    capacity: int | None
    turn: Turn
    key_buckets: dict[str, Bucket]

    def run(self) -> tuple[Decision, ModelTurnDecision]:
        kw = {"running": self.running, "running_by_key": self.running_by_key, "capacity": self.capacity}
        got = decide(NOW, self.candidates, self.policy, self.bucket, turn=self.turn, key_buckets=self.key_buckets,
                     **kw)  # type: ignore[arg-type]
        want = model_decide_turns(
            NOW, self.candidates, self.policy, self.bucket, last=(self.turn.key, self.turn.used),
            key_buckets={k: (b.tokens, b.updated_at) for k, b in self.key_buckets.items()}, **kw)  # type: ignore[arg-type]
        return got, want


rates = st.builds(RateLimit, rate=st.sampled_from(RATES), burst=st.integers(1, 4).map(float))


@st.composite
def scenarios(draw: st.DrawFn, fair: bool = True) -> Scenario:
    ids = draw(st.lists(st.integers(1, 300), max_size=16, unique=True))
    candidates = [Candidate(i, draw(st.integers(-1, 2)), NOW - draw(st.integers(0, 8)),
                            draw(st.sampled_from((None, *KEYS)))) for i in ids]
    weights = draw(st.dictionaries(st.sampled_from(KEYS), st.integers(1, 3), max_size=2))
    policy = Policy(
        concurrency=draw(st.one_of(st.none(), st.integers(0, 6))), key_concurrency=draw(st.integers(1, 3)),
        rate=draw(st.one_of(st.none(), rates)), key_rate=draw(st.one_of(st.none(), rates)),
        priority_aging=None, fairness="round_robin" if fair else None,
        key_weights=tuple(sorted(weights.items())) if fair else (),
    )
    key = draw(st.sampled_from((None, *KEYS, "ab", "z")))
    used = draw(st.integers(0 if key is None else 1, 3))
    buckets = {k: Bucket(draw(st.integers(0, 12)) * 0.25, NOW - draw(st.integers(0, 8)) * 0.25)
               for k in KEYS if draw(st.booleans())}
    bucket = draw(st.one_of(st.none(), st.builds(Bucket, tokens=st.integers(0, 16).map(lambda q: q * 0.25),
                                                 updated_at=st.just(NOW - 1.0))))
    return Scenario(candidates, policy, bucket, draw(st.integers(0, 4)),
                    {k: n for k in KEYS if (n := draw(st.integers(0, 2)))},
                    draw(st.one_of(st.none(), st.integers(0, 8))), Turn(key, used), buckets)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_turns_match_the_reference_model(s: Scenario) -> None:
    got, want = s.run()
    assert got.selected == want.selected
    if want.selected:
        assert got.turn == Turn(*want.last)
    else:
        assert got.turn == s.turn
    if want.tokens is not None:
        assert got.bucket is not None and got.bucket.tokens == pytest.approx(float(want.tokens))
    assert {k: pytest.approx(float(v)) for k, v in want.key_tokens.items()} == {
        k: b.tokens for k, b in got.key_buckets.items()}
    if want.stopped_by in ("slots", "capacity", "tokens"):
        assert got.blocked_by == want.stopped_by


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(fair=False))
def test_a_key_rate_without_turns_keeps_every_limit(s: Scenario) -> None:
    got = decide(NOW, s.candidates, s.policy, s.bucket, running=s.running, running_by_key=s.running_by_key,
                 capacity=s.capacity, key_buckets=s.key_buckets)
    by_id = {c.id: c for c in s.candidates}
    started = Counter(by_id[i].key for i in got.selected if by_id[i].key is not None)
    for key, n in started.items():
        assert s.running_by_key.get(key, 0) + n <= s.policy.key_concurrency
        if s.policy.key_rate is not None:
            saved = s.key_buckets.get(key)
            have = tokens_now(saved, Policy(rate=s.policy.key_rate), NOW)
            assert have is not None and n <= have
    if got.blocked_by is None:  # a job left behind without a stop had a key that held it back
        assert all(c.key in got.skipped_keys for c in s.candidates if c.id not in got.selected)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(KEYS), min_size=1, max_size=60), st.integers(1, 4))
def test_no_key_with_jobs_waits_more_than_one_round(backlog: list[str], capacity: int) -> None:
    """Dispatch after dispatch, the turn carried: while two keys both have jobs, their starts never
    differ by more than one (weights of 1, no other limit)."""
    pending = [Candidate(i, 0, NOW + i, k) for i, k in enumerate(backlog)]
    turn, started = Turn(), Counter[str]()
    while pending:
        d = decide(NOW + 1000, pending, FAIR, None, capacity=capacity, turn=turn)
        assert d.selected and d.turn is not None
        turn = d.turn
        for cid in d.selected:
            started[next(c.key for c in pending if c.id == cid) or ""] += 1
            pending = [c for c in pending if c.id != cid]
            live = {c.key for c in pending}
            for a in live:
                for b in live:
                    assert a is not None and b is not None
                    assert abs(started[a] - started[b]) <= 1


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rates, st.lists(st.tuples(st.integers(0, 40), st.integers(0, 4)), min_size=1, max_size=30))
def test_each_keys_starts_keep_its_rate_in_every_window(rate: RateLimit, steps: list[tuple[int, int]]) -> None:
    """Dispatch after dispatch, each key's bucket carried (a full one dropped): every window of W seconds
    holds at most burst + rate * W starts of one key."""
    policy = Policy(key_rate=rate, key_concurrency=100, priority_aging=None)
    saved: dict[str, Bucket] = {}
    at, next_id, starts = NOW, 1, {k: [] for k in KEYS}
    for gap, each in steps:
        at += gap / 8
        pending = [Candidate(next_id + i, 0, at, k) for i, k in enumerate(KEYS * each)]
        next_id += len(pending)
        d = decide(at, pending, policy, None, key_buckets=saved)
        for cid in d.selected:
            starts[next(c.key for c in pending if c.id == cid) or ""].append(at)
        saved.update(d.key_buckets)
        saved = {k: b for k, b in saved.items() if b.tokens + (at - b.updated_at) * rate.rate < rate.burst}
    limit = Policy(rate=rate)
    for times in starts.values():
        for i, t in enumerate(times):
            for u in times[i:]:
                inside = sum(1 for v in times if t <= v <= u)
                assert inside <= allowed_in_a_window(limit, Fraction(u) - Fraction(t))
