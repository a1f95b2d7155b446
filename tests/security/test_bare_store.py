"""Issue 28, item 9: ``jobloom serve --url`` (no app) applies each binding's own rules, as the app that
performs it stored them when its workers started, and never invents a binding.

A real ``jobloom serve --url`` on each store; the performing app (in this process) registers its bindings
and runs the jobs with ``drain``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, Field

import jobloom
from tests.conftest import STORES
from tests.helpers import eventually_sync
from tests.security.conftest import SCOPED, Served, httpx, serve, store_for


class Charge(BaseModel):
    account: str
    cents: int = Field(ge=1)


class ChargeCard(jobloom.Performer[Charge, None]):
    """At most once: a failure is never tried again."""

    delivery = "at_most_once"
    max_attempts = 5
    priority = 3
    timeout = 30.0

    async def perform(self, payload: Charge) -> None:
        raise RuntimeError("card declined")


class Flaky(jobloom.Performer[dict[str, Any], None]):
    """Two attempts, no wait between them."""

    max_attempts = 2
    backoff = jobloom.Backoff(kind="fixed", base=0.0, jitter="none")

    async def perform(self, payload: dict[str, Any]) -> None:
        raise RuntimeError("flaky")


def tenant(payload: dict[str, Any]) -> str:
    return str(payload["tenant"])


class PerTenant(jobloom.Performer[dict[str, Any], None]):
    """Its concurrency key is computed from the payload, by code only its app has."""

    concurrency_key = staticmethod(tenant)

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


Bare = tuple[Served, jobloom.App]
"""A bare server, and the app that performs its bindings."""


@pytest.fixture(scope="module", params=STORES)
def bare(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bare]:
    """``jobloom serve --url`` on a store where the app performing ChargeCard, Flaky and PerTenant registered them."""
    folder = tmp_path_factory.mktemp(f"bare-{request.param}")
    with store_for(request.param, folder) as url, serve(url, folder, tokens=SCOPED, bare=True) as served:
        performing = jobloom.App(url, performers=[ChargeCard, Flaky, PerTenant])
        try:
            performing.run_sync(performing.register_bindings())  # what its workers do when they start
            yield served, performing
        finally:
            performing.close_sync()


def post(served: Served, body: dict[str, Any], token: str = "pusher") -> httpx.Response:
    return httpx.post(f"{served.url}/v1/jobs", json=body, headers=served.auth(token))


def test_an_at_most_once_binding_stays_at_most_once_through_a_bare_server(bare: Bare) -> None:
    served, performing = bare
    r = post(served, {"binding": "ChargeCard", "payload": {"account": "a-1", "cents": 500}})
    assert r.status_code == 201, r.text
    made = r.json()
    assert (made["delivery"], made["max_attempts"], made["priority"]) == ("at_most_once", 5, 3)
    performing.run_sync(performing.drain(bindings=["ChargeCard"]))
    job = performing.run_sync(performing.get_job(made["id"]))
    assert (job.state, job.attempt) == ("failed", 1)  # at least once would have tried it again (5 attempts)


def test_a_bindings_max_attempts_applies_through_a_bare_server(bare: Bare) -> None:
    served, performing = bare
    r = post(served, {"binding": "Flaky", "payload": {"n": 1}})
    assert r.status_code == 201 and r.json()["max_attempts"] == 2, r.text

    def finished() -> jobloom.Job | None:  # each drain runs the attempts due (the retry is due at once)
        performing.run_sync(performing.drain(bindings=["Flaky"]))
        job = performing.run_sync(performing.get_job(r.json()["id"]))
        return job if job.state in ("failed", "succeeded") else None

    job = eventually_sync(finished, what="the job to finish")
    assert (job.state, job.attempt) == ("failed", 2)  # the default would have been 3 attempts
    asked = post(served, {"binding": "Flaky", "payload": {}, "max_attempts": 4})  # the request's own, as in the app
    assert asked.status_code == 201 and asked.json()["max_attempts"] == 4


def test_an_invalid_payload_is_refused_naming_the_field(bare: Bare) -> None:
    served, _ = bare
    for payload, field in (({"account": "a", "cents": 0}, "cents"), ({"cents": 5}, "account"),
                           ({"account": "a", "cents": "five"}, "cents"),
                           ({"account": "a", "cents": 5, "cvv": "123"}, "cvv")):  # unknown keys refused, as in the app
        r = post(served, {"binding": "ChargeCard", "payload": payload})
        assert r.status_code == 422, (payload, r.text)
        error = r.json()["error"]
        assert error["type"] == "InvalidPayload" and error["field"] == "payload", error
        assert f"field {field!r}" in error["message"] and "ChargeCard" in error["message"], error
    batch = {"jobs": [{"binding": "Flaky", "payload": {}},
                      {"binding": "ChargeCard", "payload": {"account": "a", "cents": -1}}]}
    r = httpx.post(f"{served.url}/v1/jobs/batch", json=batch, headers=served.auth("pusher"))
    assert r.status_code == 422 and r.json()["error"]["field"] == "jobs[1].payload", r.text
    assert "field 'cents'" in r.json()["error"]["message"]


def test_a_key_computed_by_code_must_be_given(bare: Bare) -> None:
    served, _ = bare
    r = post(served, {"binding": "PerTenant", "payload": {"tenant": "t1"}})
    assert r.status_code == 422 and r.json()["error"]["field"] == "concurrency_key", r.text
    assert "PerTenant" in r.json()["error"]["message"]
    given = post(served, {"binding": "PerTenant", "payload": {"tenant": "t1"}, "concurrency_key": "t1"})
    assert given.status_code == 201 and given.json()["concurrency_key"] == "t1", given.text


def test_an_enqueue_for_a_binding_nothing_registered_is_refused(bare: Bare) -> None:
    served, performing = bare
    bare_app = jobloom.App(served.store_url)
    try:  # limits stored by hand (`jobloom limits set --force`) do not make a binding that can be enqueued
        bare_app.run_sync(bare_app.set_limits("Later", concurrency=1))
    finally:
        bare_app.close_sync()
    for name in ("Nobody", "Later"):
        r = post(served, {"binding": name, "payload": {}})
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert (error["type"], error["field"]) == ("UnknownBinding", "binding"), error
        assert f"unknown binding {name!r}" in error["message"] and "registered" in error["message"], error
    counts = performing.run_sync(performing.counts())
    assert "Nobody" not in counts and "Later" not in counts


def test_limits_and_pause_of_an_unknown_name_are_404_and_store_nothing(bare: Bare) -> None:
    served, performing = bare
    auth = served.auth("ops")
    r = httpx.put(f"{served.url}/v1/bindings/Ghost/limits", json={"concurrency": 2}, headers=auth)
    assert r.status_code == 404 and "Ghost" in r.json()["error"]["message"], r.text
    assert httpx.put(f"{served.url}/v1/bindings/Ghost/limits", json={}, headers=auth).status_code == 404
    for action in ("pause", "resume"):
        r = httpx.post(f"{served.url}/v1/bindings/Ghost/{action}", headers=auth)
        assert r.status_code == 404 and "Ghost" in r.json()["error"]["message"], r.text
    listed = httpx.get(f"{served.url}/v1/bindings", headers=auth).json()["bindings"]
    assert "Ghost" not in [b["binding"] for b in listed]
    assert "Ghost" not in [b.binding for b in performing.run_sync(performing.list_bindings())]
    known = httpx.put(f"{served.url}/v1/bindings/Flaky/limits", json={"concurrency": 2}, headers=auth)
    assert known.status_code == 200 and known.json()["overrides"] == {"concurrency": 2}, known.text


def test_the_bindings_list_shows_the_rules_a_bare_server_applies(bare: Bare) -> None:
    served, _ = bare
    listed = httpx.get(f"{served.url}/v1/bindings", headers=served.auth("reader")).json()["bindings"]
    shown = {b["binding"]: b for b in listed}
    charge = shown["ChargeCard"]
    assert (charge["options"]["delivery"], charge["options"]["max_attempts"]) == ("at_most_once", 5)
    assert charge["payload_schema"]["required"] == ["account", "cents"]
    assert charge["payload_schema"]["additionalProperties"] is False
