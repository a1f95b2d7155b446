"""``why_not``: why the dispatch decision does not start a candidate, answered by the decision itself.

The properties: a candidate "starts" (no limit, nobody ahead) exactly when ``decide`` selects it among
all candidates; each limit named is one that really holds the candidate alone back, and each limit
that holds it alone is named."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings

from jobloom.core.decide import decide, refill, why_not
from jobloom.core.options import RateLimit
from jobloom.core.types import Bucket, Candidate, Policy

from .test_decide import NOW, STRICT, Scenario, cands, scenarios


def test_a_candidate_nothing_holds_starts() -> None:
    why = why_not(NOW, cands((1, 0))[0], [], STRICT, None)
    assert why.starts and why.limits == () and why.ahead == ()


def test_every_limit_that_holds_a_candidate_is_named_in_decide_order() -> None:
    policy = Policy(concurrency=2, key_concurrency=1, rate=RateLimit(2.0, 1.0), priority_aging=None, paused=True)
    me = Candidate(7, 0, NOW, "acme")
    why = why_not(NOW, me, [], policy, Bucket(0.2, NOW), running=2, running_by_key={"acme": 1})
    assert why.limits == ("paused", "slots", "keys", "tokens")
    assert why.next_token_at == pytest.approx(NOW + 0.4)  # 0.8 token missing at 2 tokens/s
    assert not why.starts


def test_a_candidate_behind_others_names_those_that_take_the_room() -> None:
    policy = Policy(concurrency=3, priority_aging=None)
    first, second, me, later = cands((1, 5), (2, 5), (3, 0), (4, -1))
    why = why_not(NOW, me, [later, second, first], policy, None, running=1)
    assert why.limits == () and why.ahead == (1, 2)  # two free slots, both taken by higher priorities
    assert why_not(NOW, me, [later, second], policy, None, running=1).starts


def test_a_candidate_skipped_for_its_key_names_the_one_before_it_with_that_key() -> None:
    policy = Policy(key_concurrency=1, priority_aging=None)
    mine, other, me, after = cands((1, 5, "k"), (2, 4, None), (3, 0, "k"), (4, -1, None))
    why = why_not(NOW, me, [mine, other, after], policy, None)
    assert why.ahead == (1,)  # not 2 or 4: they do not take its key's slot


def test_no_room_at_all_is_reported_as_capacity() -> None:
    assert why_not(NOW, cands((1, 0))[0], [], STRICT, None, capacity=0).limits == ("capacity",)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_starts_exactly_when_decide_selects_it(s: Scenario) -> None:
    chosen = decide(s.now, s.candidates, s.policy, s.bucket, running=s.running, running_by_key=s.running_by_key,
                    capacity=s.capacity)
    for me in s.candidates:
        others = [c for c in s.candidates if c.id != me.id]
        why = why_not(s.now, me, others, s.policy, s.bucket, running=s.running, running_by_key=s.running_by_key,
                      capacity=s.capacity)
        assert why.starts == (me.id in chosen.selected), (me, why, chosen)
        assert set(why.ahead) <= set(chosen.selected)
        assert why.starts or why.limits or why.ahead  # a candidate not started is always given a reason


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_each_limit_named_holds_the_candidate_alone(s: Scenario) -> None:
    for me in s.candidates:
        policy = replace(s.policy, paused=me.id % 5 == 0)
        why = why_not(s.now, me, [], policy, s.bucket, running=s.running, running_by_key=s.running_by_key,
                      capacity=s.capacity)
        holds = []
        if policy.paused:
            holds.append("paused")
        if policy.concurrency is not None and s.running >= policy.concurrency:
            holds.append("slots")
        if s.capacity is not None and s.capacity <= 0:
            holds.append("capacity")
        elif me.key is not None and s.running_by_key.get(me.key, 0) >= policy.key_concurrency:
            holds.append("keys")
        state = refill(s.bucket, policy, s.now)
        if "capacity" not in holds and state is not None and state.tokens < 1:
            holds.append("tokens")
        assert why.limits == tuple(holds), (me, policy, why)
        assert why.starts == (not holds)
        if "tokens" in holds:
            assert why.next_token_at is not None and why.next_token_at > s.now
