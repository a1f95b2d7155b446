"""Bearer authentication and scopes for the API's operations.

``auth`` modes: ``"required"`` (every operation but health and the docs needs a token, whether or not
any token exists: revoking the last one never opens the API) and ``"off"`` (no checks: for an API
mounted behind the user's own authentication, or ``jobloom serve --insecure-no-auth`` on a loopback
address, where :mod:`jobloom.http.shield` guards it against other sites).

The active tokens are read from the store and kept for ``ttl`` seconds; a token the cache does not
know makes it read again at once (at most every ``miss_interval`` seconds), so a new token works
at once and a revoked one stops working within ``ttl``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from fastapi import Request

from jobloom.app.facade import App
from jobloom.http.errors import Forbidden, Unauthorized
from jobloom.http.tokens import StoredToken, active_tokens, parse_token

AuthMode = Literal["required", "off"]
AUTH_MODES = ("required", "off")
SCHEME = "bearer"
SECURITY_SCHEMES: dict[str, Any] = {SCHEME: {
    "type": "http", "scheme": "bearer",
    "description": "A token made with `jobloom tokens create NAME --scopes ...`.",
}}
"""The OpenAPI security scheme of the API (added to the document's components by the factory)."""


class TokenCache:
    """The store's active tokens, read again every ``ttl`` seconds or when an unknown one arrives."""

    def __init__(self, app: App, ttl: float = 1.0, miss_interval: float = 0.2) -> None:
        self.app = app
        self.ttl = ttl
        self.miss_interval = miss_interval
        self._tokens: dict[str, StoredToken] = {}
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()

    async def tokens(self, *, missing: bool = False) -> dict[str, StoredToken]:
        """The active tokens; read again if stale, or (``missing``) if not read very recently."""
        age = time.monotonic() - self._read_at
        if age > self.ttl or (missing and age > self.miss_interval):
            async with self._lock:
                age = time.monotonic() - self._read_at
                if age > self.ttl or (missing and age > self.miss_interval):
                    self._tokens = await active_tokens(await self.app.store())
                    self._read_at = time.monotonic()
        return self._tokens

    async def find(self, prefix: str) -> StoredToken | None:
        """The active token of that prefix."""
        found = (await self.tokens()).get(prefix)
        if found is None:
            found = (await self.tokens(missing=True)).get(prefix)
        return found


class Guard:
    """Checks a request's token against the scope its operation needs."""

    def __init__(self, app: App, mode: AuthMode, ttl: float = 1.0) -> None:
        if mode not in AUTH_MODES:
            removed = " ('auto', open until a token exists, was removed: revoking the last token opened the API)"
            raise ValueError(f"auth must be one of {', '.join(AUTH_MODES)}; got {mode!r}"
                             + (removed if str(mode) == "auto" else ""))
        self.mode = mode
        self.cache = TokenCache(app, ttl)

    async def check(self, authorization: str | None, scope: str) -> StoredToken | None:
        """Raise ``Unauthorized`` or ``Forbidden`` unless the request (its ``Authorization`` header) may use
        ``scope``; return the request's token (None when ``auth="off"``)."""
        if self.mode == "off":
            return None
        token = await self.authenticate(authorization)
        if not token.allows(scope):
            raise Forbidden(f"token {token.name!r} lacks the {scope!r} scope this operation needs")
        return token

    async def authenticate(self, authorization: str | None) -> StoredToken:
        """The active token an ``Authorization`` header carries; ``Unauthorized`` if none or not valid."""
        kind, _, credentials = (authorization or "").partition(" ")
        if kind.lower() != "bearer" or not credentials.strip():
            raise Unauthorized("this operation needs a token: Authorization: Bearer <token>")
        parsed = parse_token(credentials.strip())
        token = None if parsed is None else await self.cache.find(parsed[0])
        if parsed is None or token is None or not token.matches(parsed[1]):
            raise Unauthorized("the token is not valid (wrong or revoked)")
        return token

    def scope(self, scope: str) -> Callable[..., Awaitable[None]]:
        """A FastAPI dependency that requires ``scope`` (the OpenAPI document gets the security scheme from
        :data:`SECURITY`, which every guarded route declares)."""

        async def dependency(request: Request) -> None:
            request.state.token = await self.check(request.headers.get("authorization"), scope)

        dependency.__name__ = f"require_{scope}"
        return dependency
