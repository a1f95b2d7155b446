"""jobloom: background jobs for Python with exact limits, retries, leases and history.

The public names are re-exported here; see the README for a tour.
"""

from __future__ import annotations

from jobloom.app.bindings import BindingInfo
from jobloom.app.facade import App, EnqueueRequest
from jobloom.app.search import JobFilter, JobPage
from jobloom.core.errors import (
    CommitUnknown,
    InvalidOption,
    InvalidPayload,
    InvalidTransition,
    JobloomError,
    JobNotFound,
    JobTimeout,
    MigrationsMissing,
    PayloadTooLarge,
    StoreError,
    UnknownBinding,
    WaitTimeout,
)
from jobloom.core.options import Backoff, RateLimit
from jobloom.core.signals import Permanent, Retry, Snooze
from jobloom.core.signing import InvalidSignature, verify_signature
from jobloom.core.types import Attempt, Job, JobContext, NodeState, Run
from jobloom.engine.batches import BatchItem, BatchPerformer
from jobloom.engine.enqueue import EnqueueOptions
from jobloom.engine.performer import Performer
from jobloom.engine.push import HttpPerformer
from jobloom.engine.remote import RemoteBinding, RemoteJob
from jobloom.engine.steps import EventTimeout, LeaseLost, StepNotStorable
from jobloom.engine.worker import Worker
from jobloom.flows.flow import Flow, FlowError, Node
from jobloom.flows.runs import RunNotFound
from jobloom.schedules.schedule import InvalidSchedule, Schedule, UnknownSchedule

__version__ = "0.1.0"

__all__ = [
    "App",
    "Attempt",
    "Backoff",
    "BatchItem",
    "BatchPerformer",
    "BindingInfo",
    "CommitUnknown",
    "EnqueueOptions",
    "EnqueueRequest",
    "EventTimeout",
    "Flow",
    "FlowError",
    "HttpPerformer",
    "InvalidOption",
    "InvalidPayload",
    "InvalidSchedule",
    "InvalidSignature",
    "InvalidTransition",
    "Job",
    "JobContext",
    "JobFilter",
    "JobNotFound",
    "JobPage",
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
    "RemoteBinding",
    "RemoteJob",
    "Retry",
    "Run",
    "RunNotFound",
    "Schedule",
    "Snooze",
    "StepNotStorable",
    "StoreError",
    "UnknownBinding",
    "UnknownSchedule",
    "WaitTimeout",
    "Worker",
    "verify_signature",
]
