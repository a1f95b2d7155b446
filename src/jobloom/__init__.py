"""jobloom: background jobs for Python with exact limits, retries, leases and history.

The public names are re-exported here; see the documentation site (docs/) for a tour. They are imported when first
used (``jobloom.App`` imports the app's modules then), so that a process which needs one small part
of the package (the worker supervisor, which never loads the app) does not pay for all of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobloom.app.bindings import BindingInfo
    from jobloom.app.facade import App, EnqueueRequest
    from jobloom.app.search import JobFilter, JobPage
    from jobloom.core.errors import (
        BatchNotFound,
        ClaimRefused,
        CommitUnknown,
        InvalidOption,
        InvalidPayload,
        InvalidTransition,
        JobloomError,
        JobNotFound,
        JobTimeout,
        MigrationsMissing,
        MigrationsTooOld,
        PayloadOffloaded,
        PayloadTooLarge,
        StoreError,
        UnknownBinding,
        WaitTimeout,
    )
    from jobloom.core.options import Backoff, RateLimit
    from jobloom.core.signals import ChildFailed, Permanent, Retry, Snooze
    from jobloom.core.signing import InvalidSignature, verify_signature
    from jobloom.core.types import Attempt, Batch, Job, JobContext, NodeState, Run
    from jobloom.engine.batches import BatchItem, BatchPerformer
    from jobloom.engine.enqueue import EnqueueOptions
    from jobloom.engine.middleware import EnqueueCall
    from jobloom.engine.performer import Performer
    from jobloom.engine.push import HttpPerformer
    from jobloom.engine.remote import RemoteBinding, RemoteJob
    from jobloom.engine.step_options import StepTimeout
    from jobloom.engine.steps import EventTimeout, LeaseLost, StepNotStorable
    from jobloom.engine.worker import Worker
    from jobloom.flows.flow import Flow, FlowError, Node, UpstreamFailed
    from jobloom.flows.runs import RunNotFound
    from jobloom.schedules.schedule import InvalidSchedule, Schedule, UnknownSchedule

_WHERE: dict[str, str] = {
    "BindingInfo": "jobloom.app.bindings",
    "App": "jobloom.app.facade",
    "EnqueueRequest": "jobloom.app.facade",
    "JobFilter": "jobloom.app.search",
    "JobPage": "jobloom.app.search",
    "ClaimRefused": "jobloom.core.errors",
    "CommitUnknown": "jobloom.core.errors",
    "InvalidOption": "jobloom.core.errors",
    "InvalidPayload": "jobloom.core.errors",
    "InvalidTransition": "jobloom.core.errors",
    "JobloomError": "jobloom.core.errors",
    "JobNotFound": "jobloom.core.errors",
    "BatchNotFound": "jobloom.core.errors",
    "JobTimeout": "jobloom.core.errors",
    "MigrationsMissing": "jobloom.core.errors",
    "MigrationsTooOld": "jobloom.core.errors",
    "PayloadOffloaded": "jobloom.core.errors",
    "PayloadTooLarge": "jobloom.core.errors",
    "StoreError": "jobloom.core.errors",
    "UnknownBinding": "jobloom.core.errors",
    "WaitTimeout": "jobloom.core.errors",
    "Backoff": "jobloom.core.options",
    "RateLimit": "jobloom.core.options",
    "ChildFailed": "jobloom.core.signals",
    "Permanent": "jobloom.core.signals",
    "Retry": "jobloom.core.signals",
    "Snooze": "jobloom.core.signals",
    "InvalidSignature": "jobloom.core.signing",
    "verify_signature": "jobloom.core.signing",
    "Attempt": "jobloom.core.types",
    "Job": "jobloom.core.types",
    "Batch": "jobloom.core.types",
    "JobContext": "jobloom.core.types",
    "NodeState": "jobloom.core.types",
    "Run": "jobloom.core.types",
    "BatchItem": "jobloom.engine.batches",
    "BatchPerformer": "jobloom.engine.batches",
    "EnqueueOptions": "jobloom.engine.enqueue",
    "EnqueueCall": "jobloom.engine.middleware",
    "Performer": "jobloom.engine.performer",
    "HttpPerformer": "jobloom.engine.push",
    "RemoteBinding": "jobloom.engine.remote",
    "RemoteJob": "jobloom.engine.remote",
    "EventTimeout": "jobloom.engine.steps",
    "LeaseLost": "jobloom.engine.steps",
    "StepNotStorable": "jobloom.engine.steps",
    "StepTimeout": "jobloom.engine.step_options",
    "Worker": "jobloom.engine.worker",
    "Flow": "jobloom.flows.flow",
    "FlowError": "jobloom.flows.flow",
    "Node": "jobloom.flows.flow",
    "UpstreamFailed": "jobloom.flows.flow",
    "RunNotFound": "jobloom.flows.runs",
    "InvalidSchedule": "jobloom.schedules.schedule",
    "Schedule": "jobloom.schedules.schedule",
    "UnknownSchedule": "jobloom.schedules.schedule",
}

__version__ = "0.2.0"

__all__ = [
    "App",
    "Attempt",
    "Backoff",
    "Batch",
    "BatchItem",
    "BatchNotFound",
    "BatchPerformer",
    "BindingInfo",
    "ChildFailed",
    "ClaimRefused",
    "CommitUnknown",
    "EnqueueCall",
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
    "MigrationsTooOld",
    "Node",
    "NodeState",
    "PayloadOffloaded",
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
    "StepTimeout",
    "StoreError",
    "UnknownBinding",
    "UnknownSchedule",
    "UpstreamFailed",
    "WaitTimeout",
    "Worker",
    "verify_signature",
]


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562), then keep it as a plain attribute."""
    if name == "codecs":  # ``jobloom.codecs.Encrypted(...)`` after a bare ``import jobloom``
        return importlib.import_module("jobloom.codecs")
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'jobloom' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, with those not imported yet."""
    return sorted({*globals(), *__all__})
