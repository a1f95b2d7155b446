"""The fast lane of the two enqueue operations, ``POST /v1/jobs`` and ``POST /v1/jobs/batch``.

These are the API's hot path. A request with a JSON body and a token allowed to enqueue is read,
validated (pydantic, straight from the JSON bytes) and enqueued here, without FastAPI's routing and
dependency machinery, by the same functions as the FastAPI routes (:func:`jobloom.http.jobs.enqueue_one`
and :func:`~jobloom.http.jobs.enqueue_many`); a jobloom error is answered with the same envelope.
Every other request, and every one that does not pass (no or a bad token, a body that does not fit
the model), goes on to FastAPI unchanged, which answers it as documented.
"""

from __future__ import annotations

import pydantic

from jobloom.core.errors import JobloomError
from jobloom.http import schemas as s
from jobloom.http.bodycap import ASGIApp, Message, Receive, Scope, Send
from jobloom.http.context import Context
from jobloom.http.errors import error_response
from jobloom.http.jobs import enqueue_many, enqueue_one

_JSON = (b"application/json", b"application/json; charset=utf-8")


class FastLane:
    """Serve valid, authorized enqueue requests directly; pass everything else to ``app``."""

    def __init__(self, app: ASGIApp, ctx: Context) -> None:
        self.app = app
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request if it is an enqueue this lane can take, else hand it on."""
        path, root = scope.get("path", ""), scope.get("root_path", "")
        if root and path.startswith(root):  # mounted under a prefix: the path within this app
            path = path[len(root):]
        if scope["type"] != "http" or scope["method"] != "POST" or path not in ("/v1/jobs", "/v1/jobs/batch"):
            await self.app(scope, receive, send)
            return
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
            await self.ctx.guard.check(authorization, "enqueue")
            if path == "/v1/jobs":
                one = s.EnqueueBody.model_validate_json(body)
            else:
                many = s.BatchBody.model_validate_json(body)
        except (JobloomError, pydantic.ValidationError, ValueError):
            await self.app(scope, replay, send)  # FastAPI answers it, with its documented error
            return
        try:
            status, content = await (enqueue_one(self.ctx, one) if path == "/v1/jobs" else enqueue_many(self.ctx, many))
        except JobloomError as exc:
            await error_response(exc)(scope, replay, send)
            return
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})
