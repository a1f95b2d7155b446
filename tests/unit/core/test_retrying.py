"""The one backoff of the loops that wait for a store, a server or a process to come back."""

from __future__ import annotations

import random

from jobloom.core.retrying import Delays


def test_waits_double_up_to_the_cap_and_start_again_after_a_reset() -> None:
    delays = Delays(0.05, 0.3)
    assert [delays.next() for _ in range(5)] == [0.05, 0.1, 0.2, 0.3, 0.3]
    assert delays.current == 0.3
    delays.reset()
    assert delays.current == 0.05 and delays.next() == 0.05


def test_jitter_draws_each_wait_from_the_upper_half() -> None:
    delays = Delays(1.0, 8.0, jitter=True, rng=random.Random(7))
    waits = [delays.next() for _ in range(200)]
    caps = [min(8.0, 2.0 ** i) for i in range(200)]
    assert all(cap / 2 <= w <= cap for w, cap in zip(waits, caps, strict=True))
    assert len({round(w, 6) for w in waits[10:]}) > 100  # drawn, not fixed


def test_the_nth_wait_follows_the_same_series() -> None:
    delays = Delays(0.5, 30.0)
    series = [delays.next() for _ in range(10)]
    assert [Delays(0.5, 30.0).nth(n) for n in range(1, 11)] == series
    assert Delays(0.5, 30.0).nth(10_000) == 30.0
