"""The records of dependencies between jobs that the store returns (:mod:`jobloom.core.rows` says how
records are made and read)."""

from __future__ import annotations

from typing import NamedTuple


class DependencyRow(NamedTuple):
    """A job that a new job depends on, locked and marked as having dependants."""

    id: int
    state: str
    run_id: str | None


class EdgeRow(NamedTuple):
    """An edge closed because its dependency ended: ``job_id`` depends on ``depends_on``."""

    job_id: int
    depends_on: int


class CountdownRow(NamedTuple):
    """A waiting job's count of dependencies still open, after a count down."""

    job_id: int
    pending: int
    on_failure: str
    batch_id: int | None


class SkippedRow(NamedTuple):
    """A waiting job skipped because a dependency did not succeed: what its event and its own
    dependants need."""

    id: int
    binding: str
    attempt: int
    dependants: bool


class LinkRow(NamedTuple):
    """A job linked to another (a dependency or a dependant) and its state (None: deleted since)."""

    id: int
    state: str | None


class BatchRow(NamedTuple):
    """A batch of jobs (``jobloom_batches``): the ids of its callbacks' jobs."""

    id: int
    on_complete: int | None
    on_success: int | None
    created_at: float


class StateNRow(NamedTuple):
    """A count of jobs in one state."""

    state: str
    n: int
