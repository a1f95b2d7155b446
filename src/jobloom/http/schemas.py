"""The JSON bodies of the HTTP API as pydantic models: what requests carry and what responses hold.

Requests are validated by FastAPI against these models (unknown fields are refused, so a typo is a
422, not a silently ignored option); the values' own limits are then checked by jobloom as for a
Python caller. Responses are written by :mod:`jobloom.http.encode` and described here for OpenAPI.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

JsonValue = Any


class Body(BaseModel):
    """A request body: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")


class JobOptions(Body):
    """The per-job options of an enqueue; each left out means the performer's default."""

    delay: float | None = Field(None, description="Seconds from now before the job may run.")
    run_at: datetime | float | None = Field(
        None, description="Not before this moment: ISO 8601 with a time zone, or epoch seconds.")
    priority: int | None = Field(None, description="Higher runs first.")
    unique_key: str | None = Field(
        None, description="A job with this key that is still unfinished (or within unique_for) is returned instead.")
    concurrency_key: str | None = Field(None, description="Jobs sharing a key are limited by key_concurrency.")
    max_attempts: int | None = None
    delivery: Literal["at_least_once", "at_most_once"] | None = None
    tags: list[str] | None = Field(None, description="Labels to search by (GET /v1/jobs?tags=...).")
    meta: dict[str, JsonValue] | None = Field(None, description="Any JSON object kept with the job.")
    debounce: float | None = Field(
        None, description="Seconds: enqueues with the same debounce_key within this window collapse into one "
                          "job, run once the window passes without another, with the latest payload.")
    debounce_key: str | None = Field(None, description="The key debounced enqueues collapse by (with debounce).")
    debounce_max: float | None = Field(
        None, description="Seconds after the key's first enqueue at which the debounced job runs at the latest.")
    expires_in: float | None = Field(
        None, description="Seconds from now: a job not started by then never starts (it ends expired).")
    expires_at: datetime | float | None = Field(
        None, description="A job not started by this moment never starts (it ends expired): ISO 8601 with a "
                          "time zone, or epoch seconds.")
    depends_on: list[int] | None = Field(
        None, max_length=1000, description="Ids of jobs that must end first: the job waits until they succeeded.")
    on_dependency_failure: Literal["skip", "run"] | None = Field(
        None, description="When a dependency fails, is cancelled or stalls: skip this job (the default) or run it.")


class EnqueueBody(JobOptions):
    """``POST /v1/jobs``: one job for ``binding`` with ``payload``."""

    binding: str = Field(description="The performer's binding name.")
    payload: JsonValue = Field(None, description="JSON, validated against the binding's payload type.")


class BatchBody(Body):
    """``POST /v1/jobs/batch``: jobs enqueued in one transaction, all or none."""

    jobs: list[EnqueueBody] = Field(min_length=1, max_length=10_000)


class ReasonOut(BaseModel):
    """One cause that holds a job back (``code``: ``debounce_window``, ``binding_full``, ``expires``,
    ...; see the how-to on finding jobs), the jobs it refers to, and when it ends if known."""

    code: str
    text: str
    job_ids: list[int]
    until: datetime | None


class DiagnosisOut(BaseModel):
    """Why a job is not running: every cause that holds it, or the one reason ``ready``; a running or
    finished job has none, but an ``expired`` one says why it never ran."""

    job_id: int
    state: str
    reasons: list[ReasonOut]
    ready: bool


class DependenciesOut(BaseModel):
    """The jobs a job depends on, and (up to 100 of) the jobs that depend on it, by id."""

    dependencies: list[int]
    dependants: list[int]


class CallbackBody(Body):
    """A batch's callback: a job of ``binding`` with ``payload`` (a JSON object; the batch's counts are
    merged in when it is enqueued)."""

    binding: str = Field(description="The performer's binding name.")
    payload: dict[str, JsonValue] | None = Field(None, description="A JSON object.")


class NewBatchBody(Body):
    """``POST /v1/batches``: jobs enqueued as one batch with its callbacks, in one transaction."""

    jobs: list[EnqueueBody] = Field(min_length=1, max_length=10_000)
    on_complete: CallbackBody | None = Field(None, description="Enqueued once, when every job of the batch ended.")
    on_success: CallbackBody | None = Field(None, description="Enqueued once, if every job of the batch succeeded.")


class JobBatchOut(BaseModel):
    """A batch of jobs: their ids and counts by outcome, and its callbacks' job ids."""

    id: int
    job_ids: list[int]
    total: int
    succeeded: int
    failed: int
    cancelled: int
    pending: int
    on_complete: int | None
    on_success: int | None


class ProgressOut(BaseModel):
    """How far a job got, as its performer last said (``ctx.progress``)."""

    fraction: float
    message: str | None
    at: datetime
    attempt: int


class JobOut(BaseModel):
    """A job as the API shows it (the fields of ``jobloom.Job``): ``attempt`` numbers its latest
    execution (every one, as its attempt history does); ``attempts_spent`` counts those that spent
    the current budget of ``max_attempts`` (sleeps, event waits and snoozes spend none; a manual
    retry starts a new budget)."""

    id: int
    binding: str
    state: str
    attempt: int
    attempts_spent: int
    max_attempts: int
    priority: int
    delivery: str
    payload: JsonValue
    result: JsonValue
    error: str | None
    unique_key: str | None
    concurrency_key: str | None
    run_at: datetime | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    cancel_requested: bool
    run_id: str | None
    node: str | None
    tags: list[str]
    meta: dict[str, JsonValue]
    progress: ProgressOut | None
    parent_id: int | None = Field(default=None, description="The job whose self.call made this one, if any.")


class JobExistsOut(BaseModel):
    """An enqueue's answer, to a token without ``read``, when a job with that ``unique_key`` exists: only
    what the caller needs to act (that job's id and state), not its payload, result or error."""

    id: int
    binding: str
    state: str
    existed: bool = Field(description="Always true: the job was there already; nothing was enqueued.")


class BatchOut(BaseModel):
    """The jobs a batch made, in the order given (to a token without ``read``, a job that was there already
    by its ``unique_key`` is shown as a ``JobExistsOut``)."""

    jobs: list[JobOut | JobExistsOut]


class AttemptOut(BaseModel):
    """One attempt of a job (a running one has no outcome yet)."""

    job_id: int
    attempt: int
    worker: str | None
    started_at: datetime
    finished_at: datetime | None
    outcome: str | None
    error: str | None
    traceback: str | None
    reported_outcome: str | None
    reported_at: datetime | None


class AttemptsOut(BaseModel):
    """Every attempt of a job, oldest first."""

    attempts: list[AttemptOut]


class PublishBody(Body):
    """An event published to a topic."""

    data: JsonValue = Field(None, description="The event's data (any JSON), each subscriber's job's payload: "
                                              "validated against every subscriber's payload type.")


class PublishOut(BaseModel):
    """The jobs a publish made, one per subscribed binding (none for a topic nobody subscribes to)."""

    topic: str
    jobs: list[JobOut]


class TopicsOut(BaseModel):
    """Each topic that a binding subscribes to, with those bindings."""

    topics: dict[str, list[str]]


class EventOut(BaseModel):
    """Whether an event woke a waiting job (it is stored either way)."""

    woken: bool


class NodeDef(Body):
    """One node of a flow given as data: a job of ``binding``, or with ``items`` a fan-out (one child job
    of ``binding`` per item). Its upstream nodes are ``after`` (and the ``edges`` that end at it)."""

    name: str
    binding: str = Field(description="A binding the app knows: the performer of the node (of each child).")
    after: list[str] = Field(default_factory=list, max_length=1000, description="Its upstream nodes.")
    payload: JsonValue = Field(None, description="The node's payload; left out: the run's input.")
    items: list[JsonValue] | None = Field(None, description="A fan-out over these items (no payload then).")
    on_upstream_failure: Literal["skip", "run"] | None = Field(
        None, description='"run": the node runs even when an upstream node did not succeed (default "skip").')
    on_failure: bool = Field(False, description="A node that runs only when the run fails, payload "
                                                '{"failed": {node: error}} (no after, no payload).')
    priority: int | None = None
    max_attempts: int | None = None
    delivery: Literal["at_least_once", "at_most_once"] | None = None
    concurrency_key: str | None = None
    delay: float | None = None
    tags: list[str] | None = None
    meta: dict[str, JsonValue] | None = None


class FlowDefinition(Body):
    """A flow given as data, started without being declared on the app: its nodes and edges."""

    nodes: list[NodeDef] = Field(min_length=1, max_length=1000)
    edges: list[tuple[str, str]] = Field(
        default_factory=list, max_length=10000, description="[upstream, downstream] pairs, beside each node's after.")


class RunBody(Body):
    """``POST /v1/runs``: start a run of a flow of the app, or (with ``definition``) of a flow given as
    data under the name ``flow``."""

    flow: str
    input: JsonValue = None
    id: str | None = Field(None, description="The run's id; the same id again returns the same run.")
    deadline: float | None = Field(None, description="Seconds; past it the run is stopped and fails.")
    definition: FlowDefinition | None = Field(
        None, description="A flow built now from data (nodes, bindings, edges, payloads), stored with the run; "
                          "its name (flow) must not be one of the app's flows.")


class RunStartedOut(BaseModel):
    """``POST /v1/runs``'s answer to a token without ``read``: the run's id and state, and whether a run
    with that id existed already (then nothing was started), never its input or its nodes' results."""

    id: str
    flow: str
    state: str
    existed: bool


class NodeOut(BaseModel):
    """One node of a run."""

    name: str
    job_id: int
    state: str
    attempt: int
    result: JsonValue
    error: str | None


class RunOut(BaseModel):
    """A run with its nodes."""

    id: str
    flow: str
    state: str
    input: JsonValue
    deadline: datetime | None
    parent_job_id: int | None
    error: str | None
    created_at: datetime
    finished_at: datetime | None
    nodes: dict[str, NodeOut]


class RunsOut(BaseModel):
    """A page of runs, newest first; ``next_cursor`` fetches the next page (null: this was the last)."""

    runs: list[RunOut]
    next_cursor: str | None


class ScheduleOut(BaseModel):
    """One schedule: its timing, target and state. ``origin`` says where it was defined: ``"code"``
    (declared with an app: ``App(schedules=[...])``) or ``"runtime"`` (``add_schedule``, removable)."""

    name: str
    origin: str
    timing: str
    timezone: str
    target: str
    overlap: str
    catch_up: str
    paused: bool
    next_run: datetime | None
    last_run: datetime | None
    last_job_id: int | None
    last_run_id: str | None
    last_error: str | None
    last_error_at: datetime | None
    fired: int
    skipped: int


class SchedulesOut(BaseModel):
    """Every schedule of the app and the store."""

    schedules: list[ScheduleOut]


class TriggerOut(BaseModel):
    """What a triggered schedule made: a job or a run."""

    job: JobOut | None = None
    run: RunOut | None = None


class LimitsBody(Body):
    """``PUT /v1/bindings/{name}/limits``: the limits to change (null lifts one); others are kept."""

    concurrency: int | None = None
    rate_limit: str | None = Field(None, description='"10/s", "600/m", "5/2s" or "100/s burst 20".')
    key_concurrency: int | None = None
    priority_aging: float | None = None
    key_rate_limit: str | None = Field(None, description='A token bucket per concurrency key, as rate_limit.')


class LimitsOut(BaseModel):
    """The run-time overrides now stored for a binding."""

    binding: str
    overrides: dict[str, JsonValue]


class Figures(BaseModel):
    """Counts and attempt run times (seconds) over a window."""

    enqueued: int
    started: int
    succeeded: int
    failed: int
    retried: int
    cancelled: int
    stalled: int
    expired: int
    runs: int
    mean: float | None
    max: float | None
    p50: float | None
    p90: float | None
    p99: float | None


class MinuteOut(BaseModel):
    """The figures of one minute."""

    minute: datetime
    figures: Figures


class StatsOut(BaseModel):
    """Counts and run-time percentiles from the read model since ``since``."""

    since: datetime
    total: Figures
    bindings: dict[str, Figures]
    minutes: list[MinuteOut]
    pending_events: int


class CountsOut(BaseModel):
    """Jobs per binding and state."""

    counts: dict[str, dict[str, int]]


class HealthOut(BaseModel):
    """The API's view of its store."""

    status: Literal["ok", "unavailable"]
    store: str
    migrations: Literal["current", "missing", "unknown"]
    detail: str | None = None


class ErrorDetail(BaseModel):
    """What went wrong: the jobloom error class, a message, and the field at fault when there is one."""

    type: str
    message: str
    field: str | None = None


class ErrorOut(BaseModel):
    """Every error response has this shape."""

    error: ErrorDetail
