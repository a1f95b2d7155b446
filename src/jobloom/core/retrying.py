"""Waiting between tries: the one exponential backoff of every loop that waits for a store, a server,
a connection or a process to come back.

It only says how long to wait; each loop sleeps in its own way (on a timer it can cut short, on a
wake-up) and decides itself when to give up. A job's retry backoff is another thing: a performer's
``backoff`` option (:class:`jobloom.core.options.Backoff`), applied by :mod:`jobloom.core.lifecycle`.
"""

from __future__ import annotations

import random

_SHARED = random.Random()  # seeding a generator per series costs more than the series' own work


class Delays:
    """Waits that double from ``first`` up to ``cap``; :meth:`reset` after a success starts again.

    With ``jitter``, each wait is drawn between half and all of its value, so that processes that
    failed together (a server restart) do not all try again at the same moment.
    """

    __slots__ = ("_rng", "cap", "current", "first", "jitter")

    def __init__(self, first: float, cap: float, *, jitter: bool = False, rng: random.Random | None = None) -> None:
        self.first = first
        self.cap = cap
        self.jitter = jitter
        self.current = first
        """The next wait, before jitter (for a deadline check or a log line)."""
        self._rng = rng or _SHARED

    def next(self) -> float:
        """The wait to take now; the one after it is twice as long (up to ``cap``)."""
        wait = self.current
        self.current = min(self.current * 2, self.cap)
        return wait * (0.5 + self._rng.random() / 2) if self.jitter else wait

    def reset(self) -> None:
        """Start again from ``first`` (after a success)."""
        self.current = self.first

    def nth(self, n: int) -> float:
        """The ``n``-th wait of the series (from 1), before jitter, for a caller that counts its failures itself."""
        return min(self.cap, self.first * 2.0 ** min(max(0, n - 1), 64))
