"""The jobs page in Chromium: tags shown and filtered, search in payloads and meta, and deleting
finished jobs, one from its page and many from the list, each after a confirmation."""

from __future__ import annotations

from typing import Any

from tests.dashboard.conftest import Site, screenshot, sync_api, wait_until

expect = sync_api.expect


def test_tags_column_and_filter_and_payload_search(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp

    async def work() -> tuple[Any, Any, Any]:
        tagged = await app.enqueue(d.Quick, {"n": 1, "customer": "cust-<b>77</b>"}, tags=["tenant:7", "import"],
                                   delay=3600)
        meta = await app.enqueue(d.Quick, {"n": 2}, meta={"order": "ord-9913"}, tags=["tenant:8"], delay=3600)
        plain = await app.enqueue(d.Quick, {"n": 3}, delay=3600)
        return tagged, meta, plain

    tagged, meta, plain = site.run(work())
    try:
        page.goto(f"{site.url}/jobs")
        row = page.locator(f"#jobs tr[data-job='{tagged.id}']")
        expect(row.locator("td[data-tags] a")).to_have_text(["tenant:7", "import"])
        row.get_by_role("link", name="tenant:7").click()
        rows = page.locator("#jobs tbody tr[data-job]")
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_attribute("data-job", str(tagged.id))
        expect(page.get_by_label("Tags")).to_have_value("tenant:7")

        page.goto(f"{site.url}/jobs")
        page.get_by_label("Payload or meta contains").fill("cust-<b>77")  # markup in data stays text
        page.get_by_role("button", name="Filter").click()
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_attribute("data-job", str(tagged.id))
        page.get_by_label("Payload or meta contains").fill("ord-9913")
        page.get_by_role("button", name="Filter").click()
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_attribute("data-job", str(meta.id))
        screenshot(page, site, "jobs-search")
    finally:
        for job in (tagged, meta, plain):
            site.run(app.cancel(job.id))


def test_delete_finished_jobs_one_and_many_after_confirming(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp
    jobs = site.run(app.enqueue_many([(d.Quick, {"n": i, "mark": "delete-me"}) for i in range(4)]))
    wait_until("them to succeed", lambda: all(site.job(j.id).state == "succeeded" for j in jobs))
    site.run(app.enqueue(d.Quick, {"n": 0}, delay=3600))  # a newer job: the ones above may all go (SQLite)

    page.goto(f"{site.url}/jobs/{jobs[0].id}")
    page.get_by_role("button", name="Delete job…").click()
    expect(page.get_by_role("heading")).to_have_text("Delete 1 job?")
    expect(page.locator("#confirm-text")).to_contain_text("cannot be undone")
    page.get_by_role("button", name="Delete 1 job").click()
    expect(page.get_by_role("status")).to_have_text("1 job deleted")
    page.goto(f"{site.url}/jobs/{jobs[0].id}")
    expect(page.get_by_role("heading")).to_contain_text("Not found")

    page.goto(f"{site.url}/jobs?state=succeeded&payload_text=delete-me")
    expect(page.locator("#jobs tbody tr[data-job]")).to_have_count(3)
    page.get_by_label("all jobs that match the filter").check()
    page.get_by_role("button", name="Delete…").click()
    expect(page.locator("[data-count]")).to_have_text("3")
    page.get_by_role("button", name="Delete 3 jobs").click()
    expect(page.get_by_role("status")).to_have_text("3 jobs deleted")
    expect(page.locator("#jobs tbody tr[data-job]")).to_have_count(0)
    assert site.run(app.list_jobs(payload_text="delete-me")) == []


def test_a_job_page_shows_its_dependencies_and_dependants(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp

    async def work() -> tuple[Any, Any, Any]:
        first = await app.enqueue(d.Quick, {"n": 1}, delay=3600)
        second = await app.enqueue(d.Quick, {"n": 2}, depends_on=[first.id])
        third = await app.enqueue(d.Quick, {"n": 3}, depends_on=[second.id])
        return first, second, third

    first, second, third = site.run(work())
    try:
        page.goto(f"{site.url}/jobs/{second.id}")
        expect(page.locator("#depends-on li")).to_have_text([f"job {first.id} scheduled"])
        expect(page.locator("#dependants li")).to_have_text([f"job {third.id} waiting"])
        page.locator("#dependants").get_by_role("link", name=f"job {third.id}").click()
        expect(page.locator("#depends-on li")).to_have_text([f"job {second.id} waiting"])
        expect(page.locator("#dependants")).to_have_count(0)
    finally:
        site.run(app.cancel(first.id))
    wait_until("the chain to be skipped", lambda: site.job(third.id).state == "skipped")
