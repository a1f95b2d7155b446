"""``GET /v1/jobs`` (search with a cursor) and ``POST /v1/jobs/retry|cancel|delete`` (bulk actions by filter).

The filters are those of ``App.list_jobs`` and ``jobloom.JobFilter`` (checked there: a bad value is a
422 naming the field); a page's ``next_cursor`` is passed back as ``cursor`` for the next one. The bulk
actions run ``App.retry_many / cancel_many / delete_many`` in short chunked transactions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field

from jobloom.app.search import JobFilter
from jobloom.core.errors import InvalidOption
from jobloom.core.states import ALL_STATES
from jobloom.http import schemas as s
from jobloom.http.context import Context, json_response
from jobloom.http.encode import dumps, jobs_json
from jobloom.http.jobs import ERRORS

MAX_PAGE = 1000


class FilterBody(s.Body):
    """Which jobs a bulk action applies to (every field given must match; ``tags``: all of them)."""

    state: str | list[str] | None = Field(None, description=f"One or several of {', '.join(ALL_STATES)}.")
    binding: str | None = None
    tags: list[str] | None = Field(None, description="Jobs carrying all of these tags.")
    unique_key: str | None = None
    text: str | None = Field(None, description="Text found in the job's error (case-sensitive).")
    created_after: datetime | float | None = Field(
        None, description="Enqueued at or after: ISO 8601 with a time zone, or epoch seconds.")
    created_before: datetime | float | None = Field(
        None, description="Enqueued before: ISO 8601 with a time zone, or epoch seconds.")
    payload_text: str | None = Field(None, description="Text in the job's payload or meta (JSON, case-sensitive).")


class JobPage(BaseModel):
    """A page of jobs, newest first; ``next_cursor`` fetches the next page (null: this was the last)."""

    jobs: list[s.JobOut]
    next_cursor: str | None


class ChangedOut(BaseModel):
    """How many jobs a bulk action changed (jobs whose state does not allow it are skipped)."""

    changed: int


def job_filter(body: FilterBody) -> JobFilter:
    """The ``jobloom.JobFilter`` of a request; an empty one is refused (a bulk action on every job is
    asked for by naming the states)."""
    given = body.model_dump(exclude_none=True)
    if not given:
        raise InvalidOption("filter", {}, f"at least one of {', '.join(FilterBody.model_fields)}")
    return JobFilter(**given)


BULK_DOCS = {
    "retry": "Retry every failed, stalled or cancelled job the filter matches (others are skipped); how many.",
    "cancel": "Cancel every unfinished job the filter matches (a running one is asked to stop); how many.",
    "delete": "Delete every finished job the filter matches, with its history (others are skipped); how many.",
}


def router(ctx: Context) -> APIRouter:
    """The search and bulk routes (to be included before the ``/v1/jobs/{job_id}`` routes)."""
    api = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=ERRORS)
    read, operate = (ctx.guarded(n) for n in ("read", "operate"))
    app = ctx.app

    @api.get("", response_model=JobPage, **read)
    async def list_jobs(
        state: Annotated[list[str] | None, Query(
            description=f"One of {', '.join(ALL_STATES)} (repeat for several).")] = None,
        binding: str | None = None,
        tags: Annotated[list[str] | None, Query(description="Jobs carrying all of these tags.")] = None,
        unique_key: str | None = None,
        text: Annotated[str | None, Query(description="Text found in the job's error.")] = None,
        created_after: Annotated[datetime | None, Query(
            description="Enqueued at or after this moment (ISO 8601 with a time zone).")] = None,
        created_before: Annotated[datetime | None, Query(
            description="Enqueued before this moment (ISO 8601 with a time zone).")] = None,
        payload_text: Annotated[str | None, Query(
            description="Text found in the job's payload or meta (their JSON, case-sensitive).")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
        cursor: Annotated[str | None, Query(description="The next_cursor of the page before.")] = None,
    ) -> Response:
        """Jobs, newest first, filtered; follow ``next_cursor`` for the next page."""
        page = await app.list_jobs(
            state=state, binding=binding, tags=tags, unique_key=unique_key, text=text, created_after=created_after,
            created_before=created_before, limit=limit, cursor=cursor, payload_text=payload_text)
        return json_response(jobs_json(page.jobs, extra=f',"next_cursor":{dumps(page.next_cursor).decode()}'))

    for action in ("retry", "cancel", "delete"):
        def make(action: str) -> None:
            @api.post(f"/{action}", response_model=ChangedOut, **operate, name=f"{action}_many")
            async def bulk(body: FilterBody) -> Response:
                act = {"retry": app.retry_many, "cancel": app.cancel_many, "delete": app.delete_many}[action]
                return json_response(dumps({"changed": await act(job_filter(body))}))

            bulk.__doc__ = BULK_DOCS[action]

        make(action)
    return api
