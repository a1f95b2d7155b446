"""Shared value types: jobs, attempts, run context, and what the coordinator decides with."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .options import RateLimit


def to_datetime(ts: float | None) -> datetime | None:
    """Epoch seconds (as stored) to an aware UTC datetime."""
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


@dataclass(frozen=True, slots=True)
class Job:
    """A snapshot of one job as the store holds it."""

    id: int
    binding: str
    state: str
    payload: Any
    attempt: int
    max_attempts: int
    priority: int
    run_at: datetime | None
    unique_key: str | None
    concurrency_key: str | None
    delivery: str
    result: Any
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    cancel_requested: bool = False

    @property
    def finished(self) -> bool:
        """Whether the job is in a terminal state (until retried by hand)."""
        return self.state in ("succeeded", "failed", "stalled", "cancelled", "skipped")


@dataclass(frozen=True, slots=True)
class Attempt:
    """One execution of a job. ``reported_outcome`` holds a report that came too late (fenced off)."""

    job_id: int
    attempt: int
    worker: str | None
    started_at: datetime
    finished_at: datetime | None
    outcome: str | None
    error: str | None
    traceback: str | None
    reported_outcome: str | None = None
    reported_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a running performer knows about its job: ``self.ctx``."""

    job_id: int
    binding: str
    attempt: int
    deadline: float | None
    worker: str
    max_attempts: int


@dataclass(frozen=True, slots=True)
class Policy:
    """A binding's limits as the coordinator applies them."""

    concurrency: int | None = None
    key_concurrency: int = 1
    rate: RateLimit | None = None
    priority_aging: float | None = 60.0

    @property
    def limited(self) -> bool:
        """Whether dispatch needs serializing: any concurrency, key or rate limit."""
        return self.concurrency is not None or self.rate is not None


@dataclass(slots=True)
class Bucket:
    """Token bucket state: ``tokens`` as of ``updated_at`` (epoch seconds)."""

    tokens: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class Candidate:
    """A runnable job as the decision sees it: ``ready_at`` is when it became runnable."""

    id: int
    priority: int
    ready_at: float
    key: str | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """What dispatch hands out, the bucket after it, and what stopped it (for the dashboard)."""

    selected: tuple[int, ...]
    bucket: Bucket | None
    blocked_by: str | None = None
    next_token_at: float | None = None
    skipped_keys: frozenset[str] = field(default_factory=frozenset)
