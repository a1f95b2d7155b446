"""The run-time histogram of the read model: logarithmic buckets about 5 % wide.

Bucket 0 holds run times up to :data:`HIST_BASE` (10 µs); bucket ``i`` holds
``(HIST_BASE * HIST_RATIO**(i-1), HIST_BASE * HIST_RATIO**i]``. The projector's SQL computes the same
bucket (``fold_events`` of each dialect, tested against :func:`bucket_of`), and the engine uses it to
write several events of one cycle as one counted outbox row.
"""

from __future__ import annotations

import math

HIST_BASE = 0.00001
"""The upper bound of bucket 0, in seconds."""
HIST_RATIO = 1.1
"""The ratio between the bounds of consecutive buckets."""
TIMED_KINDS = frozenset({"succeeded", "failed", "retried"})
"""Event kinds of attempts that ran and ended: their run time counts in the histogram."""


def bucket_of(seconds: float) -> int:
    """The histogram bucket of a run time."""
    if seconds <= HIST_BASE:
        return 0
    return max(1, math.ceil(math.log(seconds / HIST_BASE) / math.log(HIST_RATIO) - 1e-9))


def bucket_value(index: int) -> float:
    """A representative run time of a bucket (the geometric middle of its bounds)."""
    return HIST_BASE / 2 if index == 0 else HIST_BASE * HIST_RATIO ** (index - 0.5)


def timed_bucket(kind: str, duration: float | None) -> int | None:
    """The bucket an event's run time counts in, or ``None`` when it counts in none (an event of
    another kind, no run time, or a negative one)."""
    if kind in TIMED_KINDS and duration is not None and duration >= 0:
        return bucket_of(duration)
    return None


__all__ = ["HIST_BASE", "HIST_RATIO", "TIMED_KINDS", "bucket_of", "bucket_value", "timed_bucket"]
