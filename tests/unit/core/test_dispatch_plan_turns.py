"""The dispatch plan under round-robin fairness, run against an in-memory binding that answers its reads
by turn as the stores' SQL does (each key's share of the starts, the jobs of earlier rounds left out, the
keys' rate buckets along), checked against the reference model of a decision over every queued job of
the binding: reading a bounded share of each key, and reading on when a key's turn needs more, starts
exactly what the model starts, in its order."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobloom.core.dispatch_plan import (
    READ_EXTRA,
    Ask,
    LockBinding,
    Need,
    Plan,
    ReadBinding,
    ReadCandidates,
    ReadClock,
    ReadKeys,
    TurnRead,
    plan,
)
from jobloom.core.options import RateLimit
from jobloom.core.records import key_rules_json, policy_from_row
from jobloom.core.rows import KeyCountRow, PolicyRow, TurnCandidateRow
from jobloom.core.turns import Found, cut_at, found_by_turn
from jobloom.core.types import Bucket, Candidate, Policy, Turn

from .reference_model import model_decide_turns

NOW = 10_000.0


def _order(j: Candidate) -> tuple[int, float, int]:
    return (-j.priority, j.ready_at, j.id)


@dataclass
class Turns:
    """One binding under turns: its queued jobs, running counts, key buckets and stored row."""

    row: PolicyRow
    jobs: list[Candidate]
    running: int = 0
    by_key: dict[str, int] = field(default_factory=dict)
    buckets: dict[str, Bucket] = field(default_factory=dict)
    rows_read: int = 0
    reads: list[Need] = field(default_factory=list)

    def by_turn(self, low: str, turns: TurnRead, full: list[str]) -> list[TurnCandidateRow]:
        """candidates_by_turn: the keys from ``low`` on, each key's share of its first jobs."""
        names = sorted({j.key for j in self.jobs if j.key is not None and j.key >= low})[: turns.keys]
        walked = [k for k in names if k not in full]
        share = turns.per_key if turns.want == 0 else min(
            turns.per_key, math.ceil(turns.want / max(1, len(walked))) * turns.weight)
        out: list[TurnCandidateRow] = []
        for key in walked:
            mine = sorted((j for j in self.jobs if j.key == key and j.id not in turns.picked), key=_order)
            b = self.buckets.get(key)
            out += [TurnCandidateRow(j.id, j.priority, j.ready_at, key, share, b and b.tokens, b and b.updated_at)
                    for j in mine[:share]]
        return out

    def candidates(self, need: ReadCandidates) -> tuple[list[Candidate], Found]:
        """What dispatch's reads by turn return (engine.dispatch._candidates), the wrap included."""
        turns = need.turns
        assert turns is not None
        rows = self.by_turn(turns.after or "", turns, need.full_keys)
        found = {r.concurrency_key for r in rows}
        wrapped = None
        if turns.after is not None and len(found) < turns.keys - len(need.full_keys):
            wrapped = self.by_turn("", turns, need.full_keys)
        edge = cut_at(turns.keys - len(need.full_keys), turns.after, rows, wrapped)
        rows += wrapped or []
        keyless = sorted((j for j in self.jobs if j.key is None), key=_order)[: turns.keyless + len(turns.picked)]
        self.rows_read += len(rows) + len(keyless)
        seen = {r.id: Candidate(r.id, r.priority, r.run_at, r.concurrency_key) for r in rows}
        seen.update((j.id, j) for j in keyless)
        return list(seen.values()), found_by_turn(rows, turns.per_key, *edge)

    def answer(self, need: Need) -> Any:
        self.reads.append(need)
        keys = [KeyCountRow(k, n) for k, n in self.by_key.items()]
        match need:
            case ReadBinding():
                return [self.row]
            case LockBinding(count=count):
                return [self.row], (self.running if count else None)
            case ReadClock():
                return NOW
            case ReadCandidates():
                cands, found = self.candidates(need)
                return cands, (keys if need.with_keys else None), None, found
            case ReadKeys():
                return keys
        raise AssertionError(need)  # ReadKeyBuckets among them: the keys' buckets come with the candidates

    def run(self, ask: Ask) -> Plan:
        steps = plan(ask)
        answer: Any = None
        try:
            while True:
                answer = self.answer(steps.send(answer))
        except StopIteration as made:
            return made.value  # type: ignore[no-any-return]


def turns_row(policy: Policy, turn: Turn, tokens: float | None = None) -> PolicyRow:
    rate = policy.rate
    return PolicyRow(policy.concurrency, policy.key_concurrency, rate.rate if rate else None,
                     rate.burst if rate else None, None, None, None, tokens, NOW - 1.0 if tokens is not None else None,
                     False, None, None, key_rules_json(policy), turn.key, turn.used or None)


# ---------------------------------------------------------------- properties

KEYS = st.sampled_from([None, "a", "b", "bb", "c", "d"])
RATES = st.builds(RateLimit, rate=st.sampled_from([0.5, 2.0]), burst=st.integers(1, 6).map(float))


@st.composite
def bindings(draw: st.DrawFn) -> tuple[Turns, Policy, int, Turn]:
    n = draw(st.integers(0, 60))
    pool = draw(st.lists(KEYS, min_size=1, max_size=8))  # a key drawn more than once has more jobs
    jobs = [Candidate(i + 1, draw(st.integers(-1, 1)), NOW - draw(st.sampled_from([0.0, 1.0, 5.0])),
                      draw(st.sampled_from(pool))) for i in range(n)]
    weights = draw(st.dictionaries(st.sampled_from(["a", "b", "bb", "c"]), st.integers(1, 4), max_size=2))
    policy = Policy(
        concurrency=draw(st.none() | st.integers(0, 40)), key_concurrency=draw(st.sampled_from([1, 3, 100, 100])),
        rate=draw(st.none() | RATES), key_rate=draw(st.none() | RATES), priority_aging=None,
        fairness="round_robin", key_weights=tuple(sorted(weights.items())))
    key = draw(st.sampled_from([None, "a", "b", "ab", "bb", "z"]))
    turn = Turn(key, draw(st.integers(0 if key is None else 1, 3)))
    tokens = draw(st.none() | st.sampled_from([0.0, 2.0, 5.0])) if policy.rate else None
    binding = Turns(turns_row(policy, turn, tokens), jobs, draw(st.integers(0, 3)),
                    {k: n for k in ("a", "b", "c") if (n := draw(st.integers(0, 2)))},
                    {k: Bucket(draw(st.integers(0, 8)) * 0.5, NOW - draw(st.integers(0, 4)) * 0.5)
                     for k in ("a", "bb", "d") if draw(st.booleans())})
    return binding, policy_from_row(binding.row)[0], draw(st.integers(0, 40)), turn


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bindings(), st.sampled_from([0, 1, 2, READ_EXTRA]))
def test_a_plan_by_turns_starts_what_the_model_starts(drawn: tuple[Turns, Policy, int, Turn], extra: int) -> None:
    """Each key read to its share only, and read on when its turn needs more: the plan starts exactly the
    jobs the model starts over every queued job, in its order, and saves the turn the model ends on;
    however many keys a read takes beyond its starts (``turn_extra``)."""
    binding, policy, capacity, turn = drawn
    made = binding.run(Ask(capacity, NOW, None, has_clock=True, turn_extra=extra))
    last = (turn.key, turn.used) if turn.used else (None, 0)
    want = model_decide_turns(
        NOW, binding.jobs, policy, policy_from_row(binding.row)[1], running=binding.running,
        running_by_key=binding.by_key, capacity=capacity, last=last,
        key_buckets={k: (b.tokens, b.updated_at) for k, b in binding.buckets.items()})
    assert list(made.selected) == list(want.selected)
    if want.selected:
        assert made.turn == Turn(*want.last)
    keys = {j.id: j.key for j in binding.jobs}
    started = Counter(keys[i] for i in made.selected if keys[i] is not None)
    for key, n in started.items():
        assert key is not None and binding.by_key.get(key, 0) + n <= policy.key_concurrency


def test_many_keys_read_one_job_each() -> None:
    """1,000 keys with 20 queued jobs each and room for 100 starts: one round reads the first job of the
    keys whose turns come next (as many keys as starts, plus READ_EXTRA, plus the turn's own key, which
    comes last), not 20 of each."""
    jobs = [Candidate(i + 1, 0, NOW - 1, f"k{i % 1000:04d}") for i in range(20_000)]
    policy = Policy(fairness="round_robin", key_concurrency=1_000_000, priority_aging=None,
                    key_rate=RateLimit(1e6, 1e6))
    binding = Turns(turns_row(policy, Turn("k0499", 1)), jobs)
    made = binding.run(Ask(100, NOW, None, has_clock=True))
    assert [f"k{(500 + i) % 1000:04d}" for i in range(100)] == [jobs[i - 1].key for i in made.selected]
    assert sum(isinstance(r, ReadCandidates) for r in binding.reads) == 1
    assert binding.rows_read == 100 + READ_EXTRA + 1
    assert made.passed == 0


def test_a_read_takes_as_many_keys_beyond_its_starts_as_asked() -> None:
    """With no key beyond the starts (``turn_extra=0``) a round of 100 starts reads 100 keys after the
    turn's; keys whose tokens are spent pass their turns, and the next round reads on past them: the
    same starts, not the turn's key (last in turn order) before the keys not read yet."""
    jobs = [Candidate(i + 1, 0, NOW - 1, f"k{i % 1000:04d}") for i in range(20_000)]
    policy = Policy(fairness="round_robin", key_concurrency=1_000_000, priority_aging=None,
                    key_rate=RateLimit(1.0, 5.0))
    binding = Turns(turns_row(policy, Turn("k0499", 1)), jobs)
    made = binding.run(Ask(100, NOW, None, has_clock=True, turn_extra=0))
    assert binding.rows_read == 101 and made.passed == 0
    spent = {f"k{i:04d}": Bucket(0.0, NOW) for i in range(500, 530)}
    keep, lean = (Turns(turns_row(policy, Turn("k0499", 1)), jobs, buckets=spent) for _ in range(2))
    made, plain = lean.run(Ask(100, NOW, None, has_clock=True, turn_extra=0)), keep.run(Ask(100, NOW, None))
    assert made.selected == plain.selected
    assert [f"k{i:04d}" for i in range(530, 630)] == [jobs[i - 1].key for i in made.selected]
    assert made.passed == 30 and sum(isinstance(r, ReadCandidates) for r in lean.reads) == 2


def test_few_keys_read_their_share_and_read_on_when_a_turn_needs_more() -> None:
    """Two keys and room for 10: each key's share is 5; a key whose jobs read run out while its turns
    go on (the other key is full) is read on in the next round."""
    jobs = [Candidate(i + 1, 0, NOW - 1, "ab"[i % 2]) for i in range(40)]
    policy = Policy(fairness="round_robin", key_concurrency=100, priority_aging=None)
    binding = Turns(turns_row(policy, Turn()), jobs)
    made = binding.run(Ask(10, NOW, None, has_clock=True))
    assert [jobs[i - 1].key for i in made.selected] == list("ababababab")
    assert sum(isinstance(r, ReadCandidates) for r in binding.reads) == 1
    binding = Turns(turns_row(policy, Turn()), jobs, by_key={"b": 100})
    made = binding.run(Ask(10, NOW, None, has_clock=True))
    assert [jobs[i - 1].key for i in made.selected] == list("a" * 10)
    assert made.selected == tuple(range(1, 21, 2))


def test_a_key_with_more_jobs_than_its_share_is_read_on() -> None:
    """Room for 10 between a key with one job and a key with 20: the second key's share (5) runs out
    while its turns go on; the next round reads on from the turn and starts the rest."""
    jobs = [Candidate(1, 0, NOW - 1, "a"), *(Candidate(i, 0, NOW - 1, "b") for i in range(2, 22))]
    policy = Policy(fairness="round_robin", key_concurrency=100, priority_aging=None)
    binding = Turns(turns_row(policy, Turn()), jobs)
    made = binding.run(Ask(10, NOW, None, has_clock=True))
    assert made.selected == (1, *range(2, 11))
    assert made.turn == Turn("b", 9)
    assert sum(isinstance(r, ReadCandidates) for r in binding.reads) == 2
