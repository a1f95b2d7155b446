"""The job state machine: the states of DESIGN §2 and the transitions between them, defined once."""

from __future__ import annotations

from typing import Final, Literal

State = Literal[
    "waiting", "scheduled", "queued", "running", "succeeded", "failed", "stalled", "cancelled", "skipped"
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

ALL_STATES: Final[tuple[str, ...]] = (
    WAITING, SCHEDULED, QUEUED, RUNNING, SUCCEEDED, FAILED, STALLED, CANCELLED, SKIPPED
)
ACTIVE_STATES: Final = frozenset({WAITING, SCHEDULED, QUEUED, RUNNING})
FINISHED_STATES: Final = frozenset({SUCCEEDED, FAILED, STALLED, CANCELLED, SKIPPED})
RETRYABLE_STATES: Final = frozenset({FAILED, STALLED, CANCELLED})
CANCELLABLE_AT_ONCE: Final = frozenset({WAITING, SCHEDULED, QUEUED})

TRANSITIONS: Final[dict[str, frozenset[str]]] = {
    WAITING: frozenset({QUEUED, SKIPPED, CANCELLED}),
    SCHEDULED: frozenset({QUEUED, CANCELLED}),
    QUEUED: frozenset({RUNNING, CANCELLED}),
    RUNNING: frozenset({SUCCEEDED, SCHEDULED, FAILED, STALLED, CANCELLED, QUEUED}),
    SUCCEEDED: frozenset(),
    FAILED: frozenset({QUEUED}),
    STALLED: frozenset({QUEUED}),
    CANCELLED: frozenset({QUEUED}),
    SKIPPED: frozenset(),
}


def can_transition(source: str, target: str) -> bool:
    """Whether the state machine allows ``source -> target``."""
    return target in TRANSITIONS.get(source, frozenset())
