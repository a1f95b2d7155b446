"""``GET /v1/bindings`` and ``POST /v1/bindings/{name}/pause|resume``.

Written against the app's binding API (``App.list_bindings()``, ``pause_binding``, ``resume_binding``);
the factory includes this router once the app has it (the ``type: ignore`` comments mark where the
app lacks it today; mypy reports them once they are unneeded). Each binding is shown with what
``list_bindings`` reports (limits in force, paused or not, counts by state, workers) and, for the
app's own performers, the payload's JSON schema.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from fastapi.responses import Response
from pydantic import BaseModel

from jobloom.core.text import MAX_NAME_BYTES, check_name
from jobloom.http.context import Context, json_response
from jobloom.http.encode import dumps, plain
from jobloom.http.errors import NotFound
from jobloom.http.jobs import ERRORS

Binding = Annotated[str, Path(description="The binding's name.")]


class BindingOut(BaseModel):
    """One binding: its state and limits as stored, and its payload's JSON schema when the app performs it."""

    name: str
    paused: bool
    info: dict[str, Any]
    payload_schema: dict[str, Any] | None


class BindingsOut(BaseModel):
    """Every binding the store or the app knows."""

    bindings: list[BindingOut]


def describe(ctx: Context, info: Any) -> dict[str, Any]:
    """A binding of ``list_bindings`` as the API shows it."""
    fields = plain(info)
    name = str(fields.get("name") or fields.get("binding"))
    spec = ctx.app.specs.get(name)
    schema = None if spec is None else spec.payload_adapter.json_schema()
    return {"name": name, "paused": bool(fields.get("paused")), "info": fields, "payload_schema": schema}


def router(ctx: Context) -> APIRouter:
    """The bindings listing and pause routes."""
    api = APIRouter(prefix="/v1/bindings", tags=["bindings"], responses=ERRORS)
    read, operate = (ctx.guarded(n) for n in ("read", "operate"))
    app = ctx.app

    async def shown(name: str) -> dict[str, Any]:
        for info in await app.list_bindings():
            if describe(ctx, info)["name"] == name:
                return describe(ctx, info)
        raise NotFound(f"unknown binding {name!r}", "name")

    @api.get("", response_model=BindingsOut, **read)
    async def list_bindings() -> Response:
        """Every binding: limits in force, paused or not, counts by state, payload schema."""
        found = await app.list_bindings()
        return json_response(dumps({"bindings": [describe(ctx, b) for b in found]}))

    @api.post("/{name}/pause", response_model=BindingOut, **operate)
    async def pause_binding(name: Binding) -> Response:
        """Stop dispatching the binding's jobs (running ones finish; enqueue is still accepted)."""
        check_name("binding", name, MAX_NAME_BYTES)
        await app.pause_binding(name)
        return json_response(dumps(await shown(name)))

    @api.post("/{name}/resume", response_model=BindingOut, **operate)
    async def resume_binding(name: Binding) -> Response:
        """Dispatch the binding's jobs again."""
        check_name("binding", name, MAX_NAME_BYTES)
        await app.resume_binding(name)
        return json_response(dumps(await shown(name)))

    return api
