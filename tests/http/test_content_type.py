"""A JSON body sent with a form content type (``curl -d`` without a header) is a 415 that says what to send."""

from __future__ import annotations

from tests.http.conftest import Api


def test_form_content_type_is_a_415_naming_the_header(api: Api) -> None:
    h = {"Authorization": f"Bearer {api.token('ct', 'admin')}"}
    body = b'{"binding": "SendMail", "payload": {"to": "a@example.com"}}'
    form = {**h, "Content-Type": "application/x-www-form-urlencoded"}
    r = api.client.post("/v1/jobs", content=body, headers=form)
    assert r.status_code == 415, r.text
    error = r.json()["error"]
    assert error["type"] == "UnsupportedMediaType" and "Content-Type: application/json" in error["message"]
    assert error["field"] == "Content-Type"
    assert api.app.run_sync(api.app.drain()) == 0  # nothing was enqueued
    ok = api.client.post("/v1/jobs", content=body, headers={**h, "Content-Type": "application/json; charset=utf-8"})
    assert ok.status_code == 201, ok.text
