"""``GET /v1/jobs`` (search with a cursor) and ``POST /v1/jobs/retry|cancel|delete`` (bulk actions by filter).

Written against the app's search and bulk API (``App.list_jobs(...)`` returning a page with ``jobs``
and ``next_cursor``, ``jobloom.JobFilter``, ``App.retry_many / cancel_many / delete_many``). The
factory includes this router once that API is in the app: the ``type: ignore`` comments below mark
where the app does not have it yet, and mypy (strict: unused ignores are errors) reports each one
that has become unneeded, and any call that does not fit the API that landed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field

from jobloom.core.states import ALL_STATES
from jobloom.http import schemas as s
from jobloom.http.context import Context, json_response
from jobloom.http.encode import dumps, jobs_json
from jobloom.http.jobs import ERRORS

MAX_PAGE = 1000


class FilterBody(s.Body):
    """Which jobs a bulk action applies to (every field given must match; ``tags``: all of them)."""

    state: str | None = None
    binding: str | None = None
    tags: list[str] | None = None
    unique_key: str | None = None
    text: str | None = Field(None, description="Text found in the job's error.")
    created_after: datetime | None = None
    created_before: datetime | None = None


class JobPage(BaseModel):
    """A page of jobs, newest first; ``next_cursor`` fetches the next page (null: this was the last)."""

    jobs: list[s.JobOut]
    next_cursor: str | None


class ChangedOut(BaseModel):
    """How many jobs a bulk action changed (jobs whose state does not allow it are skipped)."""

    changed: int


def job_filter(body: FilterBody) -> Any:
    """The ``jobloom.JobFilter`` of a request."""
    from jobloom import JobFilter

    return JobFilter(**body.model_dump(exclude_none=True))


def router(ctx: Context) -> APIRouter:
    """The search and bulk routes (to be included before the ``/v1/jobs/{job_id}`` routes)."""
    api = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=ERRORS)
    read, operate = (ctx.guarded(n) for n in ("read", "operate"))
    app = ctx.app

    @api.get("", response_model=JobPage, **read)
    async def list_jobs(
        state: Annotated[str | None, Query(description=f"One of {', '.join(ALL_STATES)}.")] = None,
        binding: str | None = None,
        tags: Annotated[list[str] | None, Query(description="Jobs carrying all of these tags.")] = None,
        unique_key: str | None = None,
        text: Annotated[str | None, Query(description="Text found in the job's error.")] = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
        cursor: Annotated[str | None, Query(description="The next_cursor of the page before.")] = None,
    ) -> Response:
        """Jobs, newest first, filtered; follow ``next_cursor`` for the next page."""
        page = await app.list_jobs(
            state=state, binding=binding, tags=tags, unique_key=unique_key, text=text, created_after=created_after,
            created_before=created_before, limit=limit, cursor=cursor)
        jobs, cursor = page.jobs, page.next_cursor
        return json_response(jobs_json(list(jobs), extra=f',"next_cursor":{dumps(cursor).decode()}'))

    for action in ("retry", "cancel", "delete"):
        def make(action: str) -> None:
            @api.post(f"/{action}", response_model=ChangedOut, **operate, name=f"{action}_many")
            async def bulk(body: FilterBody) -> Response:
                changed = await getattr(app, f"{action}_many")(job_filter(body))
                return json_response(dumps({"changed": int(changed)}))

            bulk.__doc__ = f"{action.capitalize()} every job the filter matches (in short chunks); how many changed."

        make(action)
    return api
