"""``/v1/jobs``: enqueue one job or a batch, read a job and its attempts, cancel, retry, wait, send events."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Request
from fastapi.responses import Response

from jobloom.app import enqueueing
from jobloom.app.diagnose import why_not_running
from jobloom.core.errors import JobloomError
from jobloom.core.text import MAX_ID
from jobloom.core.types import Job
from jobloom.engine.enqueue import DEFAULT_OPTIONS, EnqueueOptions, EnqueueRequest
from jobloom.engine.performer import PerformerSpec
from jobloom.http import schemas as s
from jobloom.http.context import Context, json_response
from jobloom.http.encode import attempt_json, diagnosis_dict, dumps, job_json, jobs_json
from jobloom.http.errors import field_of
from jobloom.http.tokens import StoredToken

JobId = Annotated[int, Path(description="The job's id.", ge=-MAX_ID, le=MAX_ID)]
MAX_WAIT = 60.0
"""The longest long poll of ``GET /v1/jobs/{id}/wait`` (seconds)."""
_ITEM = re.compile(r"in item (\d+) of enqueue_many")

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": s.ErrorOut, "description": why} for code, why in (
        (400, "Malformed request"), (401, "No token, or a wrong or revoked one"),
        (403, "The token lacks the scope"), (404, "Not found"), (409, "The state does not allow it"),
        (413, "Too large"), (422, "A value is not accepted"),
    )
}


def options_of(body: s.JobOptions) -> EnqueueOptions:
    """The enqueue options a request gives (the shared default when it gives none)."""
    o = EnqueueOptions(body.delay, body.run_at, body.priority, body.unique_key, body.concurrency_key,
                       body.max_attempts, body.delivery, body.tags, body.meta, body.debounce, body.debounce_key,
                       body.debounce_max, body.expires_in, body.expires_at, depends_on=body.depends_on,
                       on_dependency_failure=body.on_dependency_failure)
    return DEFAULT_OPTIONS if o == DEFAULT_OPTIONS else o


def reads(caller: StoredToken | None) -> bool:
    """Whether the request's token may read jobs (no token: the API takes none)."""
    return caller is None or caller.allows("read")


def existed_json(job: Job) -> str:
    """A job that was there already, as a caller without ``read`` sees it (``JobExistsOut``)."""
    return f'{{"id":{job.id},"binding":{dumps(job.binding).decode()},"state":"{job.state}","existed":true}}'


async def enqueue_flagged(ctx: Context, items: list[tuple[PerformerSpec, Any, EnqueueOptions]],
                          ) -> list[tuple[Job, bool]]:
    """Enqueue jobs (with unique keys) in one transaction, as the app does; each with whether it was made
    now (else an unfinished holder of its key)."""
    return await enqueueing.enqueue_flagged(ctx.app.runtime, items)


async def enqueue_unique(ctx: Context, spec: PerformerSpec, payload: Any, options: EnqueueOptions) -> tuple[Job, bool]:
    """Enqueue a job with a unique key; return it and whether it was made now (or an unfinished holder)."""
    [(job, created)] = await enqueue_flagged(ctx, [(spec, payload, options)])
    return job, created


async def enqueue_one(ctx: Context, body: s.EnqueueBody, caller: StoredToken | None = None) -> tuple[int, bytes]:
    """``POST /v1/jobs``: the status and the body of the response (a job that was there already is shown
    whole only to a caller that may read it)."""
    spec = await ctx.spec(body.binding)
    options = options_of(body)
    if options.unique_key is not None or options.debounce_key is not None:
        job, created = await enqueue_unique(ctx, spec, body.payload, options)
        if created:
            return 201, job_json(job).encode()
        return 200, (job_json(job) if reads(caller) else existed_json(job)).encode()
    job = await ctx.app.enqueue(spec.binding, body.payload, delay=options.delay, run_at=options.run_at,
                                priority=options.priority, concurrency_key=options.concurrency_key,
                                max_attempts=options.max_attempts, delivery=options.delivery, tags=options.tags,
                                meta=options.meta, debounce=options.debounce, debounce_max=options.debounce_max,
                                expires_in=options.expires_in, expires_at=options.expires_at,
                                depends_on=options.depends_on, on_dependency_failure=options.on_dependency_failure)
    return 201, job_json(job).encode()


async def enqueue_many(ctx: Context, body: s.BatchBody, caller: StoredToken | None = None) -> tuple[int, bytes]:
    """``POST /v1/jobs/batch``: the status and the body of the response (to a caller without ``read``,
    jobs that were there already by their unique keys are shown as ``JobExistsOut``)."""
    requests = []
    for i, item in enumerate(body.jobs):
        try:
            spec = await ctx.spec(item.binding)
        except JobloomError as exc:
            exc.api_field = f"jobs[{i}].binding"  # type: ignore[attr-defined]
            exc.add_note(f"in item {i} of the batch (counting from 0); nothing was enqueued")
            raise
        requests.append(EnqueueRequest(spec.binding, item.payload, options_of(item)))
    try:
        if reads(caller) or all(r.options.unique_key is None and r.options.debounce_key is None for r in requests):
            jobs = await ctx.app.enqueue_many(requests)
        else:
            made = await enqueue_flagged(ctx, [(ctx.app.spec(r.performer), r.payload, r.options) for r in requests])
            shown = (job_json(j) if created else existed_json(j) for j, created in made)
            return 201, f'{{"jobs":[{",".join(shown)}]}}'.encode()
    except JobloomError as exc:
        found = next((m for n in getattr(exc, "__notes__", []) if (m := _ITEM.search(n))), None)
        if found:
            inner = field_of(exc)
            exc.api_field = f"jobs[{found.group(1)}]" + (f".{inner}" if inner else "")  # type: ignore[attr-defined]
        raise
    return 201, jobs_json(jobs)


def router(ctx: Context) -> APIRouter:
    """The jobs routes."""
    api = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=ERRORS)
    read, enqueue, operate = (ctx.guarded(n) for n in ("read", "enqueue", "operate"))
    app = ctx.app

    @api.post("", status_code=201, response_model=s.JobOut, **enqueue,
              responses={200: {"model": s.JobOut | s.JobExistsOut,
                               "description": "An unfinished job with that unique_key, or the scheduled job "
                                              "a debounced enqueue collapsed into (without the read scope: "
                                              "its id and state only)"}})
    async def enqueue_job(request: Request, body: s.EnqueueBody) -> Response:
        """Enqueue one job (201); a ``unique_key`` held by an unfinished job returns that job, and a debounced
        enqueue (``debounce`` with ``debounce_key``) that collapses into its key's scheduled job returns that
        job with the new payload (200; to a token without ``read``, its id and state only)."""
        status, content = await enqueue_one(ctx, body, request.state.token)
        return json_response(content, status)

    @api.post("/batch", status_code=201, response_model=s.BatchOut, **enqueue)
    async def enqueue_batch(request: Request, body: s.BatchBody) -> Response:
        """Enqueue jobs in one transaction: all of them, or none (the error names the bad item)."""
        status, content = await enqueue_many(ctx, body, request.state.token)
        return json_response(content, status)

    @api.get("/{job_id}", response_model=s.JobOut, **read)
    async def get_job(job_id: JobId) -> Response:
        """One job."""
        return json_response(job_json(await app.get_job(job_id)).encode())

    @api.get("/{job_id}/dependencies", response_model=s.DependenciesOut, **read)
    async def get_dependencies(job_id: JobId) -> Response:
        """The ids of the jobs a job depends on, and of (up to 100 of) the jobs that depend on it."""
        deps, dependants = await app.job_links(job_id)
        return json_response(dumps({"dependencies": list(deps), "dependants": list(dependants)}))

    @api.get("/{job_id}/why", response_model=s.DiagnosisOut, **read)
    async def why_job(job_id: JobId) -> Response:
        """Why a job is not running (or why an expired one never ran), asked of the dispatch decision itself."""
        return json_response(dumps(diagnosis_dict(await why_not_running(app, job_id))))

    @api.get("/{job_id}/attempts", response_model=s.AttemptsOut, **read)
    async def get_attempts(job_id: JobId) -> Response:
        """Every attempt of a job, oldest first."""
        found = await app.attempts(job_id)
        return json_response(f'{{"attempts":[{",".join(attempt_json(a) for a in found)}]}}'.encode())

    @api.post("/{job_id}/cancel", response_model=s.JobOut, **operate)
    async def cancel_job(job_id: JobId) -> Response:
        """Cancel a job: at once unless running; a running job's worker is told to stop it."""
        return json_response(job_json(await app.cancel(job_id)).encode())

    @api.post("/{job_id}/retry", response_model=s.JobOut, **operate)
    async def retry_job(job_id: JobId) -> Response:
        """Queue a failed, stalled or cancelled job again (409 in any other state)."""
        return json_response(job_json(await app.retry(job_id)).encode())

    @api.get("/{job_id}/wait", response_model=s.JobOut, **read,
             responses={408: {"model": s.ErrorOut, "description": "Not finished within the timeout"}})
    async def wait_job(job_id: JobId, request: Request,
                       timeout: Annotated[float, Query(ge=0, le=MAX_WAIT)] = 30.0) -> Response:
        """Long poll: the job once it is finished; 408 if it is not within ``timeout`` seconds (or at once
        when the server stops); 429 past the long polls one token may hold at once."""
        async with ctx.polls.hold(request.state.token, request.receive) as gone:
            job = await ctx.waits.wait(job_id, timeout, gone)
        return json_response(job_json(job).encode())

    @api.post("/{job_id}/events/{name}", response_model=s.EventOut, **enqueue)
    async def send_event(job_id: JobId, name: Annotated[str, Path(description="The event's name.")],
                         data: Annotated[s.JsonValue, Body(description="The event's data (any JSON).")] = None,
                         ) -> Response:
        """Deliver ``data`` to the job's ``wait_for_event(name)``; says whether a waiting job was woken."""
        return json_response(dumps({"woken": await app.send_event(job_id, name, data)}))

    return api
