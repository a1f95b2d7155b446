"""jobloom: background jobs for Python with exact limits, retries, leases and history.

The public names are re-exported here; see the README for a tour.
"""

from __future__ import annotations

from .app import App, EnqueueRequest
from .client import EnqueueOptions
from .errors import (
    CommitUnknown,
    InvalidOption,
    InvalidPayload,
    InvalidTransition,
    JobloomError,
    JobNotFound,
    JobTimeout,
    MigrationsMissing,
    PayloadTooLarge,
    Permanent,
    Retry,
    StoreError,
    UnknownBinding,
    WaitTimeout,
)
from .flow import Flow, FlowError, Node
from .flowrun import RunNotFound
from .options import Backoff, RateLimit
from .performer import Performer
from .schedule import InvalidSchedule, Schedule, UnknownSchedule
from .steps import EventTimeout, LeaseLost, StepNotStorable
from .types import Attempt, Job, JobContext, NodeState, Run
from .worker import Worker

__version__ = "0.1.0"

__all__ = [
    "App",
    "Attempt",
    "Backoff",
    "CommitUnknown",
    "EnqueueOptions",
    "EnqueueRequest",
    "EventTimeout",
    "Flow",
    "FlowError",
    "InvalidOption",
    "InvalidPayload",
    "InvalidSchedule",
    "InvalidTransition",
    "Job",
    "JobContext",
    "JobNotFound",
    "JobTimeout",
    "JobloomError",
    "LeaseLost",
    "MigrationsMissing",
    "Node",
    "NodeState",
    "PayloadTooLarge",
    "Performer",
    "Permanent",
    "RateLimit",
    "Retry",
    "Run",
    "RunNotFound",
    "Schedule",
    "StepNotStorable",
    "StoreError",
    "UnknownBinding",
    "UnknownSchedule",
    "WaitTimeout",
    "Worker",
]
