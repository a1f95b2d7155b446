"""A worker's timing: when its loop wakes, how long a dispatch waits for a rate token, and in which
order its cycles dispatch their bindings.

With a burst of 1 a rate token not taken the moment it is due is lost for good, and a cycle needs
time (its reads, round trips to the store, a loaded machine) to reach its dispatch. :class:`Pacing`
learns both from the worker's own cycles: it wakes the loop early by how late its decisions came,
and has a dispatch wait, under the binding's lock, for a token due before the worker's next cycle
could come back for it. :class:`Rotation` turns the bindings' order from cycle to cycle, so each
gets the first claim on free slots in turn, and puts first a binding whose lock a cycle could not
wait for (see ``wait_for_lock`` of :func:`~jobloom.engine.dispatch.dispatch`).
"""

from __future__ import annotations

from collections.abc import Sequence

TIMER_LEAD = 0.001
"""Seconds before a due moment that the timer fires: the event loop's timers wake up to a
millisecond late (the poll's resolution), and a rate token lost to lateness is not made up."""
TOKEN_LEAD_CAP = 0.025
"""At most this many seconds early does a worker wake for a rate token (see :meth:`Pacing.aim`)."""
TOKEN_EARLY = 0.001
"""How early before a rate token is due a worker aims its dispatch's decision: it then waits for the
token under the binding's lock (``token_wait`` of :func:`~jobloom.engine.dispatch.dispatch`)."""
SMOOTHING = 0.2
"""The weight of the newest cycle in the smoothed cycle time."""


class Pacing:
    """What a worker has learnt of its own cycles' timing (one per worker)."""

    def __init__(self) -> None:
        self.lead = TIMER_LEAD  # how early to wake for a rate token
        self.cycle_time = 0.0  # how long its cycles take without their waits for tokens, smoothed
        self.aimed: float | None = None  # the token moment the coming cycle woke for

    def wake_at(self, next_due: float | None, token_at: float | None) -> float | None:
        """When to run the next cycle: a little before the next due moment, earlier for a rate token."""
        moments = [next_due - TIMER_LEAD] if next_due is not None else []
        if token_at is not None:
            moments.append(token_at - self.lead)
        return min(moments) if moments else None

    def slept(self, when: float | None, token_at: float | None) -> None:
        """The loop slept until ``when`` (the timer fired): if that was for the token at ``token_at``,
        the coming cycle's decision tells how well it was aimed."""
        self.aimed = token_at if token_at is not None and when == token_at - self.lead else None

    def token_wait(self) -> float:
        """How long a dispatch waits for a token under the binding's lock: a token due before this worker's
        next cycle could come back to it (skipped, it would be taken a cycle late)."""
        return min(TOKEN_LEAD_CAP, max(self.lead, self.cycle_time) + TOKEN_EARLY)

    def take_aim(self) -> float | None:
        """A cycle begins: the token moment it woke for, if it did (then forgotten)."""
        aimed, self.aimed = self.aimed, None
        return aimed

    def cycle_done(self, aimed: float | None, decided_at: float | None, took: float) -> None:
        """A cycle that woke for the token at ``aimed`` (see :meth:`take_aim`) ended: it decided a
        rate-limited dispatch at ``decided_at`` (or did not), and took ``took`` seconds besides its
        waits for tokens."""
        if aimed is not None and decided_at is not None:
            self.aim(aimed, decided_at)
        self.cycle_time += (min(took, TOKEN_LEAD_CAP) - self.cycle_time) * SMOOTHING

    def aim(self, aimed: float, decided_at: float) -> None:
        """Learn how early to wake for a rate token: a cycle woken for a token at ``aimed`` decided at
        ``decided_at``; move the lead so that decisions come :data:`TOKEN_EARLY` before their token,
        then wait for it in the lock."""
        error = decided_at - aimed + TOKEN_EARLY
        self.lead = min(TOKEN_LEAD_CAP, max(TIMER_LEAD, self.lead + error * 0.5))


class Rotation:
    """The order in which a worker's cycles dispatch its bindings."""

    def __init__(self, bindings: Sequence[str]) -> None:
        self.bindings = list(bindings)
        self._turn = 0
        self._first: list[str] = []

    def next(self) -> list[str]:
        """The order for the coming cycle: the bindings that were contended last time, then the rest
        from this cycle's turn on."""
        n = len(self.bindings)
        turned = self.bindings[self._turn:] + self.bindings[: self._turn]
        self._turn = (self._turn + 1) % max(1, n)
        first, self._first = self._first, []
        return first + [b for b in turned if b not in first] if first else turned

    def contended(self, bindings: Sequence[str]) -> None:
        """These bindings' locks were held by others and not waited for: dispatch them first next time
        (the first lock a cycle takes is waited for)."""
        self._first = [b for b in bindings if b in self.bindings]
