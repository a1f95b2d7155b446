"""A job's page: its payload, result, error, attempts (worker, times, outcome, traceback), its timeline,
durable steps, and why it is not running when it is not; cancel and retry."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobloom.app.diagnose import Diagnosis, why_not_running
from jobloom.app.notes import add_notes
from jobloom.app.reads import read_job
from jobloom.core.blobref import parse_ref
from jobloom.core.errors import JobNotFound
from jobloom.core.rows import EventRow, NoteRow
from jobloom.core.states import EXPIRED, FINISHED_STATES, RETRYABLE_STATES
from jobloom.core.text import MAX_ID
from jobloom.core.types import Attempt, Job
from jobloom.dashboard import reads
from jobloom.dashboard.render import as_datetime
from jobloom.dashboard.session import Session
from jobloom.dashboard.web import Dashboard, Form

WAITING_STATES = frozenset({"waiting", "scheduled", "queued"})
"""States in which the page says why the job is not running."""
DUE_STATES = frozenset({"scheduled", "queued"})
"""States in which the job's ``run_at`` is when it runs (or has been due since): the page shows it then only."""


def duration(attempt: Attempt, now: float) -> float:
    """How long an attempt ran: from its start to its end, or to ``now`` while it runs."""
    end = attempt.finished_at.timestamp() if attempt.finished_at is not None else now
    return max(0.0, end - attempt.started_at.timestamp())


@dataclass(frozen=True, slots=True)
class Moment:
    """One line of a job's timeline."""

    at: datetime
    what: str
    detail: str = ""


def timeline(job: Job, attempts: list[Attempt], events: list[EventRow], notes: Sequence[NoteRow] = ()) -> list[Moment]:
    """The job's history: enqueued, each attempt's start and end, the events still in the outbox that
    those do not already show (a retry by hand, a cancel), and what people did to it (with the name of
    their token), oldest first."""
    out = [Moment(job.created_at, "enqueued", f"as {job.state}" if job.state in ("waiting",) else "")]
    if job.run_at is not None and job.run_at > job.created_at and not attempts:
        out.append(Moment(job.run_at, "due", "runs from then on"))
    shown: set[tuple[str, int]] = set()
    for a in attempts:
        out.append(Moment(a.started_at, f"attempt {a.attempt} started", f"on {a.worker}" if a.worker else ""))
        shown.add(("started", a.attempt))
        if a.finished_at is not None:
            out.append(Moment(a.finished_at, f"attempt {a.attempt} {a.outcome or 'ended'}", (a.error or "")[:200]))
            shown.add((a.outcome or "", a.attempt))
    for e in events:
        if e.kind in ("enqueued", "scheduled", "waiting") or (e.kind, e.attempt) in shown:
            continue
        at = as_datetime(e.at)
        if at is not None:
            out.append(Moment(at, e.kind, f"attempt {e.attempt}" if e.attempt else ""))
    if job.finished_at is not None and job.state in FINISHED_STATES:
        out.append(Moment(job.finished_at, job.state, ""))
    for n in notes:
        at = as_datetime(n.at)
        if at is not None:
            out.append(Moment(at, n.what, f"by {n.actor}"))
    return sorted(out, key=lambda m: m.at)


def _decode(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def payload_text(job: Job) -> str | None:
    """The payload as indented JSON; None for a flow node whose payload is not built yet (a worker builds
    it from the run input and the upstream results just before the node runs)."""
    if not job.payload_json:
        return None
    ref = parse_ref(job.payload_json)
    if ref is not None:  # never loaded into a page: it may be megabytes
        return f"Offloaded to the blob store: {ref.size} bytes (blob {ref.id}). Read it with app.get_job({job.id})."
    try:
        return json.dumps(json.loads(job.payload_json), indent=2, sort_keys=True)
    except ValueError:
        return job.payload_json


def result_value(job: Job) -> Any:
    """The result as the page shows it: decoded, or a line saying where an offloaded one is."""
    ref = parse_ref(job.result_json)
    if ref is not None:
        return f"Offloaded to the blob store: {ref.size} bytes (blob {ref.id}). Read it with app.get_job({job.id})."
    return job.result


async def job_values(d: Dashboard, job_id: int) -> dict[str, Any]:
    """What the job's page shows, as template values."""
    app = d.app
    job = await read_job(await app.store(), job_id)  # an offloaded payload stays a reference
    attempts = await app.attempts(job_id)
    steps, events, notes = await reads.steps_and_events(await app.store(), job_id)
    depends_on, dependants = await app.job_links(job_id)
    diagnosis: Diagnosis | None = None
    if job.state in WAITING_STATES or job.state == EXPIRED:  # an expired job: why it never ran
        diagnosis = await why_not_running(app, job_id)
    return {
        "job": job, "page_url": f"/jobs/{job.id}", "payload": payload_text(job), "result": result_value(job),
        "attempts": list(reversed(attempts)),
        "steps": [(s.name, _decode(s.result)) for s in steps],
        "moments": timeline(job, attempts, events, notes),
        "awaited": [s.name[len("wait:"):] for s in steps if s.name.startswith("wait:")],
        "diagnosis": diagnosis, "finished": job.state in FINISHED_STATES,
        "due_states": DUE_STATES, "duration": duration, "now": (await app.store()).now(),
        "can_retry": job.state in RETRYABLE_STATES, "can_cancel": job.state not in FINISHED_STATES,
        "tags": json.loads(job.tags_json) if job.tags_json else [],
        "meta": json.loads(job.meta_json) if job.meta_json else None,
        "progress": json.loads(job.progress_json) if job.progress_json else None,
        "depends_on": depends_on, "dependants": dependants,
    }


def _job_id(request: Request) -> int:
    text = request.path_params["job_id"]
    if not text.isdigit() or not 0 < int(text) <= MAX_ID:
        raise JobNotFound(0)
    return int(text)


def routes(d: Dashboard) -> list[Route]:
    """The job page, its live part, and cancel and retry."""
    app = d.app

    async def page(request: Request, session: Session) -> Response:
        try:
            values = await job_values(d, _job_id(request))
        except JobNotFound:
            return d.html(request, "missing.html", session, 404, active="jobs",
                          what=f"job {request.path_params['job_id']}")
        return d.html(request, "job.html", session, active="jobs", **values)

    async def live(request: Request, session: Session) -> Response:
        try:
            values = await job_values(d, _job_id(request))
        except JobNotFound:
            return d.html(request, "missing.html", session, 404, what=f"job {request.path_params['job_id']}")
        return d.html(request, "job_live.html", session, **values)

    async def cancel(request: Request, session: Session, form: Form) -> Response:
        job = await app.cancel(_job_id(request))
        await add_notes(await app.store(), [job.id], session.name, "cancelled from the dashboard")
        said = "cancelled" if job.state == "cancelled" else "asked to stop (it is running)"
        return d.back(request, form, done=f"job {job.id} {said}")

    async def retry(request: Request, session: Session, form: Form) -> Response:
        job = await app.retry(_job_id(request))
        await add_notes(await app.store(), [job.id], session.name, "retried from the dashboard")
        return d.back(request, form, done=f"job {job.id} queued again")

    return [Route("/jobs/{job_id}", d.page(page)), Route("/jobs/{job_id}/live", d.page(live)),
            Route("/jobs/{job_id}/cancel", d.action(cancel), methods=["POST"]),
            Route("/jobs/{job_id}/retry", d.action(retry), methods=["POST"])]
