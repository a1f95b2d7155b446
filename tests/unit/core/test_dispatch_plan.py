"""The dispatch plan (jobloom.core.dispatch_plan) run against an in-memory binding, checked against a
reference model of a whole dispatch that shares nothing with it: a greedy pass over every runnable job of
the binding, with exact token arithmetic.

The in-memory binding answers the plan's reads as the stores' SQL does (candidates by priority, then by
age with priority aging, without the jobs of the keys it names, up to a limit), so the rounds of reads
and decisions, the keys found full, batches and the waits for a token are all exercised."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jobloom.core.dispatch_plan import (
    READ_EXTRA,
    Ask,
    CountRunning,
    LockBinding,
    Need,
    Plan,
    ReadBinding,
    ReadCandidates,
    ReadClock,
    ReadKeys,
    TakeLock,
    WaitUntil,
    plan,
)
from jobloom.core.records import policy_from_row
from jobloom.core.rows import KeyCountRow, PolicyRow
from jobloom.core.types import Candidate, Policy

NOW = 10_000.0


@dataclass
class Binding:
    """One binding's runnable jobs, running counts and stored row, answering a plan's reads."""

    row: PolicyRow
    jobs: list[Candidate]
    running: int = 0
    by_key: dict[str, int] = field(default_factory=dict)
    lock_free: bool = True
    clock: float = NOW
    reads: list[Need] = field(default_factory=list)

    def candidates(self, need: ReadCandidates) -> list[Candidate]:
        eligible = [j for j in self.jobs if j.key is None or j.key not in need.full_keys]
        by_priority = sorted(eligible, key=lambda j: (-j.priority, j.ready_at, j.id))[: need.limit]
        if not need.aging:
            return by_priority
        seen = {j.id for j in by_priority}
        by_age = sorted(eligible, key=lambda j: (j.ready_at, j.id))[: need.limit]
        return by_priority + [j for j in by_age if j.id not in seen]

    def answer(self, need: Need) -> Any:
        self.reads.append(need)
        keys = [KeyCountRow(k, n) for k, n in self.by_key.items()]
        match need:
            case ReadBinding():
                return [self.row]
            case LockBinding(skip=skip, count=count):
                got = self.lock_free or not skip
                return ([self.row] if got else []), (self.running if count else None)
            case CountRunning():
                return self.running
            case ReadClock():
                return self.clock
            case ReadCandidates():
                fresh = [self.row] if need.with_policy else None
                return self.candidates(need), (keys if need.with_keys else None), fresh, None
            case TakeLock(skip=skip):
                return self.lock_free or not skip
            case ReadKeys():
                return keys
            case WaitUntil(moment=moment):
                self.clock = max(self.clock, moment)
                return self.clock
        raise AssertionError(need)

    def run(self, ask: Ask) -> Plan:
        steps = plan(ask)
        answer: Any = None
        try:
            while True:
                answer = self.answer(steps.send(answer))
        except StopIteration as made:
            return made.value  # type: ignore[no-any-return]


# ---------------------------------------------------------------- the reference model


def model_dispatch(binding: Binding, policy: Policy, capacity: int, now: float) -> list[int]:
    """The jobs a dispatch starts, by the rules alone: a paused binding starts nothing; a batch performer's
    binding hands out one batch of up to ``batch_size`` (its concurrency counts batches) once that many
    wait or the oldest has waited ``batch_wait``, not counting jobs whose key is full; otherwise the best
    job goes first (priority, then the longest ready, then the lowest id) until a slot, the capacity or a
    token runs out, and a job whose key is full is passed over."""
    if policy.paused or capacity <= 0:
        return []
    keys = dict(binding.by_key)
    full_at_start = {k for k, n in keys.items() if n >= policy.key_concurrency}
    slots: float = math.inf if policy.concurrency is None else policy.concurrency - binding.running
    if policy.batch_size is not None:
        if slots <= 0:
            return []
        eligible = [j for j in binding.jobs if j.key not in full_at_start]
        ready = sorted(j.ready_at for j in eligible)
        if not eligible or (len(eligible) < policy.batch_size and ready[0] + policy.batch_wait > now):
            return []
        slots, capacity = math.inf, policy.batch_size
    tokens: Fraction | None = None
    row = binding.row
    if policy.rate is not None:
        burst = Fraction(policy.rate.burst)
        if row.tokens is None or row.tokens_at is None:
            tokens = burst
        else:
            now = max(now, row.tokens_at)
            gained = (Fraction(now) - Fraction(row.tokens_at)) * Fraction(policy.rate.rate)
            tokens = min(burst, Fraction(row.tokens) + gained)
    taken: list[int] = []
    for job in sorted(binding.jobs, key=lambda j: (-j.priority, j.ready_at, j.id)):
        if len(taken) >= slots or len(taken) >= capacity:
            break
        if job.key is not None and keys.get(job.key, 0) >= policy.key_concurrency:
            continue
        if tokens is not None:
            if tokens < 1:
                break
            tokens -= 1
        taken.append(job.id)
        if job.key is not None:
            keys[job.key] = keys.get(job.key, 0) + 1
    return taken


# ---------------------------------------------------------------- strategies

KEYS = st.sampled_from([None, None, "a", "b", "c"])


@st.composite
def bindings(draw: st.DrawFn, max_jobs: int = READ_EXTRA) -> Binding:
    n = draw(st.integers(0, max_jobs))
    jobs = [Candidate(i + 1, draw(st.integers(-2, 2)), NOW - draw(st.sampled_from([0.0, 1.0, 5.0, 30.0])), draw(KEYS))
            for i in range(n)]
    concurrency = draw(st.none() | st.integers(0, 5))
    rate = draw(st.none() | st.sampled_from([0.5, 2.0, 50.0]))
    burst = draw(st.sampled_from([1.0, 2.0, 4.0]))
    tokens = draw(st.none() | st.sampled_from([0.0, 0.5, 1.0, 3.0]))
    tokens_at = NOW - draw(st.sampled_from([0.0, 0.1, 1.0]))
    batch_size = draw(st.none() | st.integers(1, 4))
    row = PolicyRow(concurrency, draw(st.integers(1, 2)), rate, burst, None, None, None,
                    tokens, tokens_at if tokens is not None else None, draw(st.booleans()) and draw(st.booleans()),
                    batch_size, draw(st.sampled_from([0.0, 2.0, 10.0])) if batch_size else None)
    by_key = {k: draw(st.integers(0, 2)) for k in ("a", "b", "c") if draw(st.booleans())}
    running = draw(st.integers(0, 4))
    return Binding(row, jobs, running, by_key)


def check_limits(binding: Binding, policy: Policy, made: Plan, capacity: int) -> None:
    """Whatever was read, a plan never starts more than the limits allow."""
    chosen = list(made.selected)
    assert len(chosen) == len(set(chosen))
    assert set(chosen) <= {j.id for j in binding.jobs}
    batch = policy.batch_size is not None
    assert len(chosen) <= (policy.batch_size if batch else capacity)
    if policy.concurrency is not None and not batch:
        assert binding.running + len(chosen) <= max(policy.concurrency, binding.running)
    keys = {j.id: j.key for j in binding.jobs}
    for key in {keys[i] for i in chosen} - {None}:
        assert key is not None
        mine = sum(1 for i in chosen if keys[i] == key)
        assert mine == 0 or binding.by_key.get(key, 0) + mine <= policy.key_concurrency


# ---------------------------------------------------------------- properties


@settings(max_examples=200, deadline=None)
@given(bindings(), st.integers(0, 6), st.booleans())
def test_a_plan_starts_what_the_model_starts(binding: Binding, capacity: int, prefer_lock: bool) -> None:
    """Every runnable job is read in one round (no more than READ_EXTRA of them): the plan starts exactly
    the jobs the reference model does, in its order, and records them at the moment the model does."""
    policy = policy_from_row(binding.row)[0]
    made = binding.run(Ask(capacity, NOW, None if prefer_lock else [binding.row], has_clock=True))
    assert list(made.selected) == model_dispatch(binding, policy, capacity, NOW)
    assert not made.contended and made.restart is None
    if made.selected:
        assert made.complete
        tokens_at = binding.row.tokens_at if policy.rate is not None and binding.row.tokens_at is not None else NOW
        assert made.at == max(NOW, tokens_at)
        assert made.batch == (policy.batch_size is not None)
    if made.save is not None:  # a bucket is saved only as decided, never below zero
        assert policy.rate is not None and made.complete and made.save.tokens >= 0


@settings(max_examples=150, deadline=None)
@given(bindings(max_jobs=60), st.integers(0, 6), st.sampled_from([0.0, 0.05]), st.booleans())
def test_a_plan_never_starts_more_than_the_limits_allow(
    binding: Binding, capacity: int, token_wait: float, lock_free: bool
) -> None:
    """With more jobs than one read holds, a lock held elsewhere, or a wait for a token allowed, the plan
    still keeps every limit, and reads at most a bounded number of times."""
    binding.lock_free = lock_free
    if binding.jobs and binding.jobs[0].priority > 0:  # priority aging: candidates read by age too
        binding.row = binding.row._replace(priority_aging=10.0)
    policy = policy_from_row(binding.row)[0]
    made = binding.run(Ask(capacity, NOW, None, token_wait=token_wait, wait_for_lock=lock_free, has_clock=True))
    check_limits(binding, policy, made, capacity)
    assert sum(isinstance(r, ReadCandidates) for r in binding.reads) <= 10
    if made.contended:
        assert not lock_free


def test_a_changed_policy_restarts_the_plan() -> None:
    """Read without the lock, the binding's row came back changed: the plan starts nothing and asks to be
    made again from the new row."""
    row = PolicyRow(None, 1, None, None, None, None, None, None, None, False, None, None)
    binding = Binding(row, [Candidate(1, 0, NOW)])
    changed = row._replace(concurrency=1)
    steps = plan(Ask(3, NOW, [row]))
    need = steps.send(None)
    assert isinstance(need, ReadCandidates) and need.with_policy and not need.with_keys
    try:
        steps.send((binding.candidates(need), None, [changed], None))
    except StopIteration as made:
        assert made.value == Plan(restart=[changed], capacity=3, at=NOW)
    else:
        raise AssertionError("the plan went on with a stale policy")


def test_keyed_jobs_without_a_free_lock_start_what_was_picked_before() -> None:
    """Candidates read ahead, a keyed one among them, and the lock held elsewhere: nothing starts, and the
    plan says it was contended."""
    row = PolicyRow(None, 1, None, None, None, None, None, None, None, False, None, None)
    binding = Binding(row, [Candidate(1, 0, NOW, "a"), Candidate(2, 0, NOW)], lock_free=False)
    made = binding.run(Ask(3, NOW, [row], wait_for_lock=False))
    assert made.contended and made.selected == ()
    assert [type(r) for r in binding.reads] == [ReadCandidates, TakeLock]


def test_a_token_due_in_a_moment_is_waited_for_under_the_lock() -> None:
    """No token now, the next one due within ``token_wait``: the plan waits for it, then starts a job."""
    row = PolicyRow(None, 1, 10.0, 1.0, None, None, None, 0.0, NOW, False, None, None)
    binding = Binding(row, [Candidate(1, 0, NOW), Candidate(2, 0, NOW)])
    made = binding.run(Ask(2, NOW, [row], token_wait=0.2, has_clock=True))
    assert made.selected == (1,)
    waits = [r for r in binding.reads if isinstance(r, WaitUntil)]
    assert len(waits) == 1 and abs(waits[0].moment - (NOW + 0.1)) < 0.001
    assert made.at >= NOW + 0.1 and made.decided_at == NOW


def _reads(binding: Binding) -> Sequence[type]:
    return [type(r) for r in binding.reads]


def test_an_unlimited_binding_reads_ahead_candidates_once() -> None:
    """Candidates read ahead stand for the first read: a binding without limits starts them with no read."""
    from jobloom.core.dispatch_plan import ReadAhead

    row = PolicyRow(None, 1, None, None, None, None, None, None, None, False, None, None)
    jobs = [Candidate(1, 0, NOW), Candidate(2, 1, NOW)]
    binding = Binding(row, jobs)
    made = binding.run(Ask(5, NOW, [row], ahead=ReadAhead(jobs, 21, False), one_snapshot=True))
    assert made.selected == (2, 1)
    assert _reads(binding) == []
