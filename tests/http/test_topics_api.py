"""Publishing to topics over the REST API, on both stores: ``POST /v1/topics/{topic}`` (scope ``enqueue``)
makes one job per subscribed binding atomically, ``GET /v1/topics`` lists them, and a server on a bare
store knows the subscribers from the rules the performing app stored."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest

import jobloom
from jobloom.http.factory import create_asgi
from tests.http.apps import make_app
from tests.http.conftest import Api, httpx
from tests.http.server import serving
from tests.http.test_api import auth


class Signup(pydantic.BaseModel):
    user: int


class Welcome(jobloom.Performer[Signup, None]):
    triggers = ["user.signed_up"]

    async def perform(self, payload: Signup) -> None:
        return None


class Audit(jobloom.Performer[dict[str, Any], None]):
    triggers = ["user.signed_up", "user.left"]

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture
def topics_api(store_url: str) -> Iterator[Api]:
    app = make_app(store_url, extra=(Welcome, Audit))
    app.run_sync(app.migrate())
    with serving(create_asgi(app, auth="required", token_ttl=0.0)) as url, \
            httpx.Client(base_url=url, timeout=30) as client:
        try:
            yield Api(url, app, client)
        finally:
            app.close_sync()
    asyncio.set_event_loop(None)


def test_publish_makes_a_job_per_subscriber(topics_api: Api) -> None:
    api, h = topics_api, auth(topics_api, "enqueue")
    r = api.client.post("/v1/topics/user.signed_up", json={"data": {"user": 7}}, headers=h)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["topic"] == "user.signed_up"
    assert sorted((j["binding"], j["payload"]) for j in body["jobs"]) == [("Audit", {"user": 7}),
                                                                          ("Welcome", {"user": 7})]
    jobs = api.app.run_sync(api.app.list_jobs())
    assert sorted(j.id for j in jobs) == sorted(j["id"] for j in body["jobs"])
    r = api.client.post("/v1/topics/user.left", json={"data": {"user": 7}}, headers=h)
    assert r.status_code == 201 and [j["binding"] for j in r.json()["jobs"]] == ["Audit"], r.text


def test_a_topic_nobody_subscribes_to_is_accepted_with_no_jobs(topics_api: Api) -> None:
    r = topics_api.client.post("/v1/topics/nobody.listens", json={"data": 1}, headers=auth(topics_api, "enqueue"))
    assert r.status_code == 200 and r.json() == {"jobs": [], "topic": "nobody.listens"}, r.text
    assert topics_api.app.run_sync(topics_api.app.list_jobs()) == []


def test_bad_topics_and_data_are_refused_and_nothing_is_enqueued(topics_api: Api) -> None:
    api, h = topics_api, auth(topics_api, "enqueue")
    for topic in ("-starts-with-dash", "has space", "x" * 129, "ü"):
        r = api.client.post(f"/v1/topics/{topic}", json={"data": {}}, headers=h)
        assert r.status_code == 422, (topic, r.text)
    r = api.client.post("/v1/topics/has space", json={"data": {}}, headers=h)
    assert r.json()["error"]["field"] == "topic", r.text
    r = api.client.post("/v1/topics/user.signed_up", json={"data": {"user": "not a number"}}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["type"] == "InvalidPayload", r.text
    assert "Welcome" in r.json()["error"]["message"]
    r = api.client.post("/v1/topics/user.signed_up", json={"data": {"user": 1}, "delay": 5}, headers=h)
    assert r.status_code == 422, r.text  # an unknown field of the body
    assert api.app.run_sync(api.app.list_jobs()) == []  # Audit took each payload, yet nothing was enqueued


def test_scopes_guard_publish_and_the_list(topics_api: Api) -> None:
    api = topics_api
    body = {"data": {"user": 1}}
    read, enqueue = auth(api, "read"), auth(api, "enqueue")
    assert api.client.post("/v1/topics/user.left", json=body).status_code == 401
    assert api.client.post("/v1/topics/user.left", json=body, headers=read).status_code == 403
    assert api.client.post("/v1/topics/user.left", json=body, headers=auth(api, "operate")).status_code == 403
    assert api.client.get("/v1/topics", headers=enqueue).status_code == 403
    r = api.client.get("/v1/topics", headers=read)
    assert r.status_code == 200 and r.json() == {"topics": {"user.left": ["Audit"],
                                                            "user.signed_up": ["Audit", "Welcome"]}}, r.text


def test_a_server_on_a_bare_store_publishes_to_the_stored_subscribers(store_url: str) -> None:
    performing = make_app(store_url, extra=(Welcome, Audit))
    performing.run_sync(performing.migrate())
    performing.run_sync(performing.register_bindings())  # what its workers do when they start
    bare = jobloom.App(store_url)
    with serving(create_asgi(bare, auth="required", named=True, token_ttl=0.0)) as url, \
            httpx.Client(base_url=url, timeout=30) as client:
        try:
            api = Api(url, bare, client)
            h = auth(api, "enqueue")
            r = client.post("/v1/topics/user.signed_up", json={"data": {"user": 3}}, headers=h)
            assert r.status_code == 201 and sorted(j["binding"] for j in r.json()["jobs"]) == ["Audit", "Welcome"]
            r = client.post("/v1/topics/user.signed_up", json={"data": {"user": "x"}}, headers=h)
            assert r.status_code == 422 and "Welcome" in r.json()["error"]["message"], r.text  # the stored schema
            r = client.get("/v1/topics", headers=auth(api, "read"))
            assert r.json()["topics"]["user.signed_up"] == ["Audit", "Welcome"], r.text
        finally:
            bare.close_sync()
    assert performing.run_sync(performing.drain()) == 2
    performing.close_sync()
    asyncio.set_event_loop(None)
