"""Fixtures of the HTTP tests: the test app's API served on a loopback port, and tokens."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.conftest import require_module

httpx = require_module("httpx", 'pip install -e ".[dev]" to run the HTTP API tests')

import jobloom  # noqa: E402
from jobloom.http.factory import create_asgi  # noqa: E402
from jobloom.http.tokens import create_token, revoke_token  # noqa: E402
from tests.http.apps import make_app  # noqa: E402
from tests.http.server import serving  # noqa: E402


@dataclass
class Api:
    """A served API: its base URL, the app behind it, and an HTTP client."""

    url: str
    app: jobloom.App
    client: httpx.Client

    def token(self, name: str, scopes: str) -> str:
        """A new token with those scopes."""
        return self.app.run_sync(_create(self.app, name, scopes))

    def revoke(self, name: str) -> None:
        """Revoke a token."""
        self.app.run_sync(_revoke(self.app, name))


async def _create(app: jobloom.App, name: str, scopes: str) -> str:
    token, _ = await create_token(await app.store(), name, scopes)
    return token


async def _revoke(app: jobloom.App, name: str) -> None:
    await revoke_token(await app.store(), name)


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    """The test app's API (auth required, tokens read again at every request) on both stores."""
    app = make_app(store_url)
    app.run_sync(app.migrate())
    asgi = create_asgi(app, auth="required", token_ttl=0.0)
    with serving(asgi) as url, httpx.Client(base_url=url, timeout=30) as client:
        try:
            yield Api(url, app, client)
        finally:
            app.close_sync()
    asyncio.set_event_loop(None)
