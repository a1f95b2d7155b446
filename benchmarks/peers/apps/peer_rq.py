"""RQ's jobs: a no-op and a latency-stamping one (the queue is made by the protocol's adapter)."""

from __future__ import annotations

from stamps import drain_stamp, latency_stamp


def noop(i: int) -> None:
    drain_stamp()


def stamped(enqueued: float) -> None:
    latency_stamp(enqueued)
