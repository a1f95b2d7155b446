"""``GET /v1/bindings`` and ``POST /v1/bindings/{name}/pause|resume``.

Each binding is shown as ``App.list_bindings`` reports it (the limits in force and which of them were
changed at run time, paused or not, jobs by state, the live workers serving it) and, for the bindings
the serving app declares, its options and the payload's JSON schema (null for a binding known to the
store only, as with ``jobloom serve --url``).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path
from fastapi.responses import Response
from pydantic import BaseModel, Field

from jobloom.app.bindings import BindingInfo
from jobloom.core.errors import UnknownBinding
from jobloom.engine.performer import PerformerSpec
from jobloom.engine.rules import StoredSpec
from jobloom.http.context import Context, json_response
from jobloom.http.encode import dumps
from jobloom.http.errors import NotFound
from jobloom.http.jobs import ERRORS

Binding = Annotated[str, Path(description="The binding's name.")]


class LimitsInForce(BaseModel):
    """The limits the coordinator applies: the code's values under run-time overrides."""

    concurrency: int | None
    key_concurrency: int | None
    rate_per_second: float | None
    burst: float | None
    priority_aging: float | None
    batch_size: int | None
    key_rate_per_second: float | None = None
    key_burst: float | None = None
    fairness: str | None = Field(None, description='"round_robin": the concurrency keys take turns.')
    key_weights: dict[str, int] = Field(default_factory=dict, description="Starts in a row per key's turn.")


class BindingOptions(BaseModel):
    """The performer options of a binding the serving app declares."""

    priority: int
    max_attempts: int
    timeout: float | None
    delivery: str
    unique_for: float
    max_snoozes: int
    backoff: dict[str, Any]
    kind: str = Field(description="python (run by this app's workers), push (HttpPerformer) or remote (pull).")


class BindingOut(BaseModel):
    """One binding."""

    binding: str
    paused: bool
    paused_at: datetime | None
    limits: LimitsInForce
    overridden: list[str] = Field(description="The limits changed at run time (PUT /v1/bindings/{name}/limits).")
    registered: bool = Field(description="A worker stored this binding's limits from its code.")
    defaults_known: bool = Field(description="False: only run-time overrides are known (no worker, no app code).")
    counts: dict[str, int] = Field(description="Jobs by state (succeeded and skipped ones left out).")
    workers: list[str] = Field(description="The live workers that serve it.")
    options: BindingOptions | None
    payload_schema: dict[str, Any] | None = Field(description="The payload's JSON Schema (null: unknown here).")


class BindingsOut(BaseModel):
    """Every binding the store or the app knows, by name."""

    bindings: list[BindingOut]


def _options(spec: PerformerSpec) -> dict[str, Any]:
    kind = "remote" if spec.remote is not None else "push" if spec.push else "python"
    return {"priority": spec.priority, "max_attempts": spec.max_attempts, "timeout": spec.timeout,
            "delivery": spec.delivery, "unique_for": spec.unique_for, "max_snoozes": spec.max_snoozes,
            "backoff": asdict(spec.backoff), "kind": kind}


def _schema(spec: PerformerSpec) -> dict[str, Any] | None:
    """The payload's JSON Schema, or None for a type that has none JSON can hold."""
    if isinstance(spec, StoredSpec):  # a bare store's binding: the schema its performing app stored
        return None if spec.validator is None else dict(spec.validator.schema)
    try:
        schema: dict[str, Any] = spec.payload_adapter.json_schema()
        json.dumps(schema, allow_nan=False)
    except Exception:  # a type pydantic cannot describe: no schema, the rest is still shown
        return None
    return schema


def describe(ctx: Context, info: BindingInfo) -> dict[str, Any]:
    """A binding of ``list_bindings`` as the API shows it."""
    fields = info.as_json()
    spec = ctx.app.specs.get(info.binding)
    return {
        "binding": info.binding, "paused": info.paused, "paused_at": fields["paused_at"],
        "limits": {k: fields[k] for k in LimitsInForce.model_fields},
        "overridden": fields["overridden"], "registered": info.registered, "defaults_known": info.defaults_known,
        "counts": fields["counts"], "workers": fields["workers"],
        "options": None if spec is None else _options(spec),
        "payload_schema": None if spec is None else _schema(spec),
    }


def router(ctx: Context) -> APIRouter:
    """The bindings listing and pause routes."""
    api = APIRouter(prefix="/v1/bindings", tags=["bindings"], responses=ERRORS)
    read, operate = (ctx.guarded(n) for n in ("read", "operate"))
    app = ctx.app

    async def paused(name: str, pause: bool) -> Response:
        try:
            info = await (app.pause_binding(name) if pause else app.resume_binding(name))
        except UnknownBinding as exc:  # a name in the path: not found, rather than a bad value
            raise NotFound(str(exc), "name") from None
        return json_response(dumps(describe(ctx, info)))

    @api.get("", response_model=BindingsOut, **read)
    async def list_bindings() -> Response:
        """Every binding: limits in force, paused or not, jobs by state, workers, options, payload schema
        (on a bare store's server, those its performing app stored; null for a binding it cannot enqueue)."""
        found = await app.list_bindings()
        if ctx.named:  # the options and schema each binding is enqueued by here
            for info in found:
                with contextlib.suppress(UnknownBinding):
                    await ctx.spec(info.binding)
        return json_response(dumps({"bindings": [describe(ctx, b) for b in found]}))

    @api.post("/{name}/pause", response_model=BindingOut, **operate)
    async def pause_binding(name: Binding) -> Response:
        """Pause a binding (one the app or the store knows; 404 otherwise) in every worker: once this
        returns no job of it starts (running ones finish; enqueue is still accepted and its jobs wait)."""
        return await paused(name, True)

    @api.post("/{name}/resume", response_model=BindingOut, **operate)
    async def resume_binding(name: Binding) -> Response:
        """Dispatch the binding's jobs again."""
        return await paused(name, False)

    return api
