"""What every router of the API shares: the app, the auth guard, and (for a bare store) named bindings."""

from __future__ import annotations

import time
from typing import Any

from fastapi import Depends
from fastapi.responses import Response

from jobloom.app.facade import App
from jobloom.core.errors import UnknownBinding
from jobloom.core.queries import Q
from jobloom.core.rows import BindingRow
from jobloom.core.text import MAX_NAME_BYTES, check_name
from jobloom.engine.performer import Performer, PerformerSpec, inspect_performer
from jobloom.http.auth import SCHEME, Guard
from jobloom.store import Tx

JSON = "application/json"


def json_response(body: bytes, status: int = 200) -> Response:
    """A response of already encoded JSON."""
    return Response(body, status_code=status, media_type=JSON)


def named_performer(binding: str) -> type[Performer[Any, Any]]:
    """A stand-in performer for a binding known only by name: any JSON payload, default job options.

    Used by an API serving a bare store (``jobloom serve --url``), which enqueues by name; the jobs run
    on the workers of the app that performs the binding."""

    async def perform(self: Any, payload: Any) -> Any:
        raise RuntimeError(f"{binding} is performed by its own app's workers, not here")

    attrs = {"binding": binding, "perform": perform, "__module__": __name__, "__doc__": f"{binding} (by name)"}
    return type(f"Named_{abs(hash(binding))}", (Performer,), attrs)


class Context:
    """The app behind the API, its guard, and whether it is a bare store (``named``)."""

    def __init__(self, app: App, guard: Guard, *, named: bool, known_ttl: float = 5.0) -> None:
        self.app = app
        self.guard = guard
        self.named = named
        self.known_ttl = known_ttl
        self._known: set[str] = set()
        self._known_at = float("-inf")

    def guarded(self, scope: str) -> dict[str, Any]:
        """Route options that require ``scope``: the guard as a dependency, the security scheme in OpenAPI."""
        return {"dependencies": [Depends(self.guard.scope(scope))],
                "openapi_extra": {"security": [{SCHEME: []}], "x-jobloom-scope": scope}}

    async def spec(self, binding: str) -> PerformerSpec:
        """The spec of ``binding``; with ``named``, one the store knows (a worker registered it) is made up."""
        spec = self.app.specs.get(binding)
        if spec is not None or not self.named:
            return spec if spec is not None else self.app.spec(binding)
        check_name("binding", binding, MAX_NAME_BYTES)
        if binding not in self._known or time.monotonic() - self._known_at > self.known_ttl:
            await self._read_known()
        if binding not in self._known:
            raise UnknownBinding(binding, sorted(self._known))
        spec = inspect_performer(named_performer(binding))
        self.app.specs[binding] = spec
        return spec

    async def _read_known(self) -> None:
        store = await self.app.store()

        async def work(tx: Tx) -> list[BindingRow]:
            return await tx.fetch(Q.list_bindings)

        self._known = {r.binding for r in await store.transact(work, exclusive=False)}
        self._known_at = time.monotonic()
