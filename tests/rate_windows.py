"""The rate limit's rule, checked on recorded start times: every window of length W holds at most
``burst + rate * W`` starts."""

from __future__ import annotations

from collections.abc import Iterable

#: How far apart two starts may look only because their times were read back as datetimes
#: (microseconds): the rule is checked with this much added to each window.
DATETIME_RESOLUTION = 1e-6


def window_violations(
    starts: Iterable[float], rate: float, burst: float, *, resolution: float = 0.0
) -> list[tuple[int, float, float]]:
    """Every window that holds too many starts, as ``(starts inside, begin, length)``.

    The tightest window around the sorted starts ``i..j`` is ``[t_i, t_j]``, and any other window
    holding those starts is longer: checking each pair checks every window, whatever its begin."""
    times = sorted(starts)
    bad = []
    for i, begin in enumerate(times):
        for j in range(i, len(times)):
            length = times[j] - begin
            inside = j - i + 1 + sum(1 for t in times[j + 1:] if t == times[j])
            if inside > burst + rate * (length + resolution):
                bad.append((inside, begin, length))
    return bad
