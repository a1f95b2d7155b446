"""What a performer raises to steer its own job: :class:`Retry` (another attempt, after a delay),
:class:`Snooze` (run again later, without spending an attempt) and :class:`Permanent` (fail now, no
further attempts). They are not errors of jobloom's."""

from __future__ import annotations

from jobloom.core.errors import JobloomError
from jobloom.core.options import MAX_DELAY, finite


class Retry(Exception):
    """Raised by a performer to ask for another attempt after ``after`` seconds."""

    def __init__(self, after: float | None = None, reason: str = "retry requested") -> None:
        if after is not None:
            after = finite("after", after, maximum=MAX_DELAY)
        self.after = after
        self.reason = reason
        super().__init__(reason)


class Snooze(Exception):
    """Raised by a performer to put its job back, ``scheduled`` ``after`` seconds from now, without
    spending an attempt (the attempt history records a snooze). A job snoozed ``max_snoozes`` times
    (a performer option) fails instead, so a job that always snoozes cannot loop for ever."""

    def __init__(self, after: float = 0.0) -> None:
        self.after = finite("after", after, maximum=MAX_DELAY)
        super().__init__(f"snoozed for {self.after:g} s")


class Permanent(Exception):
    """Raised by a performer to fail the job at once, without further attempts."""


class Skip(Exception):
    """Raised by jobloom, not by performers: a flow node's ``when=`` was false, and the node ends
    ``skipped`` without running its performer."""


class ChildFailed(Permanent, JobloomError):
    """Raised in a caller by ``self.call`` when the child job it made ended without succeeding.

    ``job_id``, ``binding``, ``state`` (``failed``, ``cancelled``, ``stalled``...) and ``error`` are the
    child's. A ``Permanent`` signal: a caller that does not catch it fails at once, since another
    attempt would find the same child (a call makes its child once)."""

    def __init__(self, job_id: int, binding: str, state: str, error: str | None) -> None:
        self.job_id = job_id
        self.binding = binding
        self.state = state
        self.error = error
        super().__init__(f"child job {job_id} ({binding}) {state}: {error or 'no error recorded'}")
