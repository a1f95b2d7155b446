"""``/v1/topics``: publish an event to a topic (one job per subscribed binding), and list the topics."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import Response

from jobloom.core.errors import JobloomError, UnknownBinding
from jobloom.engine.topics import MAX_TOPIC, check_topic
from jobloom.http import schemas as s
from jobloom.http.context import Context, json_response
from jobloom.http.encode import dumps, jobs_json
from jobloom.http.jobs import ERRORS

Topic = Annotated[str, Path(description="The topic's name: 1 to 128 of A-Z a-z 0-9 . _ - :, starting with a "
                                        "letter or digit.", max_length=MAX_TOPIC * 4)]


async def known_specs(ctx: Context) -> None:
    """On a bare store (``jobloom serve --url``), bring the app's specs up to date with the enqueue rules
    that the performing apps stored, so that their ``triggers`` are known here. A binding whose rules
    cannot be applied (stored by another version of jobloom) is not a subscriber this server knows of."""
    if not ctx.named:
        return
    for binding in await ctx.stored_bindings():
        try:
            await ctx.spec(binding)
        except UnknownBinding:
            continue


async def publish(ctx: Context, topic: str, data: s.JsonValue) -> tuple[int, bytes]:
    """``POST /v1/topics/{topic}``: the status (201 if a job was made, 200 for a topic nobody subscribes
    to) and the body."""
    try:
        check_topic(topic)
    except JobloomError as exc:
        exc.api_field = "topic"  # type: ignore[attr-defined]
        raise
    await known_specs(ctx)
    try:
        jobs = await ctx.app.publish(topic, data)
    except JobloomError as exc:
        exc.api_field = getattr(exc, "api_field", None) or "data"  # type: ignore[attr-defined]
        raise
    return (201 if jobs else 200), jobs_json(jobs, extra=f',"topic":{dumps(topic).decode()}')


def router(ctx: Context) -> APIRouter:
    """The topics routes."""
    api = APIRouter(prefix="/v1/topics", tags=["topics"], responses=ERRORS)
    read, enqueue = ctx.guarded("read"), ctx.guarded("enqueue")

    @api.post("/{topic}", status_code=201, response_model=s.PublishOut, **enqueue,
              responses={200: {"model": s.PublishOut, "description": "A topic nobody subscribes to: accepted, "
                                                                      "nothing enqueued (``jobs`` is empty)"}})
    async def publish_topic(topic: Topic, body: s.PublishBody) -> Response:
        """Publish ``data`` to ``topic``: one job of each binding that subscribes to it (its performer's
        ``triggers``), in one transaction. The data is checked against every subscriber's payload type
        first: one that refuses it refuses the publish (422 naming the binding; nothing is enqueued)."""
        status, content = await publish(ctx, topic, body.data)
        return json_response(content, status)

    @api.get("", response_model=s.TopicsOut, **read)
    async def list_topics() -> Response:
        """Each topic that a binding subscribes to, with those bindings (sorted)."""
        await known_specs(ctx)
        return json_response(dumps({"topics": ctx.app.topics()}))

    return api
