"""The jobs page: search by state, binding, tags, unique key, id, error text or payload/meta text, page by
cursor, and retry, cancel or delete many jobs (the ones selected, or all that match) after a confirmation
that says how many."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from jobloom.app.notes import add_notes
from jobloom.app.search import JobFilter
from jobloom.core.errors import InvalidOption, InvalidTransition, JobloomError, JobNotFound
from jobloom.core.states import ALL_STATES, FINISHED_STATES, RETRYABLE_STATES
from jobloom.core.text import MAX_ID
from jobloom.dashboard import reads
from jobloom.dashboard.session import Session
from jobloom.dashboard.web import Dashboard, Form, local_path

PAGE_SIZE = 50
"""Jobs per page."""
FILTER_FIELDS = ("state", "binding", "tag", "unique_key", "text", "payload_text")
ACTIONS = {"retry": ("Retry", RETRYABLE_STATES), "cancel": ("Cancel", frozenset(
    {"waiting", "scheduled", "queued", "running"})), "delete": ("Delete", FINISHED_STATES)}
"""Bulk actions: their label and the states a job must be in to be acted on."""


DEFAULT_STATES = ("waiting", "scheduled", "queued", "running", "failed", "stalled", "cancelled")
"""The states listed when the state field is blank: every one read through its own index, so the page costs
the same however long the history of succeeded jobs (``state=all`` reads the history too)."""
ALL = "all"


def states_of(value: str | None) -> str | tuple[str, ...] | None:
    """The states a state field asks for: blank -> :data:`DEFAULT_STATES`, ``all`` -> any."""
    if not value:
        return DEFAULT_STATES
    return None if value == ALL else value


def filter_of(values: dict[str, str]) -> JobFilter:
    """The search filter the page's fields give (``InvalidOption`` names a bad one)."""
    tags = [t for t in (values.get("tag") or "").split(",") if t.strip()]
    return JobFilter(states_of(values.get("state")), values.get("binding") or None, [t.strip() for t in tags] or None,
                     values.get("unique_key") or None, values.get("text") or None,
                     payload_text=values.get("payload_text") or None)


def fields_of(source: Any) -> dict[str, str]:
    """The filter fields present in a query string or a form."""
    out = {}
    for name in FILTER_FIELDS:
        value = source.get(name)
        if value and value.strip():
            out[name] = value.strip()
    return out


def _ids(form: Form) -> list[int]:
    ids = []
    for text in form.all("ids"):
        if not text.lstrip("-").isdigit() or not 0 < int(text) <= MAX_ID:
            raise InvalidOption("ids", text, f"job ids from 1 to {MAX_ID}")
        ids.append(int(text))
    return ids


def routes(d: Dashboard) -> list[Route]:
    """The jobs page and its bulk actions."""
    app = d.app

    async def page(request: Request, session: Session) -> Response:
        q = request.query_params
        job_id = (q.get("id") or "").strip()
        if job_id:
            if job_id.isdigit() and 0 < int(job_id) <= MAX_ID:
                return RedirectResponse(d.url(request, f"/jobs/{int(job_id)}"), status_code=303)
            return d.html(request, "jobs.html", session, 422, active="jobs", values={"id": job_id}, page=None,
                          bindings=[], problem=f"id: {job_id!r} is not a job id (a whole number)")
        values = fields_of(q)
        bindings = sorted(b.binding for b in await app.list_bindings())
        try:
            f = filter_of(values)
            found = await app.list_jobs(f.state, f.binding, limit=PAGE_SIZE, tags=f.tags, unique_key=f.unique_key,
                                        text=f.text, cursor=q.get("cursor") or None, payload_text=f.payload_text)
        except JobloomError as exc:
            return d.html(request, "jobs.html", session, 422, active="jobs", values=values, page=None,
                          bindings=bindings, states=ALL_STATES, problem=str(exc).splitlines()[0])
        next_url = None
        if found.next_cursor:
            next_url = "/jobs?" + urlencode({**values, "cursor": found.next_cursor})
        return d.html(request, "jobs.html", session, active="jobs", values=values, page=found, bindings=bindings,
                      states=ALL_STATES, next_url=next_url, first_url="/jobs?" + urlencode(values),
                      paged=bool(q.get("cursor")), here=d.here(request))

    async def confirm(request: Request, session: Session, form: Form) -> Response:
        action = form.get("action") or ""
        if action not in ACTIONS:
            raise InvalidOption("action", action, "retry, cancel or delete")
        label, allowed = ACTIONS[action]
        values = fields_of(form)
        if form.get("all") == "1":
            f = filter_of(values)
            n = await reads.count_matching(await app.store(), f, allowed)
            ids: list[int] = []
        else:
            ids = _ids(form)
            if not ids:
                raise InvalidOption("ids", "none", "at least one selected job (or all that match)")
            n = len(ids)
        return d.html(request, "confirm.html", session, active="jobs", action=action, label=label, n=n, ids=ids,
                      all=form.get("all") == "1", values=values, capped=n >= reads.COUNT_CAP,
                      back=local_path(form.get("back"), "/jobs"), states=", ".join(sorted(allowed)))

    async def bulk(request: Request, session: Session, form: Form) -> Response:
        action = form.get("action") or ""
        if action not in ACTIONS:
            raise InvalidOption("action", action, "retry, cancel or delete")
        if form.get("all") == "1":
            f = filter_of(fields_of(form))
            n = await {"retry": app.retry_many, "cancel": app.cancel_many, "delete": app.delete_many}[action](f)
        else:
            one = {"retry": app.retry, "cancel": app.cancel, "delete": app.delete}[action]
            done: list[int] = []
            for job_id in _ids(form):
                try:
                    await one(job_id)
                    done.append(job_id)
                except (InvalidTransition, JobNotFound):
                    continue  # its state changed since it was listed
            n = len(done)
            if action != "delete":  # a deleted job's notes go with it
                await add_notes(await app.store(), done, session.name, f"{action} from the dashboard's jobs page")
        verb = {"retry": "retried", "cancel": "cancelled (or asked to stop)", "delete": "deleted"}[action]
        return d.back(request, form, done=f"{n} job{'s' if n != 1 else ''} {verb}")

    return [Route("/jobs", d.page(page)), Route("/jobs/confirm", d.action(confirm), methods=["POST"]),
            Route("/jobs/bulk", d.action(bulk), methods=["POST"])]
