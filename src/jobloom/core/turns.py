"""Round-robin fairness between the concurrency keys of a binding: which key's job starts next.

The keys take turns in the order of their names (code points), the jobs without a key after the last
name, and around again. The turn as saved (:class:`~jobloom.core.types.Turn`) is the key that started
last and how many starts in a row it has had: the next start is that key's again while its weight
allows (``key_weights``, 1 by default), else the next key in the order after it. A key that cannot
start now (its ``key_concurrency`` is full, its rate tokens are spent) passes its turn. Within a key, the
job with the highest priority starts first, then the one that became runnable first (``priority_aging``
does not apply: turns already bound every key's wait).
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from jobloom.core.rows import KeyBucketRow, TurnCandidateRow
from jobloom.core.types import Candidate, Policy, Turn


class Starter(Protocol):
    """What :func:`by_turns` starts jobs through (:class:`jobloom.core.decide.Room`)."""

    policy: Policy

    def step(self, cand: Candidate) -> str:
        """Start ``cand`` if the limits allow: ``"started"``, ``"skipped"`` or ``"stop"``."""
        ...


def within_key(cands: Iterable[Candidate]) -> list[Candidate]:
    """A key's jobs in the order they start: by priority (desc), then ready time, then id."""
    return sorted(cands, key=lambda c: (-c.priority, c.ready_at, c.id))


def turn_order(keys: Iterable[str | None], turn: Turn, policy: Policy) -> list[str | None]:
    """``keys`` in the order their turns come after ``turn``: the key of ``turn`` first if its weight
    allows it another start, then the keys after it by name, the jobs without a key, the keys before it
    (and itself last)."""
    present = set(keys)
    named = sorted(k for k in present if k is not None)
    last = turn.key
    if last is None:
        ring: list[str | None] = [*named, *([None] if None in present else [])]
        return ring
    after = [k for k in named if k > last]
    before = [k for k in named if k <= last]
    ring = [*after, *([None] if None in present else []), *before]
    if last in present and turn.used < policy.weight(last):
        ring.remove(last)
        ring.insert(0, last)
    return ring


@dataclass(frozen=True, slots=True)
class Found:
    """What the reads of candidates by turn found besides the candidates: ``unread``, the keys that may
    have more queued jobs than were read (as many read as the key's share, when the share was below
    the most a key starts in one dispatch); ``keys``, every key read; ``buckets``, the rate buckets of
    those keys that have one (no row: a full bucket); ``edge``, the last key read when the keys after it
    were not read (a read found as many keys as it looked for), and ``lapped``, whether that read went
    round (from the first name on): no key after the edge in turn order starts before those."""

    unread: frozenset[str] = frozenset()
    keys: frozenset[str] = frozenset()
    buckets: tuple[KeyBucketRow, ...] = ()
    edge: str | None = None
    lapped: bool = False


def found_by_turn(
    rows: Iterable[TurnCandidateRow], per_key: int, cut: str | None = None, lapped: bool = False
) -> Found:
    """:class:`Found` of ``rows`` (the reads of candidates by turn, a job once or more); ``per_key``: the
    most jobs of one key a dispatch starts; ``cut``, ``lapped``: :attr:`Found.edge`, :attr:`Found.lapped`."""
    seen: set[int] = set()
    counts: dict[str, int] = {}
    shares: dict[str, int] = {}
    buckets: dict[str, KeyBucketRow] = {}
    for r in rows:
        key = r.concurrency_key
        if key is None:
            continue
        if r.share > shares.get(key, 0):
            shares[key] = r.share
        if r.id not in seen:
            seen.add(r.id)
            counts[key] = counts.get(key, 0) + 1
        if r.tokens is not None and r.tokens_at is not None and key not in buckets:
            buckets[key] = KeyBucketRow(key, r.tokens, r.tokens_at)
    unread = frozenset(k for k, n in counts.items() if shares[k] < per_key and n >= shares[k])
    return Found(unread, frozenset(counts), tuple(buckets.values()), cut, lapped)


def cut_at(
    keys: int, after: str | None, first: Sequence[TurnCandidateRow], wrapped: Sequence[TurnCandidateRow] | None
) -> tuple[str | None, bool]:
    """Where the reads by turn stopped with keys after them unread (:attr:`Found.edge` and ``lapped``):
    ``first``, the rows read from the turn's key ``after`` on (from the first name when None), and
    ``wrapped``, those read from the first name on when ``first`` found too few keys. A read that found
    ``keys`` keys (as many as it looked for, less the full keys left out) may have stopped short of more;
    one that went round past ``after`` read every key."""
    rows = first if wrapped is None else wrapped
    found = {r.concurrency_key for r in rows if r.concurrency_key is not None}
    if not found or len(found) < keys:
        return None, False
    edge = max(found)
    if wrapped is not None and after is not None and edge >= after:
        return None, False
    return edge, wrapped is not None


def next_turn(turn: Turn, key: str | None) -> Turn:
    """The turn after a start of ``key``."""
    if key == turn.key and turn.used > 0:
        return Turn(key, turn.used + 1)
    return Turn(key, 1)


def by_turns(
    candidates: Iterable[Candidate], starter: Starter, turn: Turn, unread: Collection[str] = (),
    edge: tuple[str, bool] | None = None,
) -> tuple[Turn, bool]:
    """Start candidates key by key in turn (see the module's docstring) until a limit stops the hand-out
    or every key's jobs are started or held back; the turn after the last start, and whether the
    hand-out stopped at a key of ``unread`` whose jobs read ran out, or where the turn would pass
    ``edge`` (:attr:`Found.edge` and :attr:`Found.lapped`: the last key read before keys left unread):
    read them from the turn on, and go on.

    The keys sit on a ring sorted once (the jobs without a key last); each turn walks it from the key that
    started last: what :func:`turn_order` would put first, without sorting the keys at every start."""
    queues: dict[str | None, list[Candidate]] = {}
    for cand in candidates:
        queues.setdefault(cand.key, []).append(cand)
    for queue in queues.values():
        queue[:] = within_key(queue)
        queue.reverse()  # the next job of a key is at the end: taken by pop()
    named = sorted(k for k in queues if k is not None)
    ring: list[str | None] = [*named, *([None] if None in queues else [])]
    policy = starter.policy
    first, reached = turn.key, (-1, "")
    beyond = None if edge is None else _edge_rank(edge[0], edge[1], first)
    while queues:
        key = _next_seat(ring, named, queues, turn, policy)
        if beyond is not None and not (key is not None and key == turn.key and turn.used < policy.weight(key)):
            rank = _rank(key, first)
            if rank > beyond or rank < reached:  # past the edge, or round again: the unread keys come first
                return turn, True
            reached = rank
        queue = queues[key]
        if not queue:  # a key of ``unread`` whose jobs read are all started: its next ones are not read
            return turn, True
        outcome = starter.step(queue[-1])
        if outcome == "stop":
            break
        if outcome == "skipped":  # the key passes its turn: none of its jobs can start in this decision
            del queues[key]
            continue
        queue.pop()
        if not queue and key not in unread:
            del queues[key]
        turn = next_turn(turn, key)
    return turn, False


def _next_seat(
    ring: list[str | None], named: list[str], live: Mapping[str | None, object], turn: Turn, policy: Policy
) -> str | None:
    """The first key of :func:`turn_order` among the keys still in ``live`` (not empty): ``ring`` is every
    key sorted (the jobs without a key last), ``named`` the same without them."""
    last = turn.key
    if last is None:
        start = 0
    else:
        if last in live and turn.used < policy.weight(last):
            return last
        start = bisect.bisect_right(named, last)
    size = len(ring)
    for step in range(size):
        key = ring[(start + step) % size]
        if key in live:
            return key
    raise AssertionError("a turn among no keys")


def _rank(key: str | None, first: str | None) -> tuple[int, str]:
    """Where ``key`` comes in turn order after ``first`` (the key that started last when the hand-out
    began): the keys after it, the jobs without a key, the keys up to it."""
    if key is None:
        return (1, "")
    return (0, key) if first is None or key > first else (2, key)


def _edge_rank(edge: str, lapped: bool, first: str | None) -> tuple[int, str]:
    """The last rank in turn order (:func:`_rank`) read before keys left unread: ``edge`` as found by a
    read that went round (``lapped``) or by the read from the turn's key on (the key ``first`` itself
    comes last in turn order; read first, it is the edge when no key after it was read)."""
    if lapped:
        return (2, edge)
    return (0, edge) if first is None or edge > first else (-1, "")
