"""``/v1/bindings/{name}/limits`` and ``/v1/counts``: a binding's run-time limits, and jobs per state.

Listing bindings and pausing them are in :mod:`jobloom.http.binding_state`."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from jobloom.app.bindings import set_limits as set_known_limits
from jobloom.core.errors import UnknownBinding
from jobloom.core.queries import Q
from jobloom.core.rows import PolicyRow
from jobloom.core.text import MAX_NAME_BYTES, check_name
from jobloom.http import schemas as s
from jobloom.http.context import Context, json_response
from jobloom.http.encode import dumps
from jobloom.http.errors import NotFound
from jobloom.http.jobs import ERRORS
from jobloom.store import Tx

Binding = Annotated[str, Path(description="The binding's name.")]


async def overrides(ctx: Context, binding: str) -> dict[str, Any]:
    """The run-time limits stored for ``binding``."""
    store = await ctx.app.store()

    async def work(tx: Tx) -> PolicyRow | None:
        return await tx.fetchone(Q.get_binding, {"binding": binding})

    row = await store.transact(work, exclusive=False)
    found: dict[str, Any] = json.loads(row.overrides) if row and row.overrides else {}
    return found


def router(ctx: Context) -> APIRouter:
    """The limits and counts routes."""
    api = APIRouter(prefix="/v1", tags=["bindings"], responses=ERRORS)
    read, operate = (ctx.guarded(n) for n in ("read", "operate"))
    app = ctx.app

    @api.put("/bindings/{name}/limits", response_model=s.LimitsOut, **operate)
    async def set_limits(name: Binding, body: s.LimitsBody) -> Response:
        """Change a binding's limits at run time (the fields given; null lifts a limit); effective at the
        next dispatch in every worker. A binding that the app does not perform and that no worker has
        registered (nor limits were stored for) is 404: nothing is stored for it."""
        check_name("binding", name, MAX_NAME_BYTES)
        try:  # a name nothing performs is not found: never a row made for it
            await set_known_limits(app.runtime, name, body.model_dump(exclude_unset=True), known_only=True)
        except UnknownBinding as exc:
            raise NotFound(str(exc), "name") from None
        return json_response(dumps({"binding": name, "overrides": await overrides(ctx, name)}))

    @api.get("/counts", response_model=s.CountsOut, **read)
    async def counts(
        finished: Annotated[bool, Query(description="Count succeeded and skipped jobs too (reads every job).")]
        = False,
    ) -> Response:
        """Jobs per binding and state."""
        return json_response(dumps({"counts": await app.counts(finished=finished)}))

    return api
