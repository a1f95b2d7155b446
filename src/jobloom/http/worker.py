"""The worker protocol over HTTP: remote workers in any language claim jobs of remote bindings, renew their
leases and report how each attempt ended (scope ``worker``).

``POST /v1/worker/claim``, ``/heartbeat`` and ``/complete`` map onto ``App.remote_claim``,
``remote_heartbeat`` and ``remote_complete``: the same coordinator as the app's Python workers, so a
binding's limits hold across both, and a report is fenced by its attempt (a stale one is a 409 and
changes nothing) and by its claim: each claimed job carries a secret (``claim``) that every heartbeat and
the report of that attempt must present (403 ``ClaimRefused`` otherwise, nothing changed), so a client
that knows a worker's name cannot renew or complete its jobs. A token made with ``--bindings`` may
claim, heartbeat and complete only the jobs of those bindings (403 naming the binding). A long poll
(``wait``) waits on the store's wake-ups in the server's event loop: it holds no thread, and other
requests are served meanwhile. Times are epoch seconds, as a worker
compares them with its own clock.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from jobloom.app.remote import MAX_BINDINGS, MAX_CLAIM, MAX_CLAIM_CHARS, MAX_HEARTBEAT, MAX_WAIT
from jobloom.http import schemas as s
from jobloom.http.context import Context, json_response
from jobloom.http.encode import dumps
from jobloom.http.errors import ApiError
from jobloom.http.jobs import ERRORS
from jobloom.http.tokens import StoredToken

Worker = Annotated[str, Field(description="The remote worker's name (unique among live workers).")]
Outcome = Literal["succeeded", "failed", "retry", "permanent"]
Claim = Annotated[str, Field(min_length=1, max_length=MAX_CLAIM_CHARS,
                             description="The attempt's claim secret, as its claim returned it.")]


class StaleAttempt(ApiError):
    """The attempt no longer holds the job (its lease was lost, or it was cancelled): nothing changed."""

    status = 409


class ClaimBody(s.Body):
    """Claim up to ``max`` runnable jobs of ``bindings``, within every limit."""

    worker: Worker
    bindings: list[str] = Field(min_length=1, max_length=MAX_BINDINGS, description="Remote bindings to take.")
    max: int = Field(ge=1, le=MAX_CLAIM, description="At most this many jobs.")
    wait: float | None = Field(None, ge=0, le=MAX_WAIT, description="Seconds to wait for one (a long poll).")


class ClaimedJob(BaseModel):
    """A job to run: attempt ``attempt``; renew its lease (heartbeat) before ``lease_expires_at``."""

    id: int
    attempt: int
    binding: str
    payload: s.JsonValue
    deadline: float | None = Field(description="Epoch seconds past which the attempt times out (null: none).")
    lease_expires_at: float = Field(description="Epoch seconds; without a heartbeat the job is retried after.")
    claim: str = Field(description="This attempt's secret: every heartbeat and the report of the attempt "
                                   "present it (only its hash is stored).")


class ClaimOut(BaseModel):
    """The jobs claimed (none when nothing was runnable within ``wait``)."""

    jobs: list[ClaimedJob]


class AttemptKey(BaseModel):
    """One attempt of a job."""

    id: int
    attempt: int


class ClaimedAttempt(BaseModel):
    """One attempt of a job, with the claim secret its claim returned."""

    id: int
    attempt: int
    claim: Claim


class HeartbeatBody(s.Body):
    """Renew the leases of the worker's running attempts (never past an attempt's deadline)."""

    worker: Worker
    jobs: list[ClaimedAttempt] = Field(max_length=MAX_HEARTBEAT)


class HeartbeatOut(BaseModel):
    """The attempts the worker still holds; stop any other (its lease was lost, or it was cancelled)."""

    jobs: list[AttemptKey]


class CompleteBody(s.Body):
    """How an attempt ended."""

    worker: Worker
    id: int
    attempt: int
    claim: Claim
    outcome: Outcome = Field(description="succeeded (with result), failed (retried under the binding's policy), "
                                         "retry (another attempt, after retry_after or the backoff), permanent.")
    result: s.JsonValue = Field(None, description="The job's result (JSON), when succeeded.")
    error: str | None = Field(None, description="The attempt's error message.")
    retry_after: float | None = Field(None, description="Seconds before the next attempt, with retry.")


class CompleteOut(BaseModel):
    """The report was applied."""

    applied: bool


async def claim_jobs(ctx: Context, body: ClaimBody, caller: StoredToken | None = None,
                     gone: asyncio.Event | None = None) -> tuple[int, bytes]:
    """``POST /v1/worker/claim``: the status and the body of the response; ``gone`` is set if the
    worker's connection closes meanwhile (the long poll then ends, claiming nothing)."""
    jobs = await ctx.app.remote_claim(body.worker, body.bindings, body.max, body.wait, gone, only=_only(caller))
    return 200, dumps({"jobs": [j.as_dict() for j in jobs]})


async def renew(ctx: Context, body: HeartbeatBody, caller: StoredToken | None = None) -> tuple[int, bytes]:
    """``POST /v1/worker/heartbeat``: the status and the body of the response (``ClaimRefused``: 403)."""
    held = await ctx.app.remote_heartbeat(body.worker, [(j.id, j.attempt, j.claim) for j in body.jobs],
                                          only=_only(caller))
    return 200, dumps({"jobs": [{"id": i, "attempt": a} for i, a in held]})


async def report(ctx: Context, body: CompleteBody, caller: StoredToken | None = None) -> tuple[int, bytes]:
    """``POST /v1/worker/complete``: the status and the body of the response (``StaleAttempt``: 409,
    ``ClaimRefused``: 403)."""
    applied = await ctx.app.remote_complete(body.worker, body.id, body.attempt, body.outcome, body.result,
                                            body.error, body.retry_after, claim=body.claim, only=_only(caller))
    if not applied:
        raise StaleAttempt(f"job {body.id} attempt {body.attempt} is no longer held by {body.worker!r}: "
                           "its lease was lost, it reached its timeout, or it was cancelled; nothing changed")
    return 200, b'{"applied":true}'


def _only(caller: StoredToken | None) -> frozenset[str] | None:
    """The bindings a binding-limited token may touch (None: every one)."""
    return None if caller is None else caller.bindings


REFUSED: dict[int | str, dict[str, Any]] = {403: {
    "model": s.ErrorOut,
    "description": "The token lacks the scope, is limited to other bindings, or the claim secret does not match"}}


def router(ctx: Context) -> APIRouter:
    """The worker protocol's routes (also served by the fast lane, :mod:`jobloom.http.fastlane`)."""
    api = APIRouter(prefix="/v1/worker", tags=["worker"], responses=ERRORS)
    worker = ctx.guarded("worker")

    @api.post("/claim", response_model=ClaimOut, responses=REFUSED, **worker)
    async def claim(body: ClaimBody, request: Request) -> Response:
        """Claim jobs of remote bindings; with ``wait``, wait up to that long for one (a long poll; 429 past
        the long polls one token may hold at once)."""
        if not body.wait:
            status, content = await claim_jobs(ctx, body, request.state.token)
            return json_response(content, status)
        async with ctx.polls.hold(request.state.token, request.receive) as gone:
            status, content = await claim_jobs(ctx, body, request.state.token, gone)
        return json_response(content, status)

    @api.post("/heartbeat", response_model=HeartbeatOut, responses=REFUSED, **worker)
    async def heartbeat(body: HeartbeatBody, request: Request) -> Response:
        """Renew the leases of running attempts (never past a deadline); answers those still held."""
        status, content = await renew(ctx, body, request.state.token)
        return json_response(content, status)

    @api.post("/complete", response_model=CompleteOut, **worker,
              responses={**REFUSED, 409: {"model": s.ErrorOut, "description": "The attempt no longer holds the job"}})
    async def complete(body: CompleteBody, request: Request) -> Response:
        """Report how an attempt ended: 200 applied, 409 stale, 403 a wrong claim (nothing changed)."""
        status, content = await report(ctx, body, request.state.token)
        return json_response(content, status)

    return api
