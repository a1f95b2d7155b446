"""Issue 28, item 2: a token without ``read`` learns nothing of jobs and runs it did not make. A duplicate
enqueue (by ``unique_key``) or run (by id) answers only what the caller needs to act: id, state, that it
existed."""

from __future__ import annotations

from tests.security.conftest import Served

SECRET = {"card": "4111-1111-1111-1111"}


def test_a_duplicate_enqueue_shows_an_enqueue_token_only_id_and_state(served: Served) -> None:
    c = served.app
    job = served.run(c.enqueue("Echo", SECRET, unique_key="dup-one", meta={"owner": "alice"}))
    url = f"{served.url}/v1/jobs"
    body = {"binding": "Echo", "payload": {"mine": 1}, "unique_key": "dup-one"}
    import httpx

    r = httpx.post(url, json=body, headers=served.auth("pusher"))
    assert r.status_code == 200, r.text
    assert r.json() == {"id": job.id, "binding": "Echo", "state": "queued", "existed": True}
    assert "4111" not in r.text and "alice" not in r.text
    whole = httpx.post(url, json=body, headers=served.auth("admin"))  # a token with read sees the job
    assert whole.status_code == 200 and whole.json()["payload"] == SECRET
    new = httpx.post(url, json={**body, "unique_key": "dup-new"}, headers=served.auth("pusher"))
    assert new.status_code == 201 and new.json()["payload"] == {"mine": 1}  # its own job, whole


def test_a_duplicate_in_a_batch_shows_an_enqueue_token_only_id_and_state(served: Served) -> None:
    import httpx

    job = served.run(served.app.enqueue("Echo", SECRET, unique_key="dup-batch"))
    batch = {"jobs": [{"binding": "Echo", "payload": {"a": 1}, "unique_key": "dup-batch"},
                      {"binding": "Echo", "payload": {"b": 2}, "unique_key": "dup-batch-new"},
                      {"binding": "Echo", "payload": {"c": 3}}]}
    r = httpx.post(f"{served.url}/v1/jobs/batch", json=batch, headers=served.auth("pusher"))
    assert r.status_code == 201, r.text
    first, second, third = r.json()["jobs"]
    assert first == {"id": job.id, "binding": "Echo", "state": "queued", "existed": True}
    assert second["payload"] == {"b": 2} and third["payload"] == {"c": 3}
    assert "4111" not in r.text


def test_a_duplicate_run_shows_an_enqueue_token_only_id_and_state(served: Served) -> None:
    import httpx

    flow = served.app.flows["greet"]
    served.run(served.app.start(flow, SECRET, id="dup-run"))
    url = f"{served.url}/v1/runs"
    r = httpx.post(url, json={"flow": "greet", "input": {}, "id": "dup-run"}, headers=served.auth("pusher"))
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"id", "flow", "state", "existed"} and r.json()["existed"] is True
    assert "4111" not in r.text
    new = httpx.post(url, json={"flow": "greet", "input": {}, "id": "dup-run-2"}, headers=served.auth("pusher"))
    assert new.status_code == 201 and new.json()["existed"] is False
    whole = httpx.post(url, json={"flow": "greet", "input": {}, "id": "dup-run"}, headers=served.auth("admin"))
    assert whole.status_code == 201 and whole.json()["input"] == SECRET
