"""Issue 28, item 3: a remote worker's identity is its claim, not the name it sends. Against a real
``jobloom serve`` on each store: a second worker token that knows a worker's name cannot complete or
renew its attempt (forged result refused), a wrong claim secret is refused and changes nothing, a token
made with ``--bindings`` touches no other binding, and heartbeats cannot keep an attempt past its
``timeout`` (it ends as timed out)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any

from jobloom.http.tokens import create_token
from tests import forkcli
from tests.helpers import eventually_sync
from tests.security.conftest import ROOT, Served, httpx


def post(served: Served, token: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{served.url}/v1/worker/{path}", json=body, headers=served.auth(token), timeout=30)


def enqueue(served: Served, binding: str, payload: Any) -> int:
    r = httpx.post(f"{served.url}/v1/jobs", json={"binding": binding, "payload": payload},
                   headers=served.auth("admin"), timeout=30)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def claim_one(served: Served, token: str, worker: str, binding: str) -> dict[str, Any]:
    """Claim the job just enqueued on ``binding`` (waiting for it a little)."""
    r = post(served, token, "claim", {"worker": worker, "bindings": [binding], "max": 1, "wait": 10})
    assert r.status_code == 200 and len(r.json()["jobs"]) == 1, r.text
    job: dict[str, Any] = r.json()["jobs"][0]
    return job


def known(served: Served, token: str) -> None:
    """Wait until the server knows a token just made (it reads unknown ones again at most every 0.2 s)."""
    def accepted() -> bool:
        r = post(served, token, "heartbeat", {"worker": "probe", "jobs": []})
        assert r.status_code in (200, 401), r.text
        return r.status_code == 200

    eventually_sync(accepted, timeout=10, interval=0.1, what=f"the server to know token {token!r}")


def job_of(served: Served, job_id: int) -> dict[str, Any]:
    r = httpx.get(f"{served.url}/v1/jobs/{job_id}", headers=served.auth("admin"), timeout=30)
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()
    return found


def test_a_second_worker_token_cannot_complete_or_renew_anothers_claim(served: Served) -> None:
    job_id = enqueue(served, "Transcode", {"clip": "forged"})
    job = claim_one(served, "w1", "gpu-1", "Transcode")
    assert job["id"] == job_id and len(job["claim"]) >= 32
    forged = {"worker": "gpu-1", "id": job_id, "attempt": job["attempt"], "outcome": "succeeded",
              "result": {"forged": True}}
    r = post(served, "w2", "complete", {**forged, "claim": "not-the-claim"})
    assert r.status_code == 403 and r.json()["error"]["type"] == "ClaimRefused", r.text
    assert "claim secret does not match" in r.json()["error"]["message"]
    r = post(served, "w2", "complete", forged)  # no claim at all
    assert r.status_code == 422 and r.json()["error"]["field"] == "claim", r.text
    r = post(served, "w2", "heartbeat", {"worker": "gpu-1", "jobs": [
        {"id": job_id, "attempt": job["attempt"], "claim": "not-the-claim"}]})
    assert r.status_code == 403 and r.json()["error"]["type"] == "ClaimRefused", r.text
    stored = job_of(served, job_id)
    assert (stored["state"], stored["result"]) == ("running", None), stored
    r = post(served, "w1", "complete", {**forged, "claim": job["claim"], "result": {"frames": 24}})
    assert r.status_code == 200, r.text
    assert job_of(served, job_id)["result"] == {"frames": 24}


def test_a_wrong_claim_secret_is_refused_and_changes_nothing(served: Served) -> None:
    first = enqueue(served, "Transcode", {"n": 1})
    held = claim_one(served, "w1", "gpu-2", "Transcode")
    second = enqueue(served, "Transcode", {"n": 2})
    other = claim_one(served, "w1", "gpu-2", "Transcode")
    assert (held["id"], other["id"]) == (first, second)
    crossed = {"worker": "gpu-2", "id": first, "attempt": 1, "claim": other["claim"], "outcome": "failed",
               "error": "crossed"}
    r = post(served, "w1", "complete", crossed)  # the same token and name, another attempt's secret
    assert r.status_code == 403 and r.json()["error"]["field"] == "claim", r.text
    r = post(served, "w1", "heartbeat", {"worker": "gpu-2", "jobs": [
        {"id": first, "attempt": 1, "claim": held["claim"]}, {"id": second, "attempt": 1, "claim": held["claim"]}]})
    assert r.status_code == 403, r.text
    assert job_of(served, first)["state"] == "running" and job_of(served, first)["error"] is None
    r = post(served, "w1", "heartbeat", {"worker": "gpu-2", "jobs": [
        {"id": first, "attempt": 1, "claim": held["claim"]}, {"id": second, "attempt": 1, "claim": other["claim"]}]})
    assert r.status_code == 200 and len(r.json()["jobs"]) == 2, r.text
    for job in (held, other):
        r = post(served, "w1", "complete", {"worker": "gpu-2", "id": job["id"], "attempt": 1, "claim": job["claim"],
                                            "outcome": "succeeded"})
        assert r.status_code == 200, r.text


def test_a_binding_limited_token_touches_only_its_bindings(served: Served) -> None:
    async def make() -> str:
        token, info = await create_token(await served.app.store(), "only-transcode", "worker", "Transcode")
        assert info.bindings == ("Transcode",)
        return token

    served.tokens["only-transcode"] = served.run(make())
    known(served, "only-transcode")
    for bindings in (["Render"], ["Transcode", "Render"]):
        r = post(served, "only-transcode", "claim", {"worker": "lim", "bindings": bindings, "max": 1})
        assert r.status_code == 403 and r.json()["error"]["type"] == "ClaimRefused", r.text
        assert "limited to the bindings Transcode: not 'Render'" in r.json()["error"]["message"], r.text
    render_id = enqueue(served, "Render", {"frame": 1})
    render = claim_one(served, "w1", "lim", "Render")  # claimed by an unlimited token under the same name
    key = {"worker": "lim", "id": render_id, "attempt": render["attempt"], "claim": render["claim"]}
    r = post(served, "only-transcode", "heartbeat", {"worker": "lim", "jobs": [
        {"id": render_id, "attempt": render["attempt"], "claim": render["claim"]}]})
    assert r.status_code == 403 and "not 'Render'" in r.json()["error"]["message"], r.text
    r = post(served, "only-transcode", "complete", {**key, "outcome": "succeeded", "result": 1})
    assert r.status_code == 403 and "not 'Render'" in r.json()["error"]["message"], r.text
    assert job_of(served, render_id)["state"] == "running"
    assert post(served, "w1", "complete", {**key, "outcome": "succeeded"}).status_code == 200
    mine = enqueue(served, "Transcode", {"n": 3})
    job = claim_one(served, "only-transcode", "lim", "Transcode")
    assert job["id"] == mine
    r = post(served, "only-transcode", "complete", {"worker": "lim", "id": mine, "attempt": 1,
                                                    "claim": job["claim"], "outcome": "succeeded"})
    assert r.status_code == 200, r.text


def test_tokens_create_with_bindings_on_the_command_line(served: Served) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        # a process of its own, forked from a Python that has imported the command line (tests/forkcli.py)
        return forkcli.run(["tokens", *args, "--url", served.store_url], cwd=ROOT, env=env, timeout=60)

    made = cli("create", "gpu-farm", "--scopes", "worker", "--bindings", "Transcode,Render")
    assert made.returncode == 0 and made.stdout.startswith("jlt_"), made.stderr
    assert "for bindings Render,Transcode only" in made.stderr
    listed = cli("list", "--json")
    assert listed.returncode == 0, listed.stderr
    by_name = {t["name"]: t for t in json.loads(listed.stdout)}
    assert by_name["gpu-farm"]["bindings"] == ["Render", "Transcode"]
    assert by_name["w1"]["bindings"] is None
    refused = cli("create", "too-wide", "--scopes", "admin", "--bindings", "Transcode")
    assert refused.returncode != 0 and "bindings" in refused.stderr and "--scopes worker" in refused.stderr
    served.tokens["gpu-farm"] = made.stdout.strip()
    known(served, "gpu-farm")
    r = post(served, "gpu-farm", "claim", {"worker": "farm", "bindings": ["Clip"], "max": 1})
    assert r.status_code == 403 and "not 'Clip'" in r.json()["error"]["message"], r.text


def test_heartbeats_cannot_keep_a_remote_job_past_its_timeout(served: Served) -> None:
    job_id = enqueue(served, "Clip", {"frames": 100})
    job = claim_one(served, "w1", "slow", "Clip")
    assert job["deadline"] is not None and job["lease_expires_at"] <= job["deadline"] + 1e-6, job
    beat = {"worker": "slow", "jobs": [{"id": job_id, "attempt": 1, "claim": job["claim"]}]}

    def dropped() -> bool:  # the worker heartbeats as fast as it likes: the answer leaves the job out
        r = post(served, "w1", "heartbeat", beat)
        assert r.status_code == 200, r.text
        return r.json()["jobs"] == []

    eventually_sync(dropped, timeout=15, interval=0.1, what="the heartbeat to leave the job out")
    assert time.time() >= job["deadline"] - 0.5, "left out long before its deadline"
    again = claim_one(served, "w2", "other", "Clip")  # the claim reaps the timed-out attempt
    assert (again["id"], again["attempt"]) == (job_id, 2), again

    async def attempts() -> list[Any]:
        return await served.app.attempts(job_id)

    first = served.run(attempts())[0]
    assert first.outcome == "timeout" and first.error == "timed out after 1.5 s", first
    late = {"worker": "slow", "id": job_id, "attempt": 1, "claim": job["claim"], "outcome": "succeeded"}
    r = post(served, "w1", "complete", late)
    assert r.status_code == 409 and r.json()["error"]["type"] == "StaleAttempt", r.text
    r = post(served, "w2", "complete", {"worker": "other", "id": job_id, "attempt": 2, "claim": again["claim"],
                                        "outcome": "succeeded"})
    assert r.status_code == 200, r.text
