"""The records the store returns: one named, typed tuple per shape of row.

Code outside the store reads rows by column name (``row.attempt``), never by position. Which query
returns which record is said once, in :mod:`jobloom.core.queries`; the store builds the records in one
place (:meth:`jobloom.store.base.Tx.fetch`). A record's fields are the query's result columns, in
order, in both dialects (``tests/conformance/test_rows.py`` checks it). Records are tuples, so
building one costs what a tuple costs.
"""

from __future__ import annotations

from typing import NamedTuple

# the records of flow runs live in a module of their own; importers may take them from here
from jobloom.core.run_rows import (
    ChildRow,
    NewChildRow,
    NodeResultRow,
    NodeRow,
    NodeStateRow,
    RunJobRow,
    RunRow,
    RunsJobRow,
    RunStateRow,
)

__all__ = [  # the re-exported flow records (every record defined below is public too)
    "ChildRow",
    "NewChildRow",
    "NodeResultRow",
    "NodeRow",
    "NodeStateRow",
    "RunJobRow",
    "RunRow",
    "RunStateRow",
    "RunsJobRow",
]


class JobRow(NamedTuple):
    """A job as the API reads it."""

    id: int
    binding: str
    state: str
    payload: str
    attempt: int
    max_attempts: int
    priority: int
    run_at: float
    unique_key: str | None
    concurrency_key: str | None
    delivery: str
    result: str | None
    error: str | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    cancel_requested: bool
    run_id: str | None
    node: str | None
    tags: str | None
    meta: str | None
    progress: str | None
    retries_from: int


class ClaimRow(NamedTuple):
    """A job a worker just claimed."""

    id: int
    binding: str
    payload: str
    attempt: int
    max_attempts: int
    timeout: float | None
    delivery: str
    run_id: str | None
    node: str | None
    run_at: float  # when it became due: the wait is its start less this
    meta: str | None  # JSON text: carries the enqueuer's trace context when tracing is on


class MovedRow(NamedTuple):
    """A job a statement moved to another state: what its event needs."""

    id: int
    binding: str
    attempt: int


class CandidateRow(NamedTuple):
    """A runnable job, as dispatch weighs it."""

    id: int
    priority: int
    run_at: float
    concurrency_key: str | None


class RunningRow(NamedTuple):
    """A running job, locked to report or reap its attempt."""

    id: int
    binding: str
    state: str
    attempt: int
    retries_from: int
    max_attempts: int
    delivery: str
    cancel_requested: bool
    lease_owner: str | None
    started_at: float | None
    run_id: str | None
    node: str | None
    timeout: float | None
    claim_hash: str | None
    dependants: bool
    expires_at: float | None = None  # a retry due at or past it ends the job expired
    parent_id: int | None = None  # the caller whose ``self.call`` made the job: woken when it ends


class LockedJobRow(NamedTuple):
    """A job locked to cancel or retry it."""

    id: int
    state: str
    attempt: int
    binding: str
    run_id: str | None
    node: str | None
    dependants: bool
    parent_id: int | None = None


class HeldRow(NamedTuple):
    """A job a worker holds (``running_of_worker``)."""

    id: int
    attempt: int
    binding: str


class HeartbeatRow(NamedTuple):
    """An attempt whose lease a heartbeat renewed."""

    id: int
    attempt: int
    cancel_requested: bool


class RemoteBeatRow(NamedTuple):
    """A remote attempt whose lease a heartbeat renewed (fenced by its claim)."""

    id: int
    attempt: int
    cancel_requested: bool
    binding: str
    lease_expires: float


class RemoteAttemptRow(NamedTuple):
    """A running attempt as the pull protocol checks a heartbeat that did not renew it."""

    id: int
    attempt: int
    binding: str
    lease_owner: str | None
    claim_hash: str | None


class AttemptKeyRow(NamedTuple):
    """A running attempt asked to stop."""

    id: int
    attempt: int


class UniqueRow(NamedTuple):
    """The newest job with a unique key."""

    id: int
    state: str
    unique_until: float | None


class PolicyRow(NamedTuple):
    """A binding's stored limits, overrides and token bucket."""

    concurrency: int | None
    key_concurrency: int | None
    rate: float | None
    burst: float | None
    priority_aging: float | None
    backoff: str | None
    overrides: str | None
    tokens: float | None
    tokens_at: float | None
    paused: bool
    batch_size: int | None
    batch_wait: float | None


class BindingRow(NamedTuple):
    """A binding's row, as ``jobloom limits`` lists it."""

    binding: str
    concurrency: int | None
    key_concurrency: int
    rate: float | None
    burst: float | None
    priority_aging: float | None
    backoff: str | None
    overrides: str | None
    tokens: float | None
    tokens_at: float | None
    paused: bool
    batch_size: int | None
    batch_wait: float | None
    paused_at: float | None
    keyed: bool | None


class KeyCountRow(NamedTuple):
    """Running jobs per concurrency key."""

    concurrency_key: str
    n: int


class StateCountRow(NamedTuple):
    """Jobs per binding and state."""

    binding: str
    state: str
    n: int


class CountRow(NamedTuple):
    """A count."""

    n: int


class MomentRow(NamedTuple):
    """The earliest moment of something (None: there is none)."""

    at: float | None


class ChildCountRow(NamedTuple):
    """How many children of a run's node ``top`` are in ``state``."""

    top: str
    state: str
    n: int


class NoteRow(NamedTuple):
    """A note on a job: when, who (an API token's name) and what they did."""

    at: float
    actor: str
    what: str


class BindingMomentRow(NamedTuple):
    """A binding and the earliest moment of something about it."""

    binding: str
    at: float


class BindingOfRow(NamedTuple):
    """The binding of a job."""

    binding: str


class RunIdRow(NamedTuple):
    """A run's id."""

    id: str


class JobRunRow(NamedTuple):
    """The run a job belongs to (None: none)."""

    run_id: str | None


class JobStateRow(NamedTuple):
    """A job's state."""

    state: str


class PriorAttemptRow(NamedTuple):
    """What an attempt's history row says."""

    worker: str | None
    outcome: str | None


class AttemptRow(NamedTuple):
    """One attempt of a job (``jobloom_attempts``)."""

    job_id: int
    attempt: int
    worker: str | None
    started_at: float
    finished_at: float | None
    outcome: str | None
    error: str | None
    traceback: str | None
    reported_outcome: str | None
    reported_at: float | None


class SignalRow(NamedTuple):
    """An event sent to a job."""

    data: str | None


class StepRow(NamedTuple):
    """A durable step's recorded result."""

    name: str
    result: str | None


class StoredScheduleRow(NamedTuple):
    """A schedule's stored state (``jobloom_schedules``)."""

    name: str
    origin: str
    definition: str
    paused: bool
    last_tick: float | None
    next_run: float | None
    last_run_at: float | None
    last_job_id: int | None
    last_run_id: str | None
    last_error: str | None
    last_error_at: float | None
    fired: int
    skipped: int


class RulesRow(NamedTuple):
    """A binding's stored enqueue rules (JSON; None: none stored), and whether a worker registered it."""

    binding: str
    registered: bool
    rules: str | None


class RetentionRow(NamedTuple):
    """A binding's stored retention (JSON)."""

    binding: str
    retention: str | None


class PruneRow(NamedTuple):
    """A finished job picked for deletion."""

    id: int
    run_id: str | None


class EventRow(NamedTuple):
    """An outbox row (``jobloom_events``) of one job's event (a row counting several names no job)."""

    seq: int
    at: float
    job_id: int | None
    binding: str
    kind: str
    attempt: int
    duration: float | None


class ProjectedEventRow(NamedTuple):
    """An outbox row as the projector folds it: ``n`` events (one, or several counted together, whose run
    times add up to ``duration``, the longest ``top``, all in histogram bucket ``bucket``)."""

    seq: int
    at: float
    binding: str
    kind: str
    duration: float | None
    n: int = 1
    top: float | None = None
    bucket: int | None = None


class FoldedEventsRow(NamedTuple):
    """Outbox events counted together: one binding, minute, kind and run-time bucket (``None``: no run time),
    from ``rows`` outbox rows."""

    binding: str
    minute: int
    kind: str
    bucket: int | None
    n: int
    total: float | None
    top: float | None
    last_seq: int
    rows: int


class ProjectorRow(NamedTuple):
    """The projector's cursor."""

    last_seq: int
    updated_at: float


class CursorRow(NamedTuple):
    """The projector's cursor, locked."""

    last_seq: int


class StatsRow(NamedTuple):
    """One binding's minute of the read model (``jobloom_stats``)."""

    binding: str
    minute: int
    enqueued: int
    started: int
    succeeded: int
    failed: int
    retried: int
    cancelled: int
    stalled: int
    expired: int
    runs: int
    run_time: float
    run_max: float | None
    histogram: str


class WorkerRow(NamedTuple):
    """A live worker process in the registry of workers."""

    name: str
    host: str
    pid: int
    bindings: str
    concurrency: int
    beat: float
    started_at: float
    seen_at: float


class SnoozeRow(NamedTuple):
    """How many times a job was snoozed."""

    id: int
    snoozes: int


class TokenRow(NamedTuple):
    """An API token (its secret only as a hash)."""

    name: str
    prefix: str
    secret_hash: str
    scopes: str
    created_at: float
    revoked_at: float | None
    bindings: str | None


class NodeJobRow(NamedTuple):
    """A job of a run by its node (what a diagnosis links to)."""

    id: int
    node: str | None
    state: str


class JobIdRow(NamedTuple):
    """A job's id."""

    id: int
