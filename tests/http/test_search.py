"""Search, bulk actions, tags and metadata, and the binding listing and pausing, over real HTTP on both
stores: what the Python API answers, the HTTP API answers alike."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.http.conftest import Api


def auth(api: Api, scopes: str = "admin") -> dict[str, str]:
    return {"Authorization": f"Bearer {api.token(f'tok-{scopes}', scopes)}"}


def test_tags_and_meta_on_one_job_and_in_a_batch(api: Api) -> None:
    h = auth(api)
    r = api.client.post("/v1/jobs", json={"binding": "Echo", "payload": 1, "tags": ["red", "big"],
                                          "meta": {"by": "api", "n": [1, 2]}}, headers=h)
    assert r.status_code == 201, r.text
    assert r.json()["tags"] == ["red", "big"] and r.json()["meta"] == {"by": "api", "n": [1, 2]}
    stored = api.app.run_sync(api.app.get_job(r.json()["id"]))
    assert stored.tags == ["red", "big"] and stored.meta == {"by": "api", "n": [1, 2]}
    r = api.client.post("/v1/jobs/batch", json={"jobs": [
        {"binding": "Echo", "payload": 2, "tags": ["red"]}, {"binding": "Echo", "payload": 3, "meta": {"k": 1}}]},
        headers=h)
    assert r.status_code == 201, r.text
    assert [(j["tags"], j["meta"]) for j in r.json()["jobs"]] == [(["red"], {}), ([], {"k": 1})]
    r = api.client.post("/v1/jobs/batch", json={"jobs": [{"binding": "Echo", "payload": 2},
                                                         {"binding": "Echo", "payload": 2, "tags": ["x" * 500]}]},
                        headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "jobs[1].tags", r.text
    r = api.client.post("/v1/jobs", json={"binding": "Echo", "payload": 1, "meta": {"x": "y" * 70_000}}, headers=h)
    assert r.status_code in (413, 422) and r.json()["error"]["type"] != "InternalError", r.text


def test_search_pages_with_a_cursor_and_each_filter(api: Api) -> None:
    h = auth(api)
    ids = [api.client.post("/v1/jobs", json={"binding": "Echo", "payload": i, "tags": ["t", f"n{i % 2}"],
                                             **({"unique_key": "only"} if i == 3 else {})}, headers=h).json()["id"]
           for i in range(7)]
    api.client.post("/v1/jobs", json={"binding": "SendMail", "payload": {"to": "a"}}, headers=h)
    seen: list[int] = []
    cursor = None
    while True:
        params: dict[str, object] = {"binding": "Echo", "limit": 3, **({"cursor": cursor} if cursor else {})}
        page = api.client.get("/v1/jobs", params=params, headers=h).json()
        seen += [j["id"] for j in page["jobs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(ids, reverse=True)
    assert python_ids(api, binding="Echo", limit=100) == seen

    def ids_of(**params: object) -> list[int]:
        r = api.client.get("/v1/jobs", params=params, headers=h)
        assert r.status_code == 200, r.text
        return [j["id"] for j in r.json()["jobs"]]

    assert ids_of(tags=["t", "n1"]) == [ids[5], ids[3], ids[1]]
    assert ids_of(unique_key="only") == [ids[3]]
    assert ids_of(state=["queued"], binding="SendMail") != [] and ids_of(state=["failed"]) == []
    now = datetime.now(UTC)
    assert len(ids_of(created_after=(now - timedelta(minutes=5)).isoformat())) == 8
    assert ids_of(created_before=(now - timedelta(minutes=5)).isoformat()) == []
    for params, field in (({"state": "nope"}, "state"), ({"cursor": "garbage"}, "cursor"),
                          ({"created_after": "2024-01-01T00:00:00"}, "created_after"), ({"limit": 0}, "limit")):
        r = api.client.get("/v1/jobs", params=params, headers=h)
        assert r.status_code == 422 and r.json()["error"]["field"] == field, (params, r.text)


def python_ids(api: Api, **filters: object) -> list[int]:
    page = api.app.run_sync(api.app.list_jobs(**filters))  # type: ignore[arg-type]
    return [j.id for j in page.jobs]


def test_bulk_actions_by_filter(api: Api) -> None:
    h = auth(api)
    for i in range(4):
        api.client.post("/v1/jobs", json={"binding": "Echo", "payload": i, "tags": ["batch-a" if i < 3 else "b"]},
                        headers=h)
    # the newest job is never deleted on SQLite (its id would be handed out again): one of another binding
    api.client.post("/v1/jobs", json={"binding": "SendMail", "payload": {"to": "a"}}, headers=h)
    r = api.client.post("/v1/jobs/cancel", json={"tags": ["batch-a"]}, headers=h)
    assert r.status_code == 200 and r.json() == {"changed": 3}, r.text
    assert api.client.get("/v1/counts", headers=h).json()["counts"]["Echo"] == {"cancelled": 3, "queued": 1}
    assert api.client.post("/v1/jobs/cancel", json={"tags": ["batch-a"]}, headers=h).json() == {"changed": 0}
    assert api.client.post("/v1/jobs/retry", json={"state": "cancelled"}, headers=h).json() == {"changed": 3}
    assert api.client.post("/v1/jobs/cancel", json={"binding": "Echo"}, headers=h).json() == {"changed": 4}
    r = api.client.post("/v1/jobs/delete", json={"state": ["cancelled"], "binding": "Echo"}, headers=h)
    assert r.json() == {"changed": 4}
    assert api.client.get("/v1/counts", headers=h).json() == {"counts": {"SendMail": {"queued": 1}}}
    r = api.client.post("/v1/jobs/delete", json={}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "filter", r.text
    r = api.client.post("/v1/jobs/retry", json={"state": "bogus"}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "state", r.text


def test_bindings_listed_paused_and_resumed(api: Api) -> None:
    h = auth(api)
    api.client.post("/v1/jobs", json={"binding": "SendMail", "payload": {"to": "a"}}, headers=h)
    api.client.put("/v1/bindings/Echo/limits", json={"concurrency": 3}, headers=h)
    listed = {b["binding"]: b for b in api.client.get("/v1/bindings", headers=h).json()["bindings"]}
    assert {"Echo", "SendMail", "Waits"} <= set(listed)
    mail = listed["SendMail"]
    assert mail["counts"] == {"queued": 1} and mail["paused"] is False and mail["paused_at"] is None
    assert mail["payload_schema"]["properties"]["to"]["type"] == "string"
    assert mail["options"]["max_attempts"] >= 1 and mail["options"]["kind"] == "python"
    assert listed["Echo"]["limits"]["concurrency"] == 3 and listed["Echo"]["overridden"] == ["concurrency"]
    r = api.client.post("/v1/bindings/SendMail/pause", headers=h)
    assert r.status_code == 200 and r.json()["paused"] is True and r.json()["paused_at"] is not None, r.text
    assert api.app.run_sync(api.app.drain()) == 0  # paused: its queued job does not start
    assert [b.paused for b in api.app.run_sync(api.app.list_bindings()) if b.binding == "SendMail"] == [True]
    r = api.client.post("/v1/bindings/SendMail/resume", headers=h)
    assert r.status_code == 200 and r.json()["paused"] is False
    assert api.app.run_sync(api.app.drain()) == 1
    r = api.client.post("/v1/bindings/Nope/pause", headers=h)
    assert r.status_code == 404 and r.json()["error"]["type"] == "NotFound", r.text
