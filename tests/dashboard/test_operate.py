"""The actions of the ``operate`` scope in Chromium: enqueue a job (its payload checked against its
binding's schema in the page and again on the server), start a run, send an event to a waiting job,
trigger a schedule with a payload; each confirmed, each noted in the job's timeline with the token's
name, and refused to a token without ``operate`` or a request without the CSRF token."""

from __future__ import annotations

import re
from typing import Any

from tests.dashboard.conftest import Site, login, screenshot, sync_api, wait_until

expect = sync_api.expect


def _job_id(page: Any) -> int:
    return int(re.search(r"/jobs/(\d+)", page.url).group(1))  # type: ignore[union-attr]


def test_enqueue_a_job_with_its_payload_checked_against_its_schema(page: Any, site: Site) -> None:
    page.goto(f"{site.url}/jobs")
    page.get_by_role("link", name="Enqueue a job…").click()
    page.get_by_label("Binding").select_option("Ship")
    expect(page.locator("#schema")).to_contain_text('"qty"')
    payload = page.get_by_label("Payload (JSON)")
    payload.fill('{"sku": "A1"')
    expect(page.locator("#json-problem")).to_contain_text("not JSON")
    payload.fill('{"sku": "A1"}')
    expect(page.locator("#json-problem")).to_have_text("missing: qty")
    payload.fill('{"sku": "A1", "qty": "two"}')
    expect(page.locator("#json-problem")).to_have_text("qty: integer expected")
    page.get_by_role("button", name="Check the payload…").click()  # the browser holds the form back
    expect(page).to_have_url(f"{site.url}/actions/enqueue")
    screenshot(page, site, "enqueue-form")

    page.evaluate("document.querySelector('form[data-json-form]').noValidate = true")  # the server checks too
    page.get_by_role("button", name="Check the payload…").click()
    expect(page.get_by_role("alert")).to_contain_text("qty")
    expect(page.get_by_label("Payload (JSON)")).to_have_value('{"sku": "A1", "qty": "two"}')

    page.get_by_label("Payload (JSON)").fill('{"sku": "<b>A1</b>", "qty": 2}')
    page.get_by_label("Tags").fill("by-hand")
    page.get_by_role("button", name="Check the payload…").click()
    expect(page.get_by_role("heading")).to_have_text("Enqueue a job of Ship?")
    expect(page.locator("#confirm-facts")).to_contain_text('"sku": "<b>A1</b>"')  # shown as text
    page.get_by_role("button", name="Enqueue the job of Ship").click()
    expect(page.get_by_role("status")).to_contain_text("enqueued")
    job_id = _job_id(page)
    wait_until("it to succeed", lambda: site.job(job_id).state == "succeeded")
    assert site.job(job_id).result == 2 and site.job(job_id).tags == ["by-hand"]
    expect(page.locator("#timeline")).to_contain_text("enqueued from the dashboard")
    expect(page.locator("#timeline")).to_contain_text("by ops")


def test_start_a_run_send_an_event_and_trigger_a_schedule_with_a_payload(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp
    page.goto(f"{site.url}/runs")
    page.get_by_role("link", name="Start a run…").click()
    page.get_by_label("Flow").select_option("pipeline")
    page.get_by_label("Input (JSON)").fill("{}")
    page.get_by_label("Run id").fill("operate-run")
    page.get_by_role("button", name="Check the input…").click()
    page.get_by_role("button", name="Start the run of pipeline").click()
    expect(page).to_have_url(re.compile(r"/runs/operate-run"))
    wait_until("the run to succeed", lambda: site.run(app.get_run("operate-run")).state == "succeeded")
    fetch = site.run(app.get_run("operate-run")).nodes["fetch"].job_id
    page.goto(f"{site.url}/jobs/{fetch}")
    expect(page.locator("#timeline")).to_contain_text("started run operate-run from the dashboard")

    waiting = site.run(app.enqueue(d.Approval, {}))
    wait_until("it to wait for its event", lambda: site.job(waiting.id).state == "scheduled")
    page.goto(f"{site.url}/jobs/{waiting.id}")
    expect(page.get_by_label("Event name")).to_have_value("approved")  # the event it waits for
    page.get_by_label("Event data (JSON)").fill('{"ok": true}')
    page.get_by_role("button", name="Send an event…").click()
    expect(page.get_by_role("heading")).to_have_text(f"Send event 'approved' to job {waiting.id}?")
    page.get_by_role("button", name=f"Send approved to job {waiting.id}").click()
    expect(page.get_by_role("status")).to_contain_text("woken")
    wait_until("it to succeed", lambda: site.job(waiting.id).state == "succeeded")
    assert site.job(waiting.id).result == {"ok": True}
    page.reload()
    expect(page.locator("#timeline")).to_contain_text("sent event 'approved' (it woke the job)")

    page.goto(f"{site.url}/schedules")
    row = page.locator("#schedules tr[data-schedule=hourly-digest]")
    row.get_by_role("link", name="Trigger with a payload…").click()
    expect(page.get_by_label(re.compile("Payload for this once"))).to_have_value(re.compile(r'"n": 7'))
    page.get_by_label(re.compile("Payload for this once")).fill('{"n": 42}')
    page.get_by_role("button", name="Check the payload…").click()
    page.get_by_role("button", name="Trigger hourly-digest with this payload").click()
    job_id = _job_id(page)
    wait_until("the triggered job to succeed", lambda: site.job(job_id).state == "succeeded")
    assert site.job(job_id).result == 42
    expect(page.locator("#timeline")).to_contain_text("made by triggering schedule 'hourly-digest' with a payload")


def test_actions_are_refused_without_operate_or_without_the_csrf_token(context: Any, site: Site) -> None:
    viewer = context.new_page()
    login(viewer, site, "viewer")
    viewer.goto(f"{site.url}/actions/enqueue")
    expect(viewer.get_by_role("alert")).to_contain_text("lacks the operate scope")
    viewer.get_by_label("Binding").select_option("Quick")
    viewer.get_by_role("button", name="Check the payload…").click()
    expect(viewer.locator("main")).to_contain_text("lacks the 'operate' scope")
    before = len(site.run(site.app.list_jobs(binding="Quick", limit=1000)))
    answer = viewer.request.post(f"{site.url}/actions/enqueue", form={"binding": "Quick", "payload": "{}"})
    assert answer.status == 403
    assert len(site.run(site.app.list_jobs(binding="Quick", limit=1000))) == before
