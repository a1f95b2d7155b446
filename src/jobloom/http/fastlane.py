"""The fast lane of the API's hot operations: the two enqueues (``POST /v1/jobs`` and ``/v1/jobs/batch``)
and the worker protocol (``POST /v1/worker/claim``, ``/heartbeat`` and ``/complete``, a request per job).

A request with a JSON body and a token with the operation's scope is read, validated (pydantic,
straight from the JSON bytes) and served here, without FastAPI's routing and dependency machinery, by
the same functions as the FastAPI routes (:mod:`jobloom.http.jobs`, :mod:`jobloom.http.worker`); a
jobloom error is answered with the same envelope. Every other request, and every one that does not
pass (no or a bad token, a body that does not fit the model), goes on to FastAPI unchanged, which
answers it as documented.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pydantic

from jobloom.core.errors import JobloomError
from jobloom.http import schemas as s
from jobloom.http import worker as w
from jobloom.http.bounds import ASGIApp, Message, Receive, Scope, Send
from jobloom.http.context import Context
from jobloom.http.errors import error_response
from jobloom.http.jobs import enqueue_many, enqueue_one
from jobloom.http.tokens import StoredToken

_JSON = (b"application/json", b"application/json; charset=utf-8")
Serve = Callable[[Context, Any, StoredToken | None], Awaitable[tuple[int, bytes]]]
LANES: dict[str, tuple[str, type[pydantic.BaseModel], Serve]] = {
    "/v1/jobs": ("enqueue", s.EnqueueBody, enqueue_one),
    "/v1/jobs/batch": ("enqueue", s.BatchBody, enqueue_many),
    "/v1/worker/claim": ("worker", w.ClaimBody, w.claim_jobs),
    "/v1/worker/heartbeat": ("worker", w.HeartbeatBody, w.renew),
    "/v1/worker/complete": ("worker", w.CompleteBody, w.report),
}
"""Each path the lane serves: the scope it needs, its body's model, the function that serves it."""


class FastLane:
    """Serve valid, authorized requests of :data:`LANES` directly; pass everything else to ``app``."""

    def __init__(self, app: ASGIApp, ctx: Context) -> None:
        self.app = app
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request if this lane can take it, else hand it on."""
        path, root = scope.get("path", ""), scope.get("root_path", "")
        if root and path.startswith(root):  # mounted under a prefix: the path within this app
            path = path[len(root):]
        lane = LANES.get(path) if scope["type"] == "http" and scope["method"] == "POST" else None
        if lane is None:
            await self.app(scope, receive, send)
            return
        needed, model, serve = lane
        authorization = content_type = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"content-type":
                content_type = value.lower()
        messages: list[Message] = []
        body = b""
        while True:  # the body cap in front of this lane has bounded it
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body"):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        if content_type not in _JSON:
            await self.app(scope, replay, send)
            return
        try:
            caller = await self.ctx.guard.check(authorization, needed)
            request = model.model_validate_json(body)
        except (JobloomError, pydantic.ValidationError, ValueError):
            await self.app(scope, replay, send)  # FastAPI answers it, with its documented error
            return
        try:
            if serve is w.claim_jobs and isinstance(request, w.ClaimBody) and request.wait:
                async with self.ctx.polls.hold(caller, receive) as gone:
                    status, content = await w.claim_jobs(self.ctx, request, caller, gone)
            else:
                status, content = await serve(self.ctx, request, caller)
        except JobloomError as exc:
            await error_response(exc)(scope, replay, send)
            return
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})
