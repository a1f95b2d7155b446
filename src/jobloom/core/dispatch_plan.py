"""The dispatch plan: which runnable jobs of one binding a dispatch starts, as a function of what it read.

:func:`plan` does no I/O. It is a generator: it yields each read it needs (a :data:`Need`: the binding's
row, its lock and running count, candidates, the running count per key, the clock, a wait for a rate
token) and is sent what was read, until it returns the :class:`Plan`: the jobs to claim, the bucket to
save, and what to report. :func:`jobloom.engine.dispatch.dispatch` answers its reads in the worker's
transaction and applies the plan. The rules it follows are in docs/architecture.md ("Dispatch"); every
choice among candidates is :func:`~jobloom.core.decide.decide`'s.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from jobloom.core.decide import batch_due, decide, dispatch_time, held, room_for_batch, token_due
from jobloom.core.options import RateLimit
from jobloom.core.records import policy_from_row, turn_from_row
from jobloom.core.rows import KeyBucketRow, KeyCountRow, PolicyRow
from jobloom.core.types import Bucket, Candidate, Policy, Turn

HOLD_CAP = 0.025
"""The longest a dispatch holding a rate-limited binding's lock waits for its next token."""
TOKEN_SLACK = 0.00002
"""Seconds past a token's due moment that a waiting dispatch reads the clock again: the clock then
shows the token accrued, not a hair short of it."""
ROUNDS = 8
"""The most reads of candidates one dispatch makes (besides those after a wait for a token)."""
READ_EXTRA = 16
"""Candidates read beyond the number a dispatch may start: room for jobs whose key is full. Under turns,
the most keys read beyond the starts (:attr:`Ask.turn_extra`)."""
KEY_BUCKET_SKIP = 0.001
"""Seconds: a key's bucket that had no row and is full again this soon after a dispatch spent from it is
not saved (a key rate far above the key's starts costs no write per start). The binding's row keeps
when the last such bucket is full (:attr:`Plan.key_full_at`), and no later dispatch of the binding
records its starts before then: at every later dispatch's time, a key without a row is a full bucket,
as it would be had its row been written."""


@dataclass(frozen=True, slots=True)
class ReadBinding:
    """Hold dispatch, then read the binding's row. Answer: its ``get_binding`` rows."""


@dataclass(frozen=True, slots=True)
class LockBinding:
    """Take the binding's row lock (``skip``: only if free) and, with ``count``, count its running jobs
    (``batches``: its running batches) in the same batch. Answer: ``(lock rows, count or None)``."""

    skip: bool
    count: bool
    batches: bool


@dataclass(frozen=True, slots=True)
class CountRunning:
    """Count the binding's running jobs (``batches``: running batches). Answer: the count."""

    batches: bool


@dataclass(frozen=True, slots=True)
class ReadClock:
    """Read the clock. Answer: its time."""


@dataclass(frozen=True, slots=True)
class ReadCandidates:
    """Read up to ``limit`` candidates without the jobs of ``full_keys`` (by age too with ``aging``), with
    ``with_keys`` the running count per key, with ``with_policy`` the binding's row after them. Answer:
    ``(candidates, key count rows or None, get_binding rows or None, found)``: under turns, what the
    reads by turn found besides (:class:`~jobloom.core.turns.Found`: the keys that may have more queued
    jobs, the keys' rate buckets), else None."""

    full_keys: list[str]
    limit: int
    aging: bool
    with_keys: bool
    with_policy: bool
    turns: TurnRead | None = None


@dataclass(frozen=True, slots=True)
class TurnRead:
    """Under round-robin fairness, candidates are read key by key in turn instead: the first jobs of each
    of ``keys`` keys from ``after`` on (by name, ``after`` included), of as many from the first name on
    (the turn goes round), and ``keyless`` jobs without a key; none of ``picked`` (chosen by an earlier
    round). Each key's first jobs: its share of ``want`` starts among the keys found, times ``weight``
    (the largest weight of a key), at most ``per_key`` (all ``per_key`` with ``want`` 0). A key read to its
    share may have more: the decision stops when its turn needs them, and the next round reads on."""

    after: str | None
    keys: int
    per_key: int
    keyless: int
    want: int = 0
    weight: int = 1
    picked: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ReadKeyBuckets:
    """Read the token buckets of ``keys`` (a key rate). Answer: the key bucket rows (full ones missing)."""

    keys: list[str]


@dataclass(frozen=True, slots=True)
class TakeLock:
    """Take the binding's row lock (``skip``: only if free). Answer: whether it is held now."""

    skip: bool


@dataclass(frozen=True, slots=True)
class ReadKeys:
    """Count the binding's running jobs per concurrency key. Answer: the key count rows."""


@dataclass(frozen=True, slots=True)
class WaitUntil:
    """Wait until the clock reaches ``moment``. Answer: the clock's time then."""

    moment: float


Need = (ReadBinding | LockBinding | CountRunning | ReadClock | ReadCandidates | TakeLock | ReadKeys | WaitUntil
        | ReadKeyBuckets)
"""A read the plan needs answered before it goes on."""


@dataclass(frozen=True, slots=True)
class ReadAhead:
    """Candidates read before the binding's policy (a cycle's first reads): by priority, then (``aging``)
    by age, up to ``limit`` of each."""

    candidates: list[Candidate]
    limit: int
    aging: bool


@dataclass(frozen=True, slots=True)
class Ask:
    """What a dispatch is asked: see :func:`jobloom.engine.dispatch.dispatch` for each field.
    ``binding_rows``: None to read them; ``has_clock``: whether a clock can be read; ``one_snapshot``:
    whether the transaction reads one snapshot (the policy then needs no second read); ``turn_extra``:
    under turns, how many keys a read takes beyond the starts it wants (room for keys that cannot start:
    fewer is less to walk and lock, more spares a round when keys are skipped; a dispatch learns it from
    the last one's :attr:`Plan.passed`). Either way the plan starts the same jobs."""

    capacity: int
    now: float
    binding_rows: list[PolicyRow] | None = None
    token_wait: float = 0.0
    wait_for_lock: bool = True
    has_clock: bool = False
    ahead: ReadAhead | None = None
    one_snapshot: bool = False
    turn_extra: int = READ_EXTRA


@dataclass(frozen=True, slots=True)
class Plan:
    """What a dispatch does: claim ``selected`` at ``at``, save ``save`` (the bucket, when not None).

    ``complete``: False when it stopped before deciding (paused, no token soon, lock held elsewhere, a
    batch not due): only ``next_token_at``, ``batch`` and ``contended`` are reported then. ``restart``:
    the binding's row changed while it read candidates; dispatch again from these rows, with ``capacity``
    and ``at``, and nothing from this plan applied. ``turn``, ``key_buckets``: the turn between keys and
    the keys' buckets to save (``key_rate``: the buckets of idle keys full a while are deleted);
    ``key_full_at``: when the last of the keys' buckets left unsaved is full (:data:`KEY_BUCKET_SKIP`)."""

    selected: tuple[int, ...] = ()
    at: float = 0.0
    save: Bucket | None = None
    next_token_at: float | None = None
    batch: bool = False
    decided_at: float | None = None
    locked: bool = False
    contended: bool = False
    complete: bool = False
    restart: list[PolicyRow] | None = None
    capacity: int = 0
    turn: Turn | None = None  # under round-robin fairness: the turn to save
    key_buckets: dict[str, Bucket] = field(default_factory=dict)  # with a key rate: the buckets to save
    key_rate: RateLimit | None = None  # with a key rate: the buckets full a while by ``at`` are deleted
    passed: int = 0  # under turns: the keys read whose turns passed (full, or their tokens spent)
    key_full_at: float | None = None  # with a key rate: no later dispatch records its starts before then


Steps = Generator[Need, Any, Plan]
"""A plan in progress: yields what it needs read, is sent each answer, returns the plan."""


def plan(ask: Ask) -> Steps:
    """Plan one dispatch of a binding (see the module's docstring for how it is run)."""
    if ask.capacity <= 0:
        return Plan()
    rows = ask.binding_rows
    if rows is None:  # the hold first: the binding is read after any pause that commits
        rows = yield ReadBinding()
    admitted = yield from _admit(ask, rows)
    if isinstance(admitted, Plan):
        return admitted
    return (yield from _rounds(admitted))


@dataclass(slots=True)
class Rounds:
    """A dispatch's state between its rounds of :func:`decide`, once the binding is admitted."""

    policy: Policy
    rules: Policy  # what decides: a batch performer's concurrency counts batches, decided before
    bucket: Bucket | None
    now: float
    running: int
    room: int
    locked: bool
    ask: Ask
    waits: int = 0  # waits for a token still allowed
    hold_wait: float = 0.0  # the longest wait for a token, holding the lock
    ahead: ReadAhead | None = None
    by_key: dict[str, int] | None = None
    full: set[str] = field(default_factory=set)
    selected: list[int] = field(default_factory=list)
    next_token_at: float | None = None
    decided_at: float | None = None
    contended: bool = False
    turn: Turn | None = None
    key_buckets: dict[str, Bucket] = field(default_factory=dict)  # as read (a missing key: a full bucket)
    spent: dict[str, Bucket] = field(default_factory=dict)  # the keys' buckets to save
    bucket_keys: set[str] = field(default_factory=set)  # the keys whose buckets were read
    stored: set[str] = field(default_factory=set)  # the keys whose buckets were read from a row
    unread: frozenset[str] = frozenset()  # under turns: keys of the last read that may have more jobs
    edge: tuple[str, bool] | None = None  # under turns: the last key read before keys left unread
    passed: int = 0  # keys skipped by the decisions (full, or their tokens spent)

    def want(self) -> int:
        """How many more jobs it may start."""
        slots = self.rules.concurrency
        return min(self.room, slots - self.running if slots is not None else self.room)

    def read_ahead(self, limit: int) -> list[Candidate] | None:
        """The candidates read ahead, if they stand for the read about to be made (each serves once)."""
        ahead, self.ahead = self.ahead, None
        policy = self.policy
        if (ahead is None or self.locked or policy.limited or policy.batch_size is not None or self.full
                or ahead.aging != bool(policy.priority_aging) or ahead.limit < limit):
            return None
        return ahead.candidates

    def learn_keys(self, key_rows: Sequence[KeyCountRow], candidates: Sequence[Candidate]) -> bool:
        """Note the running count per key; True when a candidate's key is full (read again without them)."""
        self.by_key = {r.concurrency_key: r.n for r in key_rows}
        newly_full = {k for k, n in self.by_key.items() if n >= self.policy.key_concurrency}
        if any(c.key in newly_full for c in candidates):
            self.full |= newly_full
            return True
        return False

    def take(self, candidates: Sequence[Candidate]) -> str:
        """Decide among ``candidates`` and note what starts. Next: ``"more"`` (read past the keys that were
        full), ``"wait"`` (for the token due in a moment, then decide again) or ``"stop"``."""
        if self.decided_at is None and self.policy.rate is not None:
            self.decided_at = self.now
        decision = decide(self.now, candidates, self.rules, self.bucket, running=self.running,
                          running_by_key=self.by_key, capacity=self.room, turn=self.turn,
                          key_buckets=self.key_buckets, unread=self.unread, edge=self.edge)
        self.bucket = decision.bucket
        if decision.turn is not None:
            self.turn = decision.turn
        self.key_buckets.update(decision.key_buckets)
        self.spent.update(decision.key_buckets)
        self.full |= decision.skipped_keys
        self.passed += len(decision.skipped_keys)
        self.next_token_at = due = decision.next_token_at
        if not decision.selected:
            if decision.unread and decision.blocked_by is None:  # stopped before keys not read yet
                return "more"
            soon = due is not None and due - self.now <= self.hold_wait
            return "wait" if self.waits and self.ask.has_clock and not self.selected and soon else "stop"
        self.selected.extend(decision.selected)
        picked = set(decision.selected)
        for c in candidates:
            if c.id in picked and c.key is not None and self.by_key is not None:
                self.by_key[c.key] = self.by_key.get(c.key, 0) + 1
                if self.by_key[c.key] >= self.policy.key_concurrency:
                    self.full.add(c.key)
        self.running += len(decision.selected)
        self.room -= len(decision.selected)
        return "more" if (decision.skipped_keys or decision.unread) and decision.blocked_by is None else "stop"

    def done(self) -> Plan:
        """The plan once no round is left."""
        save = self.bucket if self.policy.rate is not None else None
        keys, full_at = unsaved(self.spent, self.stored, self.policy.key_rate)
        return Plan(tuple(self.selected), self.now, save, self.next_token_at, self.policy.batch_size is not None,
                    self.decided_at, self.locked, self.contended, complete=True,
                    turn=self.turn if self.policy.fairness is not None else None, key_buckets=keys,
                    key_rate=self.policy.key_rate, passed=self.passed, key_full_at=full_at)

    def turn_read(self, want: int) -> TurnRead | None:
        """How a round reads candidates under round-robin fairness (None without it)."""
        if self.policy.fairness is None:
            return None
        per_key = max(1, min(want, self.policy.key_concurrency))  # a key starts no more in one dispatch
        weight = max((w for _, w in self.policy.key_weights), default=1)
        # the turn's key is read first but comes last (unless its weight allows it another start)
        keys = want + self.ask.turn_extra + len(self.full) + (self.turn is not None and self.turn.key is not None)
        return TurnRead(self.turn.key if self.turn else None, keys, per_key, want, want, max(1, weight),
                        tuple(self.selected))

    def unknown_buckets(self, candidates: Sequence[Candidate]) -> list[str]:
        """The keys of ``candidates`` whose buckets are still to read (with a key rate)."""
        if self.policy.key_rate is None:
            return []
        keys = sorted({c.key for c in candidates if c.key is not None} - self.bucket_keys)
        self.bucket_keys.update(keys)
        return keys

    def learn_buckets(self, rows: Sequence[KeyBucketRow]) -> None:
        """Note the keys' buckets read."""
        for r in rows:
            self.key_buckets.setdefault(r.concurrency_key, Bucket(r.tokens, r.tokens_at))
            self.stored.add(r.concurrency_key)
            if not self.selected:  # starts are recorded no earlier than their keys' buckets' last update
                self.now = max(self.now, r.tokens_at)


def unsaved(
    spent: dict[str, Bucket], stored: set[str], rate: RateLimit | None
) -> tuple[dict[str, Bucket], float | None]:
    """The keys' buckets a dispatch saves, of those it spent from (``stored``: the keys read from a row),
    and when the last of the others is full: a bucket without a row that is full again within
    :data:`KEY_BUCKET_SKIP` of its last spend is left unsaved (None: none is)."""
    if rate is None:
        return spent, None
    keys: dict[str, Bucket] = {}
    full_at: float | None = None
    for key, b in spent.items():
        refill = max(0.0, rate.burst - b.tokens) / rate.rate
        if key in stored or refill > KEY_BUCKET_SKIP:
            keys[key] = b
        elif full_at is None or b.updated_at + refill > full_at:
            full_at = b.updated_at + refill
    return keys, full_at


def _admit(ask: Ask, binding_rows: list[PolicyRow]) -> Generator[Need, Any, Plan | Rounds]:
    """Whether the binding may start anything now (paused, no token soon, its lock held elsewhere); if so,
    its lock (when limited), its running count, and the state the rounds start from."""
    policy, bucket, _ = policy_from_row(binding_rows[0] if binding_rows else None)
    if held(policy) is not None:
        return Plan()
    now = ask.now
    paced = policy.rate is not None and policy.batch_size is None
    # the binding's row as this transaction read it: when its next token is further off than this
    # dispatch would wait, no job can start now, and the lock is not taken for nothing (other workers
    # may be dispatching the binding; a token only comes later than this row says, never earlier)
    due = token_due(bucket, policy, now) if paced else None
    if due is not None and due - now > ask.token_wait:
        return Plan(next_token_at=due)
    locked = False
    turn = Turn()
    running: int | None = None
    batches = policy.batch_size is not None
    if policy.limited:  # the lock, and the count it guards, in one batch (they run in this order)
        skip = paced or not ask.wait_for_lock
        lock_rows, running = yield LockBinding(skip, policy.concurrency is not None, batches)
        if paced and not lock_rows:
            # another worker is dispatching the binding now and takes the token due: wait for the next
            assert policy.rate is not None
            return Plan(next_token_at=max(now, due or now) + 1 / policy.rate.rate)
        if skip and not lock_rows:
            return Plan(contended=True)
        policy, bucket, _ = policy_from_row(lock_rows[0] if lock_rows else None)
        turn = turn_from_row(lock_rows[0] if lock_rows else None)
        locked = True
        if held(policy) is not None:
            return Plan()
        if policy.rate is not None or policy.key_rate is not None:  # under the lock: starts are recorded at
            now = dispatch_time((yield ReadClock()) if ask.has_clock else now, bucket)  # times that never go back
        full_at = lock_rows[0].key_full_at if lock_rows and policy.key_rate is not None else None
        if full_at is not None:  # the keys' buckets an earlier dispatch left unsaved are full by then
            now = max(now, full_at)
    if policy.concurrency is not None and running is None:
        running = yield CountRunning(batches)
    return _start(ask, policy, bucket, now, running or 0, locked, turn)


def _start(
    ask: Ask, policy: Policy, bucket: Bucket | None, now: float, running: int, locked: bool, turn: Turn
) -> Plan | Rounds:
    """The rounds' first state: a batch performer's binding hands out one batch, if its concurrency
    (counted in batches) allows; a rate-limited one may wait for a token due soon."""
    rules, capacity = policy, ask.capacity
    if policy.batch_size is not None:
        if room_for_batch(policy, running) <= 0:
            return Plan()
        rules, running, capacity = replace(policy, concurrency=None), 0, policy.batch_size
    waits = 2 if ask.token_wait > 0 and policy.rate is not None else 0
    # holding the lock, a dispatch waits for a token due within one token's time (up to HOLD_CAP): the
    # workers that found the lock held meanwhile count on this one to take that token
    hold_wait = max(ask.token_wait, min(HOLD_CAP, 1 / policy.rate.rate)) if waits and policy.rate else 0.0
    return Rounds(policy, rules, bucket, now, running, capacity, locked, ask, waits, hold_wait, ask.ahead,
                  turn=turn)


def _rounds(st: Rounds) -> Steps:
    """Read candidates and decide, until nothing more can start: past keys found full, after a wait for
    a token due in a moment."""
    for _ in range(ROUNDS + st.waits):
        want = st.want()
        if want <= 0:
            break
        cands, key_rows, fresh = yield from _read(st, want + READ_EXTRA)
        if fresh is not None and policy_from_row(fresh[0] if fresh else None)[0] != st.policy:
            # the limits changed since they were read (set_limits committed in between; the candidates
            # may include jobs enqueued after it): decide again by the limits in force, under the lock
            return Plan(restart=fresh, capacity=st.room + len(st.selected), at=st.now)
        if not cands:
            break
        if st.policy.batch_size is not None and not st.selected:
            due, fill_by = batch_due(st.now, cands, st.policy)
            if not due:  # a batch not full yet, and its first job has not waited batch_wait: wake then
                return Plan(next_token_at=fill_by, batch=True)
        if st.by_key is None and any(c.key is not None for c in cands):
            if not st.locked:
                if not (yield TakeLock(skip=not st.ask.wait_for_lock)):
                    st.contended = True  # keyed jobs wait for the lock: the ones already picked start
                    break
                st.locked = True
            if st.learn_keys(key_rows if key_rows is not None else (yield ReadKeys()), cands):
                continue
        unknown = st.unknown_buckets(cands)
        if unknown:
            st.learn_buckets((yield ReadKeyBuckets(unknown)))
        step = st.take(cands)
        if step == "wait":  # the next token is due in a moment: wait for it holding the lock, then decide again
            assert st.next_token_at is not None
            st.waits -= 1
            st.now = dispatch_time((yield WaitUntil(st.next_token_at + TOKEN_SLACK)), st.bucket)
        elif step == "stop":
            break
    return st.done()


def _read(
    st: Rounds, limit: int
) -> Generator[Need, Any, tuple[list[Candidate], list[KeyCountRow] | None, list[PolicyRow] | None]]:
    """A round's candidates: those read ahead if they stand for this read, else read now. Under the
    binding's lock, the running count per key comes along (cheap, and no round trip of its own; only used
    if a candidate has a key). Without the lock, the policy is read again after the candidates, unless the
    transaction reads one snapshot (the policy read before them is as current as they are). The jobs
    picked in earlier rounds are not candidates again."""
    ahead = st.read_ahead(limit)
    st.unread, st.edge = frozenset(), None
    if ahead is not None:
        return ahead, None, None
    cands, key_rows, fresh, found = yield ReadCandidates(
        sorted(st.full), limit, bool(st.policy.priority_aging),
        with_keys=st.locked and st.by_key is None, with_policy=not st.locked and not st.ask.one_snapshot,
        turns=st.turn_read(limit - READ_EXTRA))
    if found is not None:
        st.unread = found.unread
        st.edge = None if found.edge is None else (found.edge, found.lapped)
        if st.policy.key_rate is not None:  # the buckets of the keys read came with them
            st.learn_buckets([r for r in found.buckets if r.concurrency_key not in st.bucket_keys])
            st.bucket_keys |= found.keys
    if st.selected:  # the jobs picked in an earlier round are still queued until the claim: not twice
        picked = set(st.selected)
        cands = [c for c in cands if c.id not in picked]
    return cands, key_rows, fresh
