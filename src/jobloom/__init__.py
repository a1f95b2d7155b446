"""jobloom: background jobs for Python with exact limits, retries, leases and history.

The public names are re-exported here; see the README for a tour.
"""

from __future__ import annotations

from .app import App, EnqueueRequest
from .client import EnqueueOptions
from .errors import (
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
from .options import Backoff, RateLimit
from .performer import Performer
from .types import Attempt, Job, JobContext
from .worker import Worker

__version__ = "0.1.0"

__all__ = [
    "App",
    "Attempt",
    "Backoff",
    "EnqueueOptions",
    "EnqueueRequest",
    "InvalidOption",
    "InvalidPayload",
    "InvalidTransition",
    "Job",
    "JobContext",
    "JobNotFound",
    "JobTimeout",
    "JobloomError",
    "MigrationsMissing",
    "PayloadTooLarge",
    "Performer",
    "Permanent",
    "RateLimit",
    "Retry",
    "StoreError",
    "UnknownBinding",
    "WaitTimeout",
    "Worker",
]
