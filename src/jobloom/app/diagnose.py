"""Why a job is not running (placeholder, replaced by dash-logic)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobloom.app.facade import App


@dataclass(frozen=True, slots=True)
class Reason:
    """One reason a job does not start."""

    code: str
    text: str
    job_ids: tuple[int, ...] = ()
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """A job's state and the reasons it is not running."""

    job_id: int
    state: str
    reasons: tuple[Reason, ...]


async def why_not_running(app: App, job_id: int) -> Diagnosis:
    """The reasons job ``job_id`` is not running (placeholder)."""
    job = await app.get_job(job_id)
    if job.state == "scheduled":
        return Diagnosis(job_id, job.state, (Reason("scheduled", f"scheduled until {job.run_at}", until=job.run_at),))
    return Diagnosis(job_id, job.state, (Reason("ready", "ready to start"),) if job.state == "queued" else ())
