"""The job state machine, defined once: the states, and each transition with the statement that makes it.

Every named SQL statement that changes ``jobloom_jobs.state`` is one :class:`Transition` here, under
the statement's name (a set-based ``name__bulk`` twin makes the same transition), and may move a job
only from one of its ``sources`` to one of its ``targets``. The conformance suite finds every such
statement in each dialect's SQL and checks what it does to jobs seeded in every state against this
table (``tests/conformance/test_state_machine.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

State = Literal[
    "waiting", "scheduled", "queued", "running", "succeeded", "failed", "stalled", "cancelled", "skipped", "expired"
]

WAITING: Final = "waiting"
SCHEDULED: Final = "scheduled"
QUEUED: Final = "queued"
RUNNING: Final = "running"
SUCCEEDED: Final = "succeeded"
FAILED: Final = "failed"
STALLED: Final = "stalled"
CANCELLED: Final = "cancelled"
SKIPPED: Final = "skipped"
EXPIRED: Final = "expired"

ALL_STATES: Final[tuple[str, ...]] = (
    WAITING, SCHEDULED, QUEUED, RUNNING, SUCCEEDED, FAILED, STALLED, CANCELLED, SKIPPED, EXPIRED
)
INITIAL_STATES: Final = frozenset({WAITING, SCHEDULED, QUEUED})
"""The states a job is inserted in (a flow node waiting for upstream, a delayed job, a runnable one)."""
UNSTARTED_STATES: Final = INITIAL_STATES
"""Neither running nor finished: a job in these states can be ended without a worker."""
ACTIVE_STATES: Final = frozenset({WAITING, SCHEDULED, QUEUED, RUNNING})
FINISHED_STATES: Final = frozenset({SUCCEEDED, FAILED, STALLED, CANCELLED, SKIPPED, EXPIRED})

# A flow run's states: running, stopping (cancelling, or failing past its deadline) while some of its
# jobs still run, then one of the finished states.
RUN_RUNNING: Final = "running"
RUN_CANCELLING: Final = "cancelling"
RUN_FAILING: Final = "failing"
RUN_STOPPING: Final[dict[str, str]] = {RUN_CANCELLING: CANCELLED, RUN_FAILING: FAILED}
"""A run being stopped, and the state it ends in once nothing of it runs any more."""
RUN_FINISHED_STATES: Final = frozenset({SUCCEEDED, FAILED, CANCELLED})
RUN_RESUMABLE_STATES: Final = frozenset({FAILED, CANCELLED})
"""The finished states of a run that ``resume_run`` runs again (and that fail a sub-flow node)."""


@dataclass(frozen=True, slots=True)
class Transition:
    """A named statement's move: from any of ``sources`` to any of ``targets``, and why it happens."""

    name: str
    sources: frozenset[str]
    targets: frozenset[str]
    why: str


def _t(name: str, sources: frozenset[str] | str, targets: frozenset[str] | str, why: str) -> Transition:
    def states(s: frozenset[str] | str) -> frozenset[str]:
        return frozenset({s}) if isinstance(s, str) else s

    return Transition(name, states(sources), states(targets), why)


_RESTARTABLE = frozenset({FAILED, STALLED, CANCELLED})

TRANSITIONS: Final[tuple[Transition, ...]] = (
    _t("promote_due", SCHEDULED, QUEUED, "a delayed or backed-off job is due"),
    _t("expire_due", frozenset({SCHEDULED, QUEUED}), EXPIRED,
       "a job that has not started by its expiry (expires_at) never starts: it ends expired"),
    _t("claim", QUEUED, RUNNING, "the coordinator dispatches a job to a worker under a lease"),
    _t("claim_batch", QUEUED, RUNNING, "the coordinator dispatches a batch of a batch performer's jobs to a worker"),
    _t("claim_direct", QUEUED, RUNNING, "an idle worker claims the lone job its wake-up named, where dispatch would"),
    _t("finish_attempt", RUNNING, frozenset({SUCCEEDED, FAILED, STALLED, CANCELLED, SCHEDULED, EXPIRED, SKIPPED}),
       "an attempt ended (or its lease expired): done, failed for good, stalled (at most once), cancelled, "
       "scheduled again (a retry with backoff, or a durable sleep or event wait), expired (a retry whose "
       "backoff ends at or past the job's expiry), or skipped (a flow node whose when= was false)"),
    _t("snooze_attempt", RUNNING, SCHEDULED,
       "the performer raised Snooze: the job runs again after the delay, without spending an attempt"),
    _t("fail_attempt", RUNNING, FAILED,
       "an attempt whose outcome cannot be stored is failed with an error that says so (the last resort)"),
    _t("release", RUNNING, QUEUED, "a stopping worker gives back a claimed job that never started"),
    _t("cancel_now", UNSTARTED_STATES, CANCELLED, "a job that is not running is cancelled at once"),
    _t("retry_now", _RESTARTABLE, QUEUED, "a person retries a failed, stalled or cancelled job"),
    _t("queue_waiting", WAITING, QUEUED, "every upstream node of a flow node succeeded"),
    _t("skip_waiting", WAITING, SKIPPED, "an upstream node failed for good"),
    _t("release_dependant", WAITING, QUEUED, "every job that a job depends on ended (succeeded, or it runs anyway)"),
    _t("skip_dependant", WAITING, SKIPPED, "a job that a job depends on ended without succeeding"),
    _t("fail_unstarted", UNSTARTED_STATES, FAILED,
       "the flow run's deadline passed (a sub-flow node waiting for its child run stays until it ends)"),
    _t("cancel_unstarted", UNSTARTED_STATES, CANCELLED,
       "the flow run is cancelled (a sub-flow node waiting for its child run stays until it ends)"),
    _t("wake_suspended", SCHEDULED, QUEUED, "a suspended job's event arrived"),
    _t("wake_node", SCHEDULED, QUEUED, "a suspended node's event arrived"),
    _t("wake_waiting_for", SCHEDULED, QUEUED, "the event a suspended job waits for was stored"),
    _t("hold_node", RUNNING, WAITING,
       "a flow node's attempt succeeded while children it spawned still run: its result is kept, it waits"),
    _t("settle_node", WAITING, frozenset({SUCCEEDED, FAILED}),
       "the last child a waiting flow node spawned finished: the node succeeds, or fails if one failed"),
    _t("reset_node", _RESTARTABLE | {SKIPPED}, frozenset({QUEUED, WAITING}),
       "a resumed flow run runs its unfinished nodes again (queued if their upstream succeeded)"),
)

BY_NAME: Final[dict[str, Transition]] = {t.name: t for t in TRANSITIONS}
RETRYABLE_STATES: Final = BY_NAME["retry_now"].sources
CANCELLABLE_AT_ONCE: Final = BY_NAME["cancel_now"].sources


def _allowed() -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {s: set() for s in ALL_STATES}
    for t in TRANSITIONS:
        for source in t.sources:
            out[source] |= t.targets
    return {s: frozenset(targets) for s, targets in out.items()}


ALLOWED: Final[dict[str, frozenset[str]]] = _allowed()
"""Each state's possible next states: the union of the transitions above."""


def transition(statement: str) -> Transition:
    """The transition that the named statement makes (``name__bulk`` makes the one of ``name``)."""
    return BY_NAME[statement.split("__", 1)[0]]


def can_transition(source: str, target: str) -> bool:
    """Whether the state machine allows ``source -> target``."""
    return target in ALLOWED.get(source, frozenset())
