"""``/v1/batches``: enqueue jobs as one batch with callbacks, and read a batch's counts."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Path
from fastapi.responses import Response

from jobloom.core.errors import JobloomError
from jobloom.core.text import MAX_ID
from jobloom.core.types import Batch
from jobloom.engine.enqueue import EnqueueRequest
from jobloom.http import schemas as s
from jobloom.http.context import Context, json_response
from jobloom.http.encode import dumps
from jobloom.http.errors import field_of
from jobloom.http.jobs import ERRORS, options_of

BatchId = Annotated[int, Path(description="The batch's id.", ge=-MAX_ID, le=MAX_ID)]
_ITEM = re.compile(r"in item (\d+) of batch")


def batch_json(b: Batch) -> bytes:
    """A batch as ``JobBatchOut``."""
    return dumps({"id": b.id, "job_ids": b.job_ids, "total": b.total, "succeeded": b.succeeded, "failed": b.failed,
                  "cancelled": b.cancelled, "pending": b.pending, "on_complete": b.on_complete,
                  "on_success": b.on_success})


async def create(ctx: Context, body: s.NewBatchBody) -> Batch:
    """Enqueue the body's jobs as one batch (a bad item's error names it: ``jobs[i].field``)."""
    requests = []
    for i, item in enumerate(body.jobs):
        try:
            spec = await ctx.spec(item.binding)
        except JobloomError as exc:
            exc.api_field = f"jobs[{i}].binding"  # type: ignore[attr-defined]
            raise
        requests.append(EnqueueRequest(spec.binding, item.payload, options_of(item)))
    callbacks: list[tuple[str, dict[str, Any]] | None] = []
    for name, cb in (("on_complete", body.on_complete), ("on_success", body.on_success)):
        if cb is None:
            callbacks.append(None)
            continue
        try:
            callbacks.append(((await ctx.spec(cb.binding)).binding, cb.payload or {}))
        except JobloomError as exc:
            exc.api_field = f"{name}.binding"  # type: ignore[attr-defined]
            raise
    try:
        return await ctx.app.batch(requests, on_complete=callbacks[0], on_success=callbacks[1])
    except JobloomError as exc:
        found = next((m for n in getattr(exc, "__notes__", []) if (m := _ITEM.search(n))), None)
        if found:
            inner = field_of(exc)
            exc.api_field = f"jobs[{found.group(1)}]" + (f".{inner}" if inner else "")  # type: ignore[attr-defined]
        raise


def router(ctx: Context) -> APIRouter:
    """The batches routes."""
    api = APIRouter(prefix="/v1/batches", tags=["batches"], responses=ERRORS)
    read, enqueue = ctx.guarded("read"), ctx.guarded("enqueue")

    @api.post("", status_code=201, response_model=s.JobBatchOut, **enqueue)
    async def create_batch(body: s.NewBatchBody) -> Response:
        """Enqueue jobs as one batch with its callbacks, in one transaction: ``on_complete`` is enqueued
        once when every job ended, ``on_success`` once if they all succeeded; each gets the batch's counts
        (``batch``, ``total``, ``succeeded``, ``failed``, ``cancelled``) merged into its payload."""
        return json_response(batch_json(await create(ctx, body)), 201)

    @api.get("/{batch_id}", response_model=s.JobBatchOut, **read)
    async def get_batch(batch_id: BatchId) -> Response:
        """A batch: its jobs' ids and how many succeeded, failed, were cancelled or are still pending."""
        return json_response(batch_json(await ctx.app.get_batch(batch_id)))

    return api
