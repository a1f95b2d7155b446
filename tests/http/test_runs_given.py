"""``POST /v1/runs`` with a definition: a flow given as data, started without being declared."""

from __future__ import annotations

from typing import Any

import pytest

from tests.http.conftest import Api


def auth(api: Api, scopes: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api.token(scopes.replace(',', '-'), scopes)}"}


DEFINITION: dict[str, Any] = {
    "nodes": [
        {"name": "first", "binding": "Echo", "payload": {"n": 1}},
        {"name": "fan", "binding": "Echo", "items": [1, 2]},
        {"name": "last", "binding": "Echo", "payload": None, "priority": 2},
    ],
    "edges": [["first", "fan"], ["fan", "last"]],
}


def test_a_flow_given_as_data_is_started_and_runs(api: Api) -> None:
    h = auth(api, "enqueue,read")
    r = api.client.post("/v1/runs", json={"flow": "given", "input": {"x": 1}, "id": "g1", "definition": DEFINITION},
                        headers=h)
    assert r.status_code == 201, r.text
    assert r.json()["graph"] == {"first": [], "fan": ["first"], "last": ["fan"]}
    api.app.run_sync(api.app.drain())
    api.app.run_sync(api.app.drain())
    done = api.client.get("/v1/runs/g1", headers=h).json()
    assert done["state"] == "succeeded", done
    nodes = {n["name"]: n for n in done["nodes"]} if isinstance(done["nodes"], list) else done["nodes"]
    assert nodes["first"]["result"] == {"n": 1} and nodes["last"]["result"] is None
    assert nodes["fan"]["result"]["results"] == [1, 2]


def test_starting_a_given_flow_takes_the_enqueue_scope(api: Api) -> None:
    body = {"flow": "given", "definition": DEFINITION}
    assert api.client.post("/v1/runs", json=body, headers=auth(api, "read")).status_code == 403
    r = api.client.post("/v1/runs", json=body | {"id": "g2"}, headers=auth(api, "enqueue"))
    assert r.status_code == 201 and r.json() == {"id": "g2", "flow": "given", "state": "running", "existed": False}


@pytest.mark.parametrize(("change", "field", "says"), [
    ({"nodes": [{"name": "a", "binding": "Nope"}]}, "definition.nodes[0].binding", "Nope"),
    ({"nodes": [{"name": "a", "binding": "Echo", "code": "x"}]}, "definition.nodes[0].code", ""),
    ({"nodes": [{"name": "a:b", "binding": "Echo"}]}, "definition.nodes[0]", "a:b"),
    ({"nodes": [{"name": "a", "binding": "Echo", "items": [1], "payload": 2}]}, "definition.nodes[0]",
     "a fan-out (items) takes no payload"),
    ({"nodes": [{"name": "a", "binding": "Echo"}], "edges": [["a", "z"]]}, "definition.edges[0]", "'z'"),
    ({"nodes": [{"name": "a", "binding": "Echo", "after": ["z"]}]}, "definition", "after 'z', which is not in"),
    ({"nodes": [{"name": "a", "binding": "Echo", "after": ["b"]}, {"name": "b", "binding": "Echo", "after": ["a"]}]},
     "definition", "cycle"),
    ({"nodes": [{"name": "a", "binding": "Echo", "priority": "high"}]}, "definition.nodes[0].priority", ""),
    ({"nodes": [{"name": f"n{i}", "binding": "Echo"} for i in range(1001)]}, "definition.nodes", ""),
    ({"nodes": []}, "definition.nodes", ""),
    ({"nodes": [{"name": "a", "binding": "SendMail", "items": [{"to": "x"}, {"to": 5}]}]},
     "definition.nodes[0].items[1]", "invalid payload for SendMail"),
    ({"nodes": [{"name": "a", "binding": "Echo", "on_upstream_failure": "maybe"}]},
     "definition.nodes[0].on_upstream_failure", ""),
])
def test_a_definition_is_validated_strictly_naming_the_field(api: Api, change: dict[str, Any], field: str,
                                                               says: str) -> None:
    r = api.client.post("/v1/runs", json={"flow": "given", "definition": change}, headers=auth(api, "enqueue,read"))
    assert r.status_code in (400, 422), r.text
    error = r.json()["error"]
    assert error.get("field") == field, error
    assert says in error["message"]
    assert api.client.get("/v1/runs", headers=auth(api, "read")).json()["runs"] == []


def test_a_given_flow_cannot_take_a_declared_name(api: Api) -> None:
    r = api.client.post("/v1/runs", json={"flow": "greet", "definition": DEFINITION}, headers=auth(api, "enqueue"))
    assert r.status_code == 422 and r.json()["error"]["field"] == "definition"
    assert "declared on this app" in r.json()["error"]["message"]


def test_a_given_flow_takes_its_failure_paths_as_data(api: Api) -> None:
    h = auth(api, "enqueue,read")
    definition = {"nodes": [
        {"name": "first", "binding": "SendMail", "payload": {"to": 5}},  # refused by the payload's type
        {"name": "anyway", "binding": "Echo", "after": ["first"], "on_upstream_failure": "run", "payload": "ran"},
        {"name": "alert", "binding": "Echo", "on_failure": True},
    ]}
    r = api.client.post("/v1/runs", json={"flow": "given", "id": "g3", "definition": definition}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "definition.nodes[0].payload", r.text
    definition["nodes"][0]["payload"] = {"to": "a@example.com"}
    definition["nodes"][0]["binding"] = "Waits"
    r = api.client.post("/v1/runs", json={"flow": "given", "id": "g3", "definition": definition}, headers=h)
    assert r.status_code == 201, r.text
    api.app.run_sync(api.app.cancel_run("g3"))
    done = api.client.get("/v1/runs/g3", headers=h).json()
    assert done["state"] == "cancelled" and done["nodes"]["alert"]["state"] == "cancelled"
    bad = {"nodes": [{"name": "a", "binding": "Echo"}, {"name": "h", "binding": "Echo", "on_failure": True,
                                                       "after": ["a"]}]}
    r = api.client.post("/v1/runs", json={"flow": "given", "definition": bad}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "definition.nodes[1]", r.text
    assert "an on_failure node takes no after" in r.json()["error"]["message"]
