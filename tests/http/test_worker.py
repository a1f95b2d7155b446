"""The worker protocol over real HTTP on both stores: claims within the binding's limit, heartbeats,
completions fenced by attempt (409 for a stale one), bad input named, and long polls that hold no
server thread."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from tests.helpers import eventually
from tests.http.conftest import Api, httpx


def auth(api: Api, scopes: str = "worker") -> dict[str, str]:
    return {"Authorization": f"Bearer {api.token(f'tok-{scopes}', scopes)}"}


def test_claim_heartbeat_complete_and_a_stale_report(api: Api) -> None:
    h, admin = auth(api), auth(api, "admin")
    first = api.app.run_sync(api.app.enqueue("Render", {"frame": 1}))
    second = api.app.run_sync(api.app.enqueue("Render", {"frame": 2}))
    r = api.client.post("/v1/worker/claim", json={"worker": "w1", "bindings": ["Render"], "max": 5}, headers=h)
    assert r.status_code == 200, r.text
    [job] = r.json()["jobs"]  # concurrency 1: one of the two
    assert job["id"] == first.id and job["attempt"] == 1 and job["binding"] == "Render"
    assert job["payload"] == {"frame": 1} and job["deadline"] > time.time()  # the default timeout
    assert job["lease_expires_at"] > time.time() + 10
    r = api.client.post("/v1/worker/claim", json={"worker": "w2", "bindings": ["Render"], "max": 5}, headers=h)
    assert r.json() == {"jobs": []}
    r = api.client.post("/v1/worker/heartbeat", json={"worker": "w1", "jobs": [
        {"id": first.id, "attempt": 1, "claim": job["claim"]}, {"id": second.id, "attempt": 1, "claim": "x"}]},
        headers=h)
    assert r.status_code == 200 and r.json() == {"jobs": [{"id": first.id, "attempt": 1}]}, r.text
    done = {"worker": "w1", "id": first.id, "attempt": 1, "claim": job["claim"], "outcome": "retry", "error": "busy",
            "retry_after": 0}
    r = api.client.post("/v1/worker/complete", json=done, headers=h)
    assert r.status_code == 200 and r.json() == {"applied": True}, r.text
    r = api.client.post("/v1/worker/complete", json={**done, "outcome": "succeeded", "result": 1,
                                                      "error": None, "retry_after": None}, headers=h)
    assert r.status_code == 409 and r.json()["error"]["type"] == "StaleAttempt", r.text
    stored = api.app.run_sync(api.app.get_job(first.id))
    assert stored.state in ("queued", "scheduled") and stored.attempt == 1 and stored.result is None
    claimed = api.client.post("/v1/worker/claim", json={"worker": "w1", "bindings": ["Render"], "max": 2},
                              headers=h).json()["jobs"]
    assert [(j["id"], j["attempt"]) for j in claimed] in ([(first.id, 2)], [(second.id, 1)])
    j = claimed[0]
    r = api.client.post("/v1/worker/complete", json={"worker": "w1", "id": j["id"], "attempt": j["attempt"],
                                                      "claim": j["claim"], "outcome": "succeeded",
                                                      "result": {"ok": True}}, headers=h)
    assert r.status_code == 200
    got = api.client.get(f"/v1/jobs/{j['id']}", headers=admin).json()
    assert got["state"] == "succeeded" and got["result"] == {"ok": True}
    r = api.client.post("/v1/worker/heartbeat", json={"worker": "w1", "jobs": [
        {"id": j["id"], "attempt": 1, "claim": j["claim"]}]}, headers=h)
    assert r.json() == {"jobs": []}


def test_bad_requests_name_the_field(api: Api) -> None:
    h = auth(api)
    cases = [
        ({"worker": "w", "bindings": ["Echo"], "max": 1}, "bindings"),  # run by the app's own workers
        ({"worker": "w", "bindings": ["Nope"], "max": 1}, "binding"),
        ({"worker": "w", "bindings": ["Render"], "max": 0}, "max"),
        ({"worker": "w", "bindings": ["Render"], "max": 1, "wait": -1}, "wait"),
        ({"worker": "w", "bindings": [], "max": 1}, "bindings"),
        ({"worker": "", "bindings": ["Render"], "max": 1}, "worker"),
    ]
    for body, field in cases:
        r = api.client.post("/v1/worker/claim", json=body, headers=h)
        assert r.status_code == 422 and r.json()["error"].get("field") == field, (body, r.text)
    r = api.client.post("/v1/worker/complete", json={"worker": "w", "id": 1, "attempt": 1, "claim": "c",
                                                      "outcome": "done"}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "outcome", r.text
    r = api.client.post("/v1/worker/complete", json={"worker": "w", "id": 1, "attempt": 1, "claim": "c",
                                                      "outcome": "failed", "result": 5}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "result", r.text
    r = api.client.post("/v1/worker/claim", json={"worker": "w", "bindings": ["Render"], "max": 1},
                        headers=auth(api, "read,enqueue,operate"))
    assert r.status_code == 403


async def _long_polls(api: Api, headers: dict[str, str], n: int) -> tuple[int, float, float, list[int]]:
    """``n`` claims waiting at once, then a read, then one job: how many more threads the process (the
    server runs in a thread of it) had while they waited, how long the read took, how long until a claim
    got the job, and how many jobs each claim got."""
    threads = threading.active_count()
    async with httpx.AsyncClient(base_url=api.url, timeout=30,
                                 limits=httpx.Limits(max_connections=n + 5)) as client:
        body = {"worker": "w", "bindings": ["Render"], "max": 1, "wait": 4}
        r = await client.get("/v1/counts", headers=headers)  # the first read pays for lazy imports: not timed
        assert r.status_code == 200, r.text
        polls = [asyncio.create_task(client.post("/v1/worker/claim", json={**body, "worker": f"w{i}"},
                                                 headers=headers)) for i in range(n)]
        await eventually(lambda: api.app.remote_claims_waiting == n, timeout=30, interval=0.02,
                         what=f"all {n} claims to have looked once and be waiting")
        more = threading.active_count() - threads
        start = time.monotonic()
        r = await client.get("/v1/counts", headers=headers)
        read = time.monotonic() - start
        assert r.status_code == 200, r.text
        start = time.monotonic()
        r = await client.post("/v1/jobs", json={"binding": "Render", "payload": {"frame": 9}}, headers=headers)
        assert r.status_code == 201, r.text
        first = None
        for done in asyncio.as_completed(polls):
            answer = await done
            if answer.json()["jobs"]:
                first = time.monotonic() - start
                break
        got = [len((await p).json()["jobs"]) for p in polls]
        assert first is not None
        return more, read, first, got


@pytest.mark.serial  # a time bound: a read within 1 s behind 60 long polls
def test_long_polls_hold_no_thread_and_wake_on_a_new_job(api: Api) -> None:
    h = auth(api, "admin")
    n = 60  # more than the server's thread pool (40): a claim holding a thread would starve the read
    more, read, first, got = asyncio.run(_long_polls(api, h, n))
    assert more < 10, f"{more} more threads while {n} claims waited"
    assert read < 1.0, f"a read waited {read:.2f} s behind {n} long polls"
    assert first < 2.0, f"the job reached a waiting claim after {first:.2f} s"
    assert sorted(got) == [0] * (n - 1) + [1]


def test_the_fast_lane_and_the_routes_answer_alike(api: Api) -> None:
    """``application/json`` bodies take the fast lane; other spellings of JSON go through FastAPI."""
    h = auth(api)
    answers = []
    for i, content_type in enumerate(("application/json", "application/json;charset=UTF-8")):
        job = api.app.run_sync(api.app.enqueue("Render", {"frame": i}))

        def post(path: str, body: object, kind: str = content_type) -> tuple[int, object]:
            r = api.client.post(path, content=json.dumps(body).encode(), headers={**h, "Content-Type": kind})
            return r.status_code, r.json()

        status, claimed = post("/v1/worker/claim", {"worker": "w", "bindings": ["Render"], "max": 1})
        assert status == 200 and [j["id"] for j in claimed["jobs"]] == [job.id]  # type: ignore[index]
        key = {"id": job.id, "attempt": 1, "claim": claimed["jobs"][0]["claim"]}  # type: ignore[index]
        answers.append(post("/v1/worker/heartbeat", {"worker": "w", "jobs": [key]})[0])
        answers.append(post("/v1/worker/complete", {"worker": "w", **key, "outcome": "succeeded"}))
        stale = post("/v1/worker/complete", {"worker": "w", **key, "outcome": "failed"})
        answers.append((stale[0], stale[1]["error"]["type"]))  # type: ignore[index]
        answers.append(post("/v1/worker/claim", {"worker": "w", "bindings": ["Echo"], "max": 1}))
        answers.append(post("/v1/worker/claim", {"worker": "w", "bindings": ["Render"], "max": 0}))
    half = len(answers) // 2
    assert answers[:half] == answers[half:]
    assert answers[1] == (200, {"applied": True}) and answers[2] == (409, "StaleAttempt")


@pytest.fixture
def store_url(pooled_store_url: str) -> str:
    """The worker protocol runs through PgBouncer (transaction pooling) too."""
    return pooled_store_url
