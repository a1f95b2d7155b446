"""Authorization over real HTTP: every operation of the served OpenAPI x {no token, a wrong token, a
revoked token, a token without the scope, a token with only that scope}, on both stores; and the
``auto`` and ``off`` modes."""

from __future__ import annotations

from typing import Any

import pytest

from jobloom.http.factory import create_asgi
from tests.http.apps import make_app
from tests.http.conftest import Api, httpx
from tests.http.server import serving

SCOPES = ("read", "enqueue", "operate", "worker", "admin")
ENQUEUE = {("POST", "/v1/jobs"), ("POST", "/v1/jobs/batch"), ("POST", "/v1/runs"), ("POST", "/v1/batches"),
           ("POST", "/v1/jobs/{job_id}/events/{name}"), ("POST", "/v1/topics/{topic}")}
OPEN = {("GET", "/v1/health")}


def scope_of(method: str, path: str) -> str | None:
    """The scope each operation needs, as the documentation states it."""
    if (method, path) in OPEN:
        return None
    if method == "GET":
        return "read"
    if (method, path) in ENQUEUE:
        return "enqueue"
    if path.startswith("/v1/worker/"):
        return "worker"
    return "operate"


BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/v1/jobs"): {"binding": "Echo", "payload": {"x": 1}},
    ("POST", "/v1/jobs/batch"): {"jobs": [{"binding": "Echo", "payload": 1}]},
    ("POST", "/v1/batches"): {"jobs": [{"binding": "Echo", "payload": 1}]},
    ("POST", "/v1/runs"): {"flow": "greet", "input": {}},
    ("POST", "/v1/jobs/{job_id}/events/{name}"): {"data": 1},
    ("POST", "/v1/topics/{topic}"): {"data": {"x": 1}},
    ("PUT", "/v1/bindings/{name}/limits"): {"concurrency": 5},
    ("POST", "/v1/jobs/retry"): {"state": "failed"},
    ("POST", "/v1/jobs/cancel"): {"binding": "SendMail"},
    ("POST", "/v1/jobs/delete"): {"state": "succeeded", "binding": "SendMail"},
    ("POST", "/v1/worker/claim"): {"worker": "w", "bindings": ["Render"], "max": 1},
    ("POST", "/v1/worker/heartbeat"): {"worker": "w", "jobs": [{"id": 1, "attempt": 1, "claim": "c"}]},
    ("POST", "/v1/worker/complete"): {"worker": "w", "id": 1, "attempt": 1, "claim": "c",
                                         "outcome": "failed"},
}


def operations(api: Api) -> list[tuple[str, str]]:
    spec = api.client.get("/v1/openapi.json").json()
    found = [(m.upper(), p) for p, item in spec["paths"].items() for m in item]
    for method, path in found:  # the document says which operations need a token
        op = spec["paths"][path][method.lower()]
        assert bool(op.get("security")) == (scope_of(method, path) is not None), (method, path)
    return found


def request(api: Api, method: str, path: str, job_id: int, token: str | None) -> httpx.Response:
    name = "go" if path.endswith("{name}") and "/events/" in path else (
        "Echo" if "/bindings/" in path else "hourly")
    url = path.replace("{job_id}", str(job_id)).replace("{run_id}", "r1").replace("{name}", name)
    url = url.replace("{topic}", "order.created")
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    params = {"timeout": "0"} if url.endswith("/wait") else None
    return api.client.request(method, url, json=BODIES.get((method, path)), headers=headers, params=params)


def test_every_operation_against_every_kind_of_token(api: Api) -> None:
    admin = api.token("admin", "admin")
    job_id = api.client.post("/v1/jobs", json={"binding": "Echo", "payload": 1},
                             headers={"Authorization": f"Bearer {admin}"}).json()["id"]
    api.client.post("/v1/runs", json={"flow": "greet", "input": {}, "id": "r1"},
                    headers={"Authorization": f"Bearer {admin}"})
    only = {s: api.token(f"only-{s}", s) for s in SCOPES}
    lacking = {s: api.token(f"all-but-{s}", ",".join(x for x in SCOPES if x not in (s, "admin")))
               for s in SCOPES if s != "admin"}
    revoked = api.token("revoked", "admin")
    api.revoke("revoked")
    wrong = [None, "jlt_000000000000_nope", revoked[:-4] + "AAAA", "not-a-token", admin.replace("jlt_", "jlx_")]
    ops = operations(api)
    assert len(ops) >= 29
    for method, path in ops:
        scope = scope_of(method, path)
        what = f"{method} {path}"
        if scope is None:
            assert request(api, method, path, job_id, None).status_code == 200, what
            continue
        for token in [*wrong, revoked]:
            r = request(api, method, path, job_id, token)
            assert r.status_code == 401, (what, token, r.text)
            assert r.json()["error"]["type"] == "Unauthorized"
        r = request(api, method, path, job_id, lacking[scope])
        assert r.status_code == 403, (what, r.text)
        assert r.json()["error"]["type"] == "Forbidden" and scope in r.json()["error"]["message"]
        for token in (only[scope], admin):
            r = request(api, method, path, job_id, token)
            assert r.status_code not in (401, 403) and r.status_code < 500, (what, r.status_code, r.text)


def test_a_new_token_works_at_once_and_a_revoked_one_stops(api: Api) -> None:
    token = api.token("t", "read")
    assert api.client.get("/v1/counts", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    api.revoke("t")
    assert api.client.get("/v1/counts", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    again = api.token("t", "read")  # a revoked name can be used again; the old token stays refused
    assert api.client.get("/v1/counts", headers={"Authorization": f"Bearer {again}"}).status_code == 200
    assert api.client.get("/v1/counts", headers={"Authorization": f"Bearer {token}"}).status_code == 401


def test_off_is_always_open_and_auto_is_gone(sqlite_url: str) -> None:
    app = make_app(sqlite_url)
    app.run_sync(app.migrate())
    try:
        with pytest.raises(ValueError, match="'auto'.*was removed"):
            create_asgi(app, auth="auto")  # type: ignore[arg-type]
        with serving(create_asgi(app, auth="off", token_ttl=0.0)) as url, httpx.Client(base_url=url) as client:
            assert client.get("/v1/counts").status_code == 200
            Api(url, app, client).token("first", "read")
            assert client.get("/v1/counts").status_code == 200
    finally:
        app.close_sync()
