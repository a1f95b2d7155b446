"""The REST API over real HTTP on both stores: what each operation does, and its errors."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

import jobloom
from jobloom.http.factory import create_asgi
from tests.http.conftest import Api, httpx
from tests.http.server import serving


def auth(api: Api, scopes: str = "admin") -> dict[str, str]:
    return {"Authorization": f"Bearer {api.token(f'tok-{scopes}', scopes)}"}


def test_enqueue_run_wait_and_attempts(api: Api) -> None:
    h = auth(api)
    r = api.client.post("/v1/jobs", json={"binding": "SendMail", "payload": {"to": "a@example.com"}}, headers=h)
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["state"] == "queued" and job["payload"] == {"to": "a@example.com", "subject": ""}
    r = api.client.get(f"/v1/jobs/{job['id']}/wait", params={"timeout": 0.05}, headers=h)
    assert r.status_code == 408 and r.json()["error"]["type"] == "WaitTimeout"
    assert api.app.run_sync(api.app.drain()) == 1
    r = api.client.get(f"/v1/jobs/{job['id']}/wait", params={"timeout": 5}, headers=h)
    assert r.status_code == 200 and r.json()["state"] == "succeeded"
    assert r.json()["result"] == {"sent": "a@example.com"}
    attempts = api.client.get(f"/v1/jobs/{job['id']}/attempts", headers=h).json()["attempts"]
    assert [a["outcome"] for a in attempts] == ["succeeded"]


def test_options_unique_key_and_errors(api: Api) -> None:
    h = auth(api)
    body: dict[str, Any] = {"binding": "Echo", "payload": [1], "unique_key": "u1", "priority": 5, "delay": 60}
    first = api.client.post("/v1/jobs", json=body, headers=h)
    again = api.client.post("/v1/jobs", json=body, headers=h)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"] and first.json()["state"] == "scheduled"
    assert first.json()["priority"] == 5 and (first.json()["attempt"], first.json()["attempts_spent"]) == (0, 0)
    extra = api.client.post("/v1/jobs", json={"binding": "SendMail", "payload": {"to": "a", "extra": 1}}, headers=h)
    assert "unknown key 'extra'" in extra.json()["error"]["message"], extra.text
    cases = [
        ({"binding": "Nope", "payload": 1}, 422, "UnknownBinding", "binding"),
        ({"binding": "SendMail", "payload": {"x": 1}}, 422, "InvalidPayload", "payload"),
        ({"binding": "SendMail", "payload": {"to": "a@example.com", "extra": 1}}, 422, "InvalidPayload", "payload"),
        ({"binding": "Echo", "payload": 1, "delay": -1}, 422, "InvalidOption", "delay"),
        ({"binding": "Echo", "payload": 1, "max_attempts": 0}, 422, "InvalidOption", "max_attempts"),
        ({"binding": "Echo", "payload": 1, "colour": "red"}, 422, "InvalidRequest", "colour"),
        ({"binding": "Echo", "payload": "x" * 140_000}, 413, "PayloadTooLarge", None),
    ]
    for sent, status, kind, field in cases:
        r = api.client.post("/v1/jobs", json=sent, headers=h)
        assert r.status_code == status, (sent, r.text)
        assert r.json()["error"]["type"] == kind and r.json()["error"].get("field") == field, r.text
    r = api.client.post("/v1/jobs", content=b'{"binding": ', headers={**h, "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "BadRequest"
    r = api.client.get("/v1/jobs/123456789", headers=h)
    assert r.status_code == 404
    assert r.json() == {"error": {"type": "JobNotFound", "message": "no job with id 123456789"}}
    assert api.client.get("/v1/nowhere", headers=h).json()["error"]["type"] == "NotFound"
    assert api.client.delete("/v1/jobs/1", headers=h).status_code == 405


def test_batch_is_all_or_nothing_and_names_the_bad_item(api: Api) -> None:
    h = auth(api)
    good = {"binding": "SendMail", "payload": {"to": "x"}}
    r = api.client.post("/v1/jobs/batch", json={"jobs": [good, good, {"binding": "SendMail", "payload": {}}]},
                        headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "jobs[2].payload", r.text
    r = api.client.post("/v1/jobs/batch", json={"jobs": [good, {"binding": "Nope", "payload": 1}]}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "jobs[1].binding", r.text
    assert api.client.get("/v1/counts", headers=h).json() == {"counts": {}}
    r = api.client.post("/v1/jobs/batch", json={"jobs": [good] * 250}, headers=h)
    assert r.status_code == 201 and len(r.json()["jobs"]) == 250
    assert api.client.get("/v1/counts", headers=h).json() == {"counts": {"SendMail": {"queued": 250}}}


def test_cancel_retry_and_events(api: Api) -> None:
    h = auth(api)
    job = api.client.post("/v1/jobs", json={"binding": "Echo", "payload": 1}, headers=h).json()
    r = api.client.post(f"/v1/jobs/{job['id']}/retry", headers=h)
    assert r.status_code == 409 and r.json()["error"]["type"] == "InvalidTransition"
    assert api.client.post(f"/v1/jobs/{job['id']}/cancel", headers=h).json()["state"] == "cancelled"
    assert api.client.post(f"/v1/jobs/{job['id']}/retry", headers=h).json()["state"] == "queued"
    waiting = api.client.post("/v1/jobs", json={"binding": "Waits", "payload": {}}, headers=h).json()
    api.app.run_sync(api.app.drain(bindings=["Waits"]))  # suspends, waiting for "go"
    r = api.client.post(f"/v1/jobs/{waiting['id']}/events/go", json={"n": 7}, headers=h)
    assert r.status_code == 200 and r.json() == {"woken": True}
    api.app.run_sync(api.app.drain(bindings=["Waits"]))
    assert api.client.get(f"/v1/jobs/{waiting['id']}", headers=h).json()["result"] == {"n": 7}


def test_runs_schedules_limits_stats_and_health(api: Api) -> None:
    h = auth(api)
    r = api.client.post("/v1/runs", json={"flow": "greet", "input": {"hi": 1}, "id": "run-1"}, headers=h)
    assert r.status_code == 201 and r.json()["state"] == "running" and set(r.json()["nodes"]) == {"first", "second"}
    r = api.client.post("/v1/runs", json={"flow": "nope", "input": 1}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "flow"
    listed = api.client.get("/v1/runs", params={"flow": "greet"}, headers=h).json()["runs"]
    assert [x["id"] for x in listed] == ["run-1"]
    assert api.client.post("/v1/runs/run-1/cancel", headers=h).json()["state"] == "cancelled"
    assert api.client.post("/v1/runs/run-1/resume", headers=h).json()["state"] == "running"
    assert api.client.get("/v1/runs/none", headers=h).status_code == 404
    names = [x["name"] for x in api.client.get("/v1/schedules", headers=h).json()["schedules"]]
    assert names == ["hourly"]
    assert api.client.post("/v1/schedules/hourly/pause", headers=h).json()["paused"] is True
    assert api.client.post("/v1/schedules/hourly/resume", headers=h).json()["paused"] is False
    made = api.client.post("/v1/schedules/hourly/trigger", headers=h).json()
    assert made["job"]["binding"] == "Echo" and made["job"]["payload"] == {"tick": True}
    assert api.client.post("/v1/schedules/nope/trigger", headers=h).status_code == 404
    r = api.client.put("/v1/bindings/Echo/limits", json={"concurrency": 2, "rate_limit": "10/s"}, headers=h)
    assert r.json() == {"binding": "Echo", "overrides": {"concurrency": 2, "rate_limit": "10/s"}}
    r = api.client.put("/v1/bindings/Echo/limits", json={"rate_limit": "fast"}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "rate_limit"
    r = api.client.put("/v1/bindings/Echo/limits", json={"key_rate_limit": "3/s burst 2"}, headers=h)
    assert r.json()["overrides"]["key_rate_limit"] == "3/s burst 2"
    echo = next(b for b in api.client.get("/v1/bindings", headers=h).json()["bindings"] if b["binding"] == "Echo")
    assert (echo["limits"]["key_rate_per_second"], echo["limits"]["key_burst"]) == (3.0, 2.0)
    r = api.client.put("/v1/bindings/Echo/limits", json={"key_rate_limit": "fast"}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "key_rate_limit"
    assert api.client.get("/v1/stats", params={"binding": "Echo"}, headers=h).status_code == 200
    assert api.client.get("/v1/health").json()["status"] == "ok"


def test_health_is_503_when_migrations_are_missing(sqlite_url: str) -> None:
    app = jobloom.App(sqlite_url, auto_migrate=False)  # a fresh file: no tables
    try:
        with serving(create_asgi(app)) as url:
            r = httpx.get(f"{url}/v1/health")
            assert r.status_code == 503 and r.json()["migrations"] == "missing", r.text
    finally:
        app.close_sync()


def test_health_is_503_for_a_store_that_0_2_migrated_part_of_the_way(sqlite_url: str) -> None:
    import sqlite3

    from tests.conformance.test_schema import sqlite_file_of_0_2

    path = sqlite_url.removeprefix("sqlite:///")
    sqlite_file_of_0_2(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM jobloom_migrations WHERE version > 21")
    conn.close()
    app = jobloom.App(sqlite_url)  # auto_migrate too cannot take it further
    try:
        with serving(create_asgi(app)) as url:
            r = httpx.get(f"{url}/v1/health")
            assert r.status_code == 503 and r.json()["migrations"] == "missing", r.text
            assert "(the last migration: 0021_worker_claims)" in r.json()["detail"], r.text
            assert path not in r.text
    finally:
        app.close_sync()


def test_bodies_over_the_cap_are_refused(api: Api) -> None:
    h = {**auth(api), "Content-Type": "application/json"}
    big = b'{"binding":"Echo","payload":"' + b"x" * 300_000 + b'"}'
    r = api.client.post("/v1/jobs", content=big, headers=h)
    assert r.status_code == 413 and r.json()["error"]["type"] == "RequestTooLarge"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for i in range(0, len(big), 65536):
            yield big[i:i + 65536]

    r = api.client.post("/v1/jobs", content=chunks(), headers=h)
    assert r.status_code == 413


def test_docs_load_nothing_from_other_hosts(api: Api) -> None:
    for page in ("/v1/docs", "/v1/redoc"):
        html = api.client.get(page).text
        refs = re.findall(r'(?:src|href)="([^"]+)"', html) + re.findall(r"url: '([^']+)'", html)
        assert refs and all(ref.startswith("/v1/") for ref in refs), refs
        for ref in refs:
            assert api.client.get(ref).status_code == 200, ref
    assert "http" not in api.client.get("/v1/docs").text.split("<body>")[0].replace("http-equiv", "")


def test_mounted_in_a_users_fastapi_app(sqlite_url: str) -> None:
    from fastapi import FastAPI

    from tests.http.apps import make_app

    app = make_app(sqlite_url)
    outer = FastAPI()
    with pytest.warns(DeprecationWarning, match=r"use jobloom\.web\.asgi\(app, \.\.\.\)"):
        outer.mount("/jobs", app.asgi(auth="off"))  # the deprecated alias of jobloom.web.asgi(app, auth="off")
    try:
        with serving(outer) as url, httpx.Client(base_url=url) as client:
            r = client.post("/jobs/v1/jobs", json={"binding": "Echo", "payload": {"a": 1}})
            assert r.status_code == 201, r.text
            assert client.get(f"/jobs/v1/jobs/{r.json()['id']}").json()["payload"] == {"a": 1}
            html = client.get("/jobs/v1/docs").text
            assert "/jobs/v1/openapi.json" in html and "/jobs/v1/docs/assets/swagger-ui-bundle.js" in html
            assert client.get("/jobs/v1/docs/assets/swagger-ui-bundle.js").status_code == 200
    finally:
        app.close_sync()


def test_runs_are_listed_page_by_page(api: Api) -> None:
    h = auth(api)
    for i in range(5):
        r = api.client.post("/v1/runs", json={"flow": "greet", "input": i, "id": f"p{i}"}, headers=h)
        assert r.status_code == 201
    seen: list[str] = []
    cursor = None
    for _ in range(4):  # 5 runs in pages of 2
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        body = api.client.get("/v1/runs", params=params, headers=h).json()
        seen += [r["id"] for r in body["runs"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == [f"p{i}" for i in range(5)] and len(seen) == 5


def test_the_fast_lane_and_the_routes_answer_alike(api: Api) -> None:
    """``application/json`` bodies take the fast lane; other spellings of JSON go through FastAPI."""
    h = auth(api)
    body = b'{"binding": "SendMail", "payload": {"to": "x"}, "priority": 3}'
    answers = []
    for content_type in ("application/json", "application/json;charset=UTF-8"):
        r = api.client.post("/v1/jobs", content=body, headers={**h, "Content-Type": content_type})
        assert r.status_code == 201, r.text
        answers.append({k: v for k, v in r.json().items() if k not in ("id", "run_at", "created_at")})
        bad = api.client.post("/v1/jobs", content=b'{"binding": "SendMail", "payload": {}}',
                              headers={**h, "Content-Type": content_type})
        answers.append((bad.status_code, bad.json()))
        many = api.client.post("/v1/jobs/batch", content=b'{"jobs": [' + body + b"]}",
                               headers={**h, "Content-Type": content_type})
        answers.append((many.status_code, len(many.json()["jobs"])))
    assert answers[:3] == answers[3:]


@pytest.fixture
def store_url(pooled_store_url: str) -> str:
    """The API runs through PgBouncer (transaction pooling) too."""
    return pooled_store_url


def test_debounced_enqueues_collapse_and_bad_timing_options_name_the_field(api: Api) -> None:
    h = auth(api)
    body: dict[str, Any] = {"binding": "Echo", "payload": [1], "debounce": 60, "debounce_key": "user:42"}
    first = api.client.post("/v1/jobs", json=body, headers=h)
    again = api.client.post("/v1/jobs", json=body | {"payload": [2]}, headers=h)
    assert (first.status_code, again.status_code) == (201, 200), again.text
    assert first.json()["id"] == again.json()["id"] and again.json()["payload"] == [2]
    assert again.json()["state"] == "scheduled"
    for bad, field in (({"debounce": 5}, "debounce_key"), ({"debounce_key": "k"}, "debounce"),
                       ({"debounce": -1, "debounce_key": "k"}, "debounce")):
        answer = api.client.post("/v1/jobs", json={"binding": "Echo", "payload": 1, **bad}, headers=h)
        assert answer.status_code == 422 and answer.json()["error"]["field"] == field, answer.text
        assert "Echo" in answer.json()["error"]["message"]


def test_why_names_the_debounce_window_and_the_expiry(api: Api) -> None:
    h = auth(api)
    body: dict[str, Any] = {"binding": "Echo", "payload": [1], "debounce": 60, "debounce_key": "user:42",
                            "expires_in": 3600}
    job = api.client.post("/v1/jobs", json=body, headers=h).json()
    why = api.client.get(f"/v1/jobs/{job['id']}/why", headers=h)
    assert why.status_code == 200, why.text
    got = why.json()
    assert (got["job_id"], got["state"], got["ready"]) == (job["id"], "scheduled", False)
    codes = [r["code"] for r in got["reasons"]]
    assert codes[0] == "debounce_window" and codes[-1] == "expires", codes
    assert "'user:42'" in got["reasons"][0]["text"] and got["reasons"][0]["until"] is not None
    assert api.client.get("/v1/jobs/123456789/why", headers=h).status_code == 404
