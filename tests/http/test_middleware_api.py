"""The HTTP API's enqueues pass through the app's enqueue middleware, as ``App.enqueue`` does."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

import jobloom
from jobloom.core.errors import InvalidOption
from jobloom.engine.middleware import EnqueueCall
from jobloom.http.factory import create_asgi
from tests.http.apps import Echo
from tests.http.conftest import httpx
from tests.http.server import serving


class Stamp:
    """Tags every job with ``api`` and refuses payloads that say ``refuse``."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def enqueue(self, request: EnqueueCall, call_next: Any) -> EnqueueCall:
        self.seen.append(request.binding)
        if request.payload == "refuse":
            raise InvalidOption("payload", request.payload, "anything but 'refuse' (refused by middleware)")
        request.tags = [*request.tags, "api"]
        request.meta = {**request.meta, "via": "middleware"}
        return await call_next(request)  # type: ignore[no-any-return]


@pytest.fixture
def served(store_url: str) -> Iterator[tuple[httpx.Client, jobloom.App, Stamp]]:
    stamp = Stamp()
    app = jobloom.App(store_url, performers=[Echo], middleware=[stamp])
    app.run_sync(app.migrate())
    with serving(create_asgi(app, auth="off")) as url, httpx.Client(base_url=url, timeout=30) as client:
        try:
            yield client, app, stamp
        finally:
            app.close_sync()
    asyncio.set_event_loop(None)


def test_every_http_enqueue_passes_the_middleware(served: tuple[httpx.Client, jobloom.App, Stamp]) -> None:
    client, app, stamp = served
    one = client.post("/v1/jobs", json={"binding": "Echo", "payload": 1})
    assert one.status_code == 201, one.text
    assert one.json()["tags"] == ["api"] and one.json()["meta"] == {"via": "middleware"}
    unique = client.post("/v1/jobs", json={"binding": "Echo", "payload": 2, "unique_key": "u"})
    assert unique.status_code == 201 and unique.json()["tags"] == ["api"], unique.text
    batch = client.post("/v1/jobs/batch", json={"jobs": [{"binding": "Echo", "payload": 3},
                                                         {"binding": "Echo", "payload": 4, "unique_key": "v"}]})
    assert batch.status_code == 201, batch.text
    assert [j["tags"] for j in batch.json()["jobs"]] == [["api"], ["api"]]
    assert stamp.seen == ["Echo"] * 4
    stored = app.run_sync(app.list_jobs())
    assert len(stored) == 4 and all(j.tags == ["api"] and j.meta == {"via": "middleware"} for j in stored)


def test_a_refusal_is_the_callers_error_and_stores_nothing(served: tuple[httpx.Client, jobloom.App, Stamp]) -> None:
    client, app, _ = served
    r = client.post("/v1/jobs", json={"binding": "Echo", "payload": "refuse"})
    assert r.status_code == 422 and "refused by middleware" in r.json()["error"]["message"], r.text
    r = client.post("/v1/jobs/batch", json={"jobs": [{"binding": "Echo", "payload": 1},
                                                     {"binding": "Echo", "payload": "refuse"}]})
    assert r.status_code == 422 and r.json()["error"]["field"] == "jobs[1].payload", r.text
    assert app.run_sync(app.list_jobs()) == []
