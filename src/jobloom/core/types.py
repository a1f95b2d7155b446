"""Shared value types: jobs, attempts, run context, and what the coordinator decides with."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, Protocol, TypeVar

from jobloom.core.blobref import PREFIX
from jobloom.core.errors import PayloadOffloaded
from jobloom.core.options import RateLimit
from jobloom.core.states import FINISHED_STATES

T = TypeVar("T")


def to_datetime(ts: float | None) -> datetime | None:
    """Epoch seconds (as stored) to an aware UTC datetime."""
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


class Clock(Protocol):
    """A clock an app reads instead of its store's (``jobloom.testing.TestClock``)."""

    def now(self) -> float:
        """The time, in epoch seconds."""
        ...

    def attach(self, app: Any) -> None:
        """Called by each ``App`` built with this clock."""
        ...


@dataclass(frozen=True, eq=False)
class Job:
    """A snapshot of one job as the store holds it.

    Payload, result and times are stored as JSON text and epoch seconds, and decoded on first
    access (``payload``, ``result``, ``run_at``, ``created_at``, ``started_at``, ``finished_at``).
    """

    id: int
    binding: str
    state: str
    attempt: int
    max_attempts: int
    priority: int
    unique_key: str | None
    concurrency_key: str | None
    delivery: str
    error: str | None
    payload_json: str = field(repr=False)
    result_json: str | None = field(repr=False)
    run_ts: float | None = field(repr=False)
    created_ts: float = field(repr=False)
    started_ts: float | None = field(repr=False)
    finished_ts: float | None = field(repr=False)
    cancel_requested: bool = False
    run_id: str | None = None
    node: str | None = None
    tags_json: str | None = field(default=None, repr=False)
    meta_json: str | None = field(default=None, repr=False)
    progress_json: str | None = field(default=None, repr=False)
    retries_from: int = field(default=0, repr=False)
    parent_id: int | None = None
    """The job whose ``self.call`` made this one (its caller), if any."""

    @property
    def attempts_spent(self) -> int:
        """The attempts of the current budget spent, the running one included: executions that failed,
        timed out, were lost or asked for a retry since the job was enqueued or last retried by hand.

        A durable sleep, an event wait and a ``Snooze`` spend none, and a manual retry gives a fresh
        budget, so this never exceeds ``max_attempts``. ``attempt`` numbers every execution (it is what
        the attempt history and lease fencing use) and only ever grows."""
        return self.attempt - self.retries_from

    @cached_property
    def payload(self) -> Any:
        """The payload, decoded from JSON (a dict for dataclass and model payloads); ``PayloadOffloaded`` for
        a job read in a list whose payload is in the blob store (``App.get_job`` loads it)."""
        return json.loads(_content(self, "payload", self.payload_json))

    @cached_property
    def result(self) -> Any:
        """The stored result, decoded from JSON (None until succeeded); ``PayloadOffloaded`` as for ``payload``."""
        return None if self.result_json is None else json.loads(_content(self, "result", self.result_json))

    @cached_property
    def tags(self) -> list[str]:
        """The tags given at enqueue (empty if none)."""
        return [] if self.tags_json is None else list(json.loads(self.tags_json))

    @cached_property
    def meta(self) -> dict[str, Any]:
        """The metadata given at enqueue (empty if none)."""
        return {} if self.meta_json is None else dict(json.loads(self.meta_json))

    @property
    def run_at(self) -> datetime | None:
        """Not runnable before this moment."""
        return to_datetime(self.run_ts)

    @property
    def created_at(self) -> datetime:
        """When it was enqueued."""
        return datetime.fromtimestamp(self.created_ts, UTC)

    @property
    def started_at(self) -> datetime | None:
        """When its latest attempt started."""
        return to_datetime(self.started_ts)

    @property
    def finished_at(self) -> datetime | None:
        """When it reached a terminal state."""
        return to_datetime(self.finished_ts)

    @property
    def finished(self) -> bool:
        """Whether the job is in a terminal state (until retried by hand)."""
        return self.state in FINISHED_STATES

    @cached_property
    def progress(self) -> Progress | None:
        """The latest progress its performer reported (``self.ctx.progress``), kept after the job ends;
        None if it never reported any."""
        if self.progress_json is None:
            return None
        data = json.loads(self.progress_json)
        return Progress(float(data["fraction"]), data.get("message"), datetime.fromtimestamp(data["at"], UTC),
                        int(data["attempt"]))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Job) and self.id == other.id and self.state == other.state and (
            self.attempt == other.attempt
        )

    def __hash__(self) -> int:
        return hash((self.id, self.state, self.attempt))

    def __repr__(self) -> str:
        extra = f", error={self.error!r}" if self.error else ""
        return (f"Job(id={self.id}, binding={self.binding!r}, state={self.state!r}, attempt={self.attempt}, "
                f"priority={self.priority}, payload={self.payload_json[:80]}{extra})")


def _content(job: Job, what: str, text: str) -> str:
    """``text`` unless it is a blob reference (see ``core/blobref.py``), which raises ``PayloadOffloaded``."""
    if text.startswith(PREFIX):
        raise PayloadOffloaded(job.id, what, text)
    return text


_JOB_FIELDS = tuple(f.name for f in fields(Job))


def job_of(values: tuple[Any, ...]) -> Job:
    """A :class:`Job` from all its field values in declaration order: what ``Job(*values)`` makes,
    without a frozen dataclass's ``__init__`` (which sets each of the 24 fields through
    ``object.__setattr__``; the store builds one per job it returns)."""
    if len(values) != len(_JOB_FIELDS):
        raise TypeError(f"job_of takes {len(_JOB_FIELDS)} values, not {len(values)}")
    job = object.__new__(Job)
    job.__dict__.update(zip(_JOB_FIELDS, values, strict=True))
    return job


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a job got, as its performer said: ``fraction`` (0 to 1), a ``message``, when, and in
    which attempt."""

    fraction: float
    message: str | None
    at: datetime
    attempt: int


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


class AttemptControl(Protocol):
    """The worker's side of one running attempt, behind ``self.ctx`` (``jobloom.engine.control``)."""

    sync: bool

    @property
    def stop_reason(self) -> str | None:
        """Why the worker asked the attempt to stop, or None."""
        ...

    def progress(self, fraction: float, message: str | None) -> None:
        """Check and record progress (from the event loop or the job's thread)."""
        ...

    def call(self, work: Awaitable[T]) -> T:
        """Run an awaitable on the worker's event loop from the job's thread; its result."""
        ...


class JobLinks(Protocol):
    """The store work behind ``ctx.dependencies()`` and ``ctx.batch`` (``jobloom.engine.links``)."""

    def dependencies(self, job_id: int) -> Awaitable[dict[int, Job]]:
        """The jobs that job ``job_id`` depends on, by id."""
        ...

    def batch_add(self, job_id: int, attempt: int, items: Any, *, worker: str,
                  started_at: float | None) -> Awaitable[list[Job]]:
        """Add jobs to the batch of job ``job_id``, whose attempt ``attempt`` runs under the claim that
        ``worker`` made at ``started_at``."""
        ...


class BatchOfJob:
    """``self.ctx.batch``: the batch the running job belongs to."""

    def __init__(self, ctx: JobContext) -> None:
        self._ctx = ctx

    def add(self, items: Any) -> Any:
        """Add jobs to this job's batch (items as in ``App.enqueue_many``), before the batch can
        complete: its callbacks then wait for them too. Their ``Job``s; ``await`` it in an async
        ``perform``, in a sync one it returns them. A job in no batch raises ``InvalidOption``."""
        ctx = self._ctx
        if ctx.links is None:
            raise RuntimeError("ctx.batch is only available inside a running job (not in a process-isolated one)")
        call = ctx.links.batch_add(ctx.job_id, ctx.attempt, list(items), worker=ctx.worker,
                                   started_at=ctx.started_at)
        return ctx.control.call(call) if ctx.control is not None and ctx.control.sync else call


class _Recorded:
    """What an async ``ctx.progress`` returns: already done, awaitable."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield


_RECORDED = _Recorded()


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a running performer knows about its job: ``self.ctx``."""

    job_id: int
    binding: str
    attempt: int
    deadline: float | None
    worker: str
    max_attempts: int
    run_id: str | None = None
    node: str | None = None
    spawner: Callable[..., Awaitable[Job]] | None = field(default=None, repr=False, compare=False)
    control: AttemptControl | None = field(default=None, repr=False, compare=False)
    links: JobLinks | None = field(default=None, repr=False, compare=False)
    version: int = 1
    """The performer's ``version`` that first ran this job: the running code's for a job it starts, the
    stored one for a job it resumes (1 for a job first run by code without a ``version``)."""
    started_at: float | None = None
    """When the attempt's claim started it, as the claim stored it: with ``worker``, what fences the
    attempt's writes to its own claim (None outside a claimed attempt)."""

    @property
    def sync(self) -> bool:
        """Whether ``perform`` is a plain ``def``: then ``spawn`` and ``progress`` are synchronous too."""
        return self.control is not None and self.control.sync

    @property
    def cancelled(self) -> bool:
        """Whether the worker asked this attempt to stop (a cancel, the timeout, a lost lease, a shutdown).

        An async ``perform`` is cancelled anyway; a sync one checks this to stop cooperatively."""
        return self.control is not None and self.control.stop_reason is not None

    def spawn(self, child_id: str, performer: Any, payload: Any, **options: Any) -> Any:
        """Enqueue a child job, idempotent by ``child_id``: the same id again returns the same job.

        ``await`` it in an async ``perform``; in a sync one it returns the job."""
        if self.spawner is None:
            raise RuntimeError("spawn is only available inside a running job (not in a process-isolated one)")
        call = self.spawner(self.job_id, child_id, performer, payload, **options)
        return self.control.call(call) if self.control is not None and self.control.sync else call

    def dependencies(self) -> Any:
        """The jobs this job depends on (``depends_on``), as ``{job id: Job}`` with their states and results.

        ``await`` it in an async ``perform``; in a sync one it returns the dict."""
        if self.links is None:
            raise RuntimeError("dependencies are only available inside a running job (not in a process-isolated one)")
        call = self.links.dependencies(self.job_id)
        return self.control.call(call) if self.control is not None and self.control.sync else call

    @property
    def batch(self) -> BatchOfJob:
        """The batch this job belongs to: ``self.ctx.batch.add([(Performer, payload), ...])``."""
        return BatchOfJob(self)

    def progress(self, fraction: float, message: str | None = None) -> Any:
        """Record how far the job got: ``fraction`` from 0 to 1 and an optional ``message``.

        Recorded at once in memory and written to the store at most once a second (the latest value
        wins); ``Job.progress`` reads it. ``await`` it in an async ``perform``; in a sync one it returns
        None. A bad fraction raises ``InvalidOption``."""
        if self.control is None:
            raise RuntimeError("progress is only available inside a running job")
        self.control.progress(fraction, message)
        return None if self.control.sync else _RECORDED


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch of jobs (``App.batch``): its jobs' ids, and how many of them ``succeeded``, ``failed``
    (failed, stalled or skipped), were ``cancelled`` or are still ``pending``; ``on_complete`` and
    ``on_success``: the ids of its callbacks' jobs (None if not given)."""

    id: int
    job_ids: list[int]
    total: int
    succeeded: int
    failed: int
    cancelled: int
    pending: int
    on_complete: int | None = None
    on_success: int | None = None

    @property
    def finished(self) -> bool:
        """Whether every job of the batch ended."""
        return self.pending == 0


@dataclass(frozen=True, slots=True)
class NodeState:
    """One node of a run (fan-out children appear as ``name:0``, ``name:1``... or ``name:<key>``, and
    children a node spawned as ``name/<child id>``)."""

    name: str
    job_id: int
    state: str
    attempt: int
    result: Any
    error: str | None


@dataclass(frozen=True, slots=True)
class Run:
    """A started instance of a flow: ``running``, ``cancelling`` or ``failing`` (being stopped: some of
    its jobs still run), ``succeeded``, ``failed`` or ``cancelled``. ``nodes``: every job of the run by
    node name; ``graph``: the run's DAG (node -> upstream nodes)."""

    id: str
    flow: str
    state: str
    input: Any
    deadline: datetime | None
    parent_job_id: int | None
    error: str | None
    created_at: datetime
    finished_at: datetime | None
    nodes: dict[str, NodeState]
    graph: dict[str, list[str]] = field(default_factory=dict)
    """The flow's nodes as the run was started: each node's upstream nodes (fan-out children and
    spawned children are not in it: they belong to their node, see :func:`jobloom.flows.runs.top_node`)."""


@dataclass(frozen=True, slots=True)
class Policy:
    """A binding's limits as the coordinator applies them."""

    concurrency: int | None = None
    key_concurrency: int = 1
    rate: RateLimit | None = None
    priority_aging: float | None = 60.0
    paused: bool = False
    batch_size: int | None = None  # a batch performer's: its jobs start in batches, `concurrency` counts batches
    batch_wait: float = 0.0
    fairness: str | None = None  # "round_robin": the keys take turns (jobloom.core.turns)
    key_weights: tuple[tuple[str, int], ...] = ()  # turns in a row per key (others: 1), sorted by key
    key_rate: RateLimit | None = None  # one token bucket per concurrency key

    @property
    def limited(self) -> bool:
        """Whether dispatch needs serializing: any concurrency, key or rate limit, or turns between keys."""
        return (self.concurrency is not None or self.rate is not None or self.fairness is not None
                or self.key_rate is not None)

    def weight(self, key: str | None) -> int:
        """How many starts in a row a key's turn has under round-robin fairness (1 without a weight;
        the jobs without a key take turns as one key of weight 1)."""
        if key is None:
            return 1
        for name, weight in self.key_weights:
            if name == key:
                return weight
        return 1


@dataclass(frozen=True, slots=True)
class Turn:
    """Whose turn it is under round-robin fairness: the key that started last (None: the jobs without a
    key, or nothing started yet) and how many starts in a row it has had."""

    key: str | None = None
    used: int = 0


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
    """What dispatch hands out, the bucket after it, and what stopped it (dispatch reads
    ``blocked_by`` and ``skipped_keys`` to decide whether to look further). ``blocked_by`` is
    ``"keys"`` when only keys held jobs back and one was full, ``"key_tokens"`` when only keys out of
    rate tokens did; ``next_token_at`` is then when the first of those keys has a token again."""

    selected: tuple[int, ...]
    bucket: Bucket | None
    blocked_by: str | None = None
    next_token_at: float | None = None
    skipped_keys: frozenset[str] = field(default_factory=frozenset)
    turn: Turn | None = None  # under round-robin fairness: the turn after these starts
    key_buckets: dict[str, Bucket] = field(default_factory=dict)  # with a key rate: the buckets spent from
    unread: bool = False  # under turns: stopped at a key whose next jobs were not read (read on, go on)
