"""What every router of the API shares: the app, the auth guard, and (for a bare store) the bindings' stored rules."""

from __future__ import annotations

import time
from typing import Any

from fastapi import Depends
from fastapi.responses import Response

from jobloom.app.facade import App
from jobloom.core.queries import Q
from jobloom.core.rows import RulesRow
from jobloom.core.text import MAX_NAME_BYTES, check_name
from jobloom.engine.performer import PerformerSpec
from jobloom.engine.rules import stored_spec
from jobloom.http.auth import SCHEME, Guard
from jobloom.http.longpoll import JobWaits, LongPolls
from jobloom.store import Tx

JSON = "application/json"


def json_response(body: bytes, status: int = 200) -> Response:
    """A response of already encoded JSON."""
    return Response(body, status_code=status, media_type=JSON)


class Context:
    """The app behind the API, its guard, whether it is a bare store (``named``), and its long polls."""

    def __init__(self, app: App, guard: Guard, *, named: bool, known_ttl: float = 5.0,
                 polls: LongPolls | None = None) -> None:
        self.app = app
        self.guard = guard
        self.named = named
        self.polls = polls or LongPolls()
        self.waits = JobWaits(app)
        self.known_ttl = known_ttl
        self._rules: dict[str, tuple[bool, str | None]] = {}  # binding: (registered, its stored rules)
        self._built: dict[str, str | None] = {}  # the rules each binding's spec in app.specs was built from
        self._known_at = float("-inf")

    def guarded(self, scope: str) -> dict[str, Any]:
        """Route options that require ``scope``: the guard as a dependency, the security scheme in OpenAPI."""
        return {"dependencies": [Depends(self.guard.scope(scope))],
                "openapi_extra": {"security": [{SCHEME: []}], "x-jobloom-scope": scope}}

    async def spec(self, binding: str) -> PerformerSpec:
        """The spec of ``binding``; with ``named``, built from the enqueue rules that the app performing it
        stored (read again after ``known_ttl`` seconds); a binding without rules raises ``UnknownBinding``."""
        spec = self.app.specs.get(binding)
        if not self.named:
            return spec if spec is not None else self.app.spec(binding)
        check_name("binding", binding, MAX_NAME_BYTES)
        if binding not in self._rules or time.monotonic() - self._known_at > self.known_ttl:
            await self._read_rules()
        registered, rules = self._rules.get(binding, (False, None))
        if spec is None or self._built.get(binding) != rules or rules is None:
            known = sorted(b for b, (_, r) in self._rules.items() if r is not None)
            spec = stored_spec(binding, registered, rules, known)
            self.app.specs[binding] = spec  # app.enqueue finds it by name
            self._built[binding] = rules
        return spec

    async def stored_bindings(self) -> list[str]:
        """The bindings whose performing apps stored enqueue rules (read again after ``known_ttl`` seconds)."""
        if time.monotonic() - self._known_at > self.known_ttl:
            await self._read_rules()
        return sorted(b for b, (_, rules) in self._rules.items() if rules is not None)

    async def _read_rules(self) -> None:
        store = await self.app.store()

        async def work(tx: Tx) -> list[RulesRow]:
            return await tx.fetch(Q.binding_rules)

        rows = await store.transact(work, exclusive=False)
        self._rules = {r.binding: (bool(r.registered), r.rules) for r in rows}
        self._known_at = time.monotonic()
