"""``GET /metrics`` of the HTTP API on both stores: scope read, the app's enqueues, the store's gauges."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.http.conftest import Api


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_need_a_read_token_and_count_enqueues_and_jobs(api: Api) -> None:
    assert api.client.get("/metrics").status_code == 401
    enqueue = {"Authorization": f"Bearer {api.token('producer', 'enqueue')}"}
    assert api.client.get("/metrics", headers=enqueue).status_code == 403
    read = {"Authorization": f"Bearer {api.token('prometheus', 'read')}"}

    before = api.client.get("/metrics", headers=read)
    assert before.status_code == 200 and before.headers["content-type"].startswith("text/plain")
    enqueued = ("jobloom_jobs_enqueued_total", frozenset({("binding", "SendMail")}))
    start = samples(before.text).get(enqueued, 0.0)
    for i in range(3):
        r = api.client.post("/v1/jobs", json={"binding": "SendMail", "payload": {"to": f"{i}@x"}}, headers=enqueue)
        assert r.status_code == 201, r.text
    got = samples(api.client.get("/metrics", headers=read).text)
    assert got[enqueued] == start + 3
    assert got[("jobloom_store_up", frozenset())] == 1.0
    # the gauges are at most 5 s old: the first scrape may have read the store before the enqueues
    queued = got.get(("jobloom_jobs", frozenset({("binding", "SendMail"), ("state", "queued")})))
    assert queued in (0.0, 3.0)
    assert got[("jobloom_jobs", frozenset({("binding", "SendMail"), ("state", "running")}))] == 0.0


def test_metrics_gauges_read_the_store_once_per_ttl(api: Api) -> None:
    from jobloom.observe.gauges import StoreGauges

    app = api.app
    gauges = StoreGauges(app.store, ttl=60.0)
    app.run_sync(gauges.refresh())
    first = gauges.snapshot
    app.run_sync(app.enqueue("SendMail", {"to": "a@x"}))
    app.run_sync(gauges.refresh())
    assert gauges.snapshot is first  # cached
    gauges.ttl = 0.0
    app.run_sync(gauges.refresh())
    assert gauges.snapshot is not first
    families = {f.name: f for f in gauges.collect()}
    queued = [s for s in families["jobloom_jobs"].samples if s.labels == {"binding": "SendMail", "state": "queued"}]
    assert [s.value for s in queued] == [1.0]
