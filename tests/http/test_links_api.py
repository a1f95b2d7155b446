"""Dependencies (and batches) over the REST API, on both stores: enqueue with ``depends_on``, read a
job's dependencies and dependants, and the scopes that guard them."""

from __future__ import annotations

from tests.http.conftest import Api
from tests.http.test_api import auth


def test_enqueue_with_dependencies_and_read_them(api: Api) -> None:
    h = auth(api, "enqueue,read")
    first = api.client.post("/v1/jobs", json={"binding": "Echo", "payload": 1}, headers=h).json()
    r = api.client.post("/v1/jobs", json={"binding": "Echo", "payload": 2, "depends_on": [first["id"]],
                                          "on_dependency_failure": "run"}, headers=h)
    assert r.status_code == 201 and r.json()["state"] == "waiting", r.text
    second = r.json()
    links = api.client.get(f"/v1/jobs/{second['id']}/dependencies", headers=h)
    assert links.status_code == 200 and links.json() == {"dependencies": [first["id"]], "dependants": []}
    links = api.client.get(f"/v1/jobs/{first['id']}/dependencies", headers=h).json()
    assert links == {"dependencies": [], "dependants": [second["id"]]}
    assert api.app.run_sync(api.app.drain()) == 2
    assert api.client.get(f"/v1/jobs/{second['id']}", headers=h).json()["state"] == "succeeded"


def test_bad_dependencies_are_refused_and_reads_need_the_scope(api: Api) -> None:
    h = auth(api, "enqueue")
    r = api.client.post("/v1/jobs", json={"binding": "Echo", "payload": 1, "depends_on": [987654]}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "depends_on", r.text
    r = api.client.post("/v1/jobs", json={"binding": "Echo", "payload": 1, "depends_on": [1],
                                          "on_dependency_failure": "never"}, headers=h)
    assert r.status_code == 422, r.text
    made = api.client.post("/v1/jobs", json={"binding": "Echo", "payload": 1}, headers=h).json()
    assert api.client.get(f"/v1/jobs/{made['id']}/dependencies", headers=h).status_code == 403
    assert api.client.get(f"/v1/jobs/{made['id']}/dependencies").status_code == 401
    assert api.client.get("/v1/jobs/987654/dependencies", headers=auth(api, "read")).status_code == 404


def test_batches_over_http(api: Api) -> None:
    h = auth(api, "enqueue,read")
    body = {"jobs": [{"binding": "Echo", "payload": i} for i in range(3)],
            "on_complete": {"binding": "Waits", "payload": {}}}
    r = api.client.post("/v1/batches", json=body, headers=h)
    assert r.status_code == 201, r.text
    made = r.json()
    assert (made["total"], made["pending"], len(made["job_ids"])) == (3, 3, 3) and made["on_complete"]
    got = api.client.get(f"/v1/batches/{made['id']}", headers=h).json()
    assert got == made
    bad = api.client.post("/v1/batches", json={"jobs": [{"binding": "Echo", "payload": 1},
                                                         {"binding": "Echo", "payload": 1, "delay": -1}]}, headers=h)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "jobs[1].delay", bad.text
    assert api.client.get("/v1/batches/987654", headers=h).status_code == 404
    assert api.client.get(f"/v1/batches/{made['id']}", headers=auth(api, "enqueue")).status_code == 403
    assert api.client.post("/v1/batches", json=body, headers=auth(api, "read")).status_code == 403
    assert api.client.post("/v1/batches", json=body).status_code == 401
