"""The records of debounce and expiry's named queries (see :mod:`jobloom.core.deadlines`)."""

from __future__ import annotations

from typing import NamedTuple


class DebouncedRow(NamedTuple):
    """The newest job of a debounce key that is still scheduled and never started."""

    id: int
    run_at: float
    created_at: float


class ExpiredRow(NamedTuple):
    """A job ``expire_due`` ended: what its event needs, and whether jobs wait for it."""

    id: int
    binding: str
    attempt: int
    dependants: bool
    parent_id: int | None = None  # the caller whose self.call made it: woken


class JobTimingRow(NamedTuple):
    """A job's debounce key and expiry (``job_timing``)."""

    debounce_key: str | None
    expires_at: float | None
