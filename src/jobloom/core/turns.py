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

from collections.abc import Iterable
from typing import Protocol

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


def next_turn(turn: Turn, key: str | None) -> Turn:
    """The turn after a start of ``key``."""
    if key == turn.key and turn.used > 0:
        return Turn(key, turn.used + 1)
    return Turn(key, 1)


def by_turns(candidates: Iterable[Candidate], starter: Starter, turn: Turn) -> Turn:
    """Start candidates key by key in turn (see the module's docstring) until a limit stops the hand-out
    or every key's jobs are started or held back; the turn after the last start."""
    queues: dict[str | None, list[Candidate]] = {}
    for cand in candidates:
        queues.setdefault(cand.key, []).append(cand)
    for key, queue in queues.items():
        queues[key] = within_key(queue)
    while queues:
        key = turn_order(queues, turn, starter.policy)[0]
        queue = queues[key]
        outcome = starter.step(queue[0])
        if outcome == "stop":
            break
        if outcome == "skipped":  # the key passes its turn: none of its jobs can start in this decision
            del queues[key]
            continue
        queue.pop(0)
        if not queue:
            del queues[key]
        turn = next_turn(turn, key)
    return turn
