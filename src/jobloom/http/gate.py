"""The gate in front of the API and the dashboard: who is calling is decided before a byte of the body
is read, and the body is read within a cap and a time.

- A request of the API that takes a token (everything under ``/v1`` but health and the docs, and
  ``/metrics``) without a valid ``Authorization: Bearer`` token is answered ``401`` at once: its body is
  never read.
- A caller with a valid token (or a dashboard session, or any caller when the API takes no token) may
  send a body up to the cap of its exact route (``POST /v1/jobs/batch``: the batch cap; any other: the
  body cap); any other caller (the login form) a small one, whatever the method (a ``GET`` may carry
  a chunked body too). A declared ``Content-Length`` over the cap is refused at once, a chunked body as
  soon as it passes it (``413``).
- A body must keep arriving (at most ``body_idle`` seconds between two chunks) and be complete within
  ``body_time`` seconds: ``408`` otherwise.

Each refusal closes the connection, so the rest of the request is never read. The body, once read, is
handed on as one message; the token found is left in the scope (``jobloom.token``) for the fast lane.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from jobloom.core.errors import JobloomError
from jobloom.http.auth import Guard
from jobloom.http.bounds import ASGIApp, Bounds, Message, Receive, Scope, Send, body_cap, needs_token, path_within
from jobloom.http.bounds import refuse as refuse
from jobloom.http.longpoll import LongPolls

SessionCheck = Callable[[Scope], Awaitable[bool]]
"""Whether a request carries a valid dashboard session (read from its headers only)."""
TOKEN_KEY = "jobloom.token"
"""Where the gate leaves the request's token (a ``StoredToken``, or None) in the ASGI scope."""
_BODILESS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})


class Gate:
    """Authenticate before the body, cap it by route, time it out (see the module)."""

    def __init__(self, app: ASGIApp, guard: Guard, bounds: Bounds, session: SessionCheck | None = None,
                 polls: LongPolls | None = None) -> None:
        self.app = app
        self.guard = guard
        self.bounds = bounds
        self.session = session
        self.polls = polls
        """The long polls behind the gate, for the server to end them when it stops."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse the request, or read its body and pass it on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = path_within(scope), scope["method"]
        authorization = declared = None
        chunked = False
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"content-length":
                declared = value
            elif name == b"transfer-encoding":
                chunked = True
        authenticated = self.guard.mode == "off"
        if not authenticated and authorization is not None:
            try:
                scope[TOKEN_KEY] = await self.guard.authenticate(authorization)
                authenticated = True
            except JobloomError as exc:
                if needs_token(path):
                    await refuse(send, 401, "Unauthorized", str(exc))
                    return
        if not authenticated and needs_token(path):
            await refuse(send, 401, "Unauthorized", "this operation needs a token: Authorization: Bearer <token>")
            return
        if not authenticated and self.session is not None:
            authenticated = await self.session(scope)
        cap = body_cap(self.bounds, method, path, authenticated)
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                size = 0
            if size > cap:
                await _too_large(send, cap, authenticated)
                return
        if method in _BODILESS and declared is None and not chunked:  # a GET's chunked body is capped too
            await self.app(scope, receive, send)
            return
        body = await self._read(receive, send, cap, authenticated)
        if body is None:
            return
        messages: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

        async def replay() -> Message:
            return messages.pop() if messages else await receive()

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive, send: Send, cap: int, authenticated: bool) -> bytes | None:
        """The whole body, or None when it was refused (413, 408) or the client left."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.bounds.body_time
        chunks: list[bytes] = []
        size = 0
        while True:
            left = min(self.bounds.body_idle, deadline - loop.time())
            try:
                async with asyncio.timeout(left):
                    message = await receive()
            except TimeoutError:
                await refuse(send, 408, "RequestTimeout", (
                    f"the request body did not arrive in time (at most {self.bounds.body_idle:g} s between two "
                    f"parts, {self.bounds.body_time:g} s in all)"))
                return None
            if message["type"] != "http.request":
                return None  # the client left
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > cap:
                await _too_large(send, cap, authenticated)
                return None
            chunks.append(chunk)
            if not message.get("more_body"):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _too_large(send: Send, cap: int, authenticated: bool) -> None:
    more = "" if authenticated else " without a valid token or session"
    await refuse(send, 413, "RequestTooLarge", f"the request body is larger than {cap} bytes{more}")
