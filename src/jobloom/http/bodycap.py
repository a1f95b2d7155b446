"""The cap on request bodies: 413 beyond it, before the body is read into a model.

A pure ASGI middleware (no per-request task): a declared ``Content-Length`` over the cap is refused at
once; a body sent in chunks is counted as it arrives and refused as soon as it passes the cap.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from jobloom.engine.performer import MAX_PAYLOAD_BYTES
from jobloom.http.encode import dumps
from jobloom.http.errors import error_body

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY = MAX_PAYLOAD_BYTES + 64 * 1024
"""The largest request body: one payload at its limit plus room for the options around it."""
MAX_BATCH_BODY = 32 * 1024 * 1024
"""The largest body of ``POST /v1/jobs/batch``."""


class BodyCap:
    """Refuse request bodies over ``max_body`` bytes (``max_batch_body`` for paths ending in ``/batch``)."""

    def __init__(self, app: ASGIApp, max_body: int = MAX_BODY, max_batch_body: int = MAX_BATCH_BODY) -> None:
        self.app = app
        self.max_body = max_body
        self.max_batch_body = max_batch_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer 413 when its body is over the cap."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = self.max_batch_body if scope["path"].endswith("/batch") else self.max_body
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > cap:
                    await self._refuse(send, cap)
                    return
        messages: list[Message] = []
        size = 0
        more = scope["method"] not in ("GET", "HEAD", "DELETE", "OPTIONS")
        while more:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > cap:
                await self._refuse(send, cap)
                return
            more = bool(message.get("more_body"))

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send, cap: int) -> None:
        body = dumps(error_body("RequestTooLarge", f"the request body is larger than {cap} bytes"))
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
