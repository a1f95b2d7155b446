"""Acting from the dashboard in Chromium: filtering jobs, a bulk retry of 50 failed jobs with its count,
cancelling from a job's page, the "why is it not running" box for each cause, pausing and triggering a
schedule, and a limit changed on the limits page that dispatch follows."""

from __future__ import annotations

import contextlib
import re
from typing import Any

from jobloom.core.errors import JobloomError
from tests.dashboard.conftest import Site, screenshot, sync_api, wait_until

expect = sync_api.expect


def test_filtering_jobs(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp

    async def work() -> tuple[Any, Any, Any, Any]:
        failing = await app.enqueue(d.Flaky, {"n": "filter-me"})
        keyed = await app.enqueue(d.Quick, {"n": 2}, delay=3600, unique_key="filter-key")
        other = await app.enqueue(d.Quick, {"n": 3}, delay=3600)
        done = await app.enqueue(d.Quick, {"n": 4})
        await app.wait(failing.id, timeout=30)
        await app.wait(done.id, timeout=30)
        return failing, keyed, other, done

    failing, keyed, other, done = site.run(work())
    page.goto(f"{site.url}/jobs")  # by default: unfinished and failed jobs, each state from its index
    expect(page.locator(f"#jobs tr[data-job='{failing.id}']")).to_be_visible()
    expect(page.locator(f"#jobs tr[data-job='{done.id}']")).to_have_count(0)
    page.get_by_label("State").select_option("all")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator(f"#jobs tr[data-job='{done.id}']")).to_contain_text("succeeded")

    page.goto(f"{site.url}/jobs")
    page.get_by_label("State").select_option("scheduled")
    page.get_by_label("Binding").select_option("Quick")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"state=scheduled&binding=Quick"))  # the filtered page, not the one before
    rows = page.locator("#jobs tbody tr[data-job]")
    expect(page.locator(f"#jobs tr[data-job='{keyed.id}']")).to_be_visible()  # the filtered rows are in
    expect(rows.filter(has_text="scheduled")).to_have_count(rows.count())
    expect(page.locator(f"#jobs tr[data-job='{failing.id}']")).to_have_count(0)

    page.get_by_label("Unique key").fill("filter-key")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-job", str(keyed.id))

    page.goto(f"{site.url}/jobs")
    page.get_by_label("Error contains").fill("flaky filter-me")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-job", str(failing.id))

    page.goto(f"{site.url}/jobs")
    page.get_by_label("Job id").fill(str(other.id))
    page.get_by_label("Job id").press("Enter")
    expect(page).to_have_url(f"{site.url}/jobs/{other.id}")

    page.goto(f"{site.url}/jobs?state=nonsense")
    expect(page.get_by_role("alert")).to_contain_text("state")


def test_bulk_retry_of_50_failed_jobs_with_a_count(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp

    async def work() -> list[int]:
        jobs = await app.enqueue_many([(d.Flaky, {"n": f"bulk-{i}"}) for i in range(50)])
        for job in jobs:
            await app.wait(job.id, timeout=60)
        return [j.id for j in jobs]

    ids = site.run(work())
    assert {site.job(i).state for i in ids} == {"failed"}
    page.goto(f"{site.url}/jobs?state=failed&binding=Flaky&text=flaky+bulk-")
    expect(page.locator("#jobs tbody tr[data-job]")).to_have_count(50)
    page.get_by_label("Select every job on this page").check()
    expect(page.locator("#selected-count")).to_have_text("50 selected")
    page.get_by_role("button", name="Retry…").click()
    expect(page.get_by_role("heading")).to_have_text("Retry 50 jobs?")
    screenshot(page, site, "bulk-confirm")
    page.get_by_role("button", name="Retry 50 jobs").click()
    expect(page.get_by_role("status")).to_have_text("50 jobs retried")
    wait_until("the 50 retried jobs to succeed", lambda: {site.job(i).state for i in ids} == {"succeeded"})
    page.goto(f"{site.url}/jobs/{ids[0]}")
    expect(page.locator("#timeline")).to_contain_text("retry from the dashboard's jobs page")  # who did it
    expect(page.locator("#timeline")).to_contain_text("by ops")

    # "all that match": the count comes from the server, not from the page
    more = site.run(app.enqueue_many([(d.Flaky, {"n": f"every-{i}"}) for i in range(60)]))
    wait_until("60 more to fail", lambda: all(site.job(j.id).state == "failed" for j in more))
    page.goto(f"{site.url}/jobs?state=failed&binding=Flaky&text=flaky+every-")
    expect(page.locator("#jobs tbody tr[data-job]")).to_have_count(50)  # one page of 50
    page.get_by_label("all jobs that match the filter").check()
    page.get_by_role("button", name="Retry…").click()
    expect(page.locator("[data-count]")).to_have_text("60")
    page.get_by_role("button", name="Retry 60 jobs").click()
    expect(page.get_by_role("status")).to_have_text("60 jobs retried")


def test_cancel_from_the_job_page(page: Any, site: Site) -> None:
    job = site.run(site.app.enqueue(site.dashapp.Quick, {"n": 1}, delay=3600))
    page.goto(f"{site.url}/jobs/{job.id}")
    expect(page.locator("#job-state")).to_have_text("scheduled")
    with page.expect_response(f"{site.url}/jobs/{job.id}/live"):
        pass  # the live part was fetched again: its button is the refreshed one
    page.get_by_role("button", name="Cancel job").click()
    expect(page.get_by_role("status")).to_have_text(f"job {job.id} cancelled")
    expect(page.locator("#job-state")).to_have_text("cancelled")
    assert site.job(job.id).state == "cancelled"
    expect(page.locator("#timeline")).to_contain_text("cancelled from the dashboard")  # with who did it
    expect(page.locator("#timeline")).to_contain_text("by ops")
    expect(page.get_by_role("button", name="Retry")).to_be_visible()


def test_why_a_job_is_not_running_for_each_cause(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp

    async def setup() -> dict[str, Any]:
        made: dict[str, Any] = {"scheduled": await app.enqueue(d.Quick, {"n": 1}, delay=3600)}
        made["limited_running"] = await app.enqueue(d.Limited, {"sleep": 60})
        made["binding_full"] = await app.enqueue(d.Limited, {"sleep": 60})
        made["key_running"] = await app.enqueue(d.Keyed, {"sleep": 60}, concurrency_key="k1")
        made["key_full"] = await app.enqueue(d.Keyed, {"sleep": 60}, concurrency_key="k1")
        made["rated_first"] = await app.enqueue(d.Rated, {})
        made["rate_limited"] = await app.enqueue(d.Rated, {})
        await app.pause_binding("Pausable")
        made["paused"] = await app.enqueue(d.Pausable, {})
        made["no_worker"] = await app.enqueue(d.Unserved, {})
        made["run"] = await app.start(d.pipeline, {"sleep": 60}, id="why-run")
        return made

    made = site.run(setup())
    try:
        wait_until("the blocking jobs to run", lambda: [site.job(made[k].id).state for k in (
            "limited_running", "key_running")] == ["running", "running"] and site.job(
            made["rated_first"].id).state != "queued")
        run = site.run(app.get_run("why-run"))
        wait_until("the flow's first node to run",
                   lambda: site.run(app.get_run("why-run")).nodes["fetch"].state == "running")
        cases = {
            "scheduled": (made["scheduled"].id, []),
            "binding_full": (made["binding_full"].id, [made["limited_running"].id]),
            "key_full": (made["key_full"].id, [made["key_running"].id]),
            "rate_limited": (made["rate_limited"].id, []),
            "paused": (made["paused"].id, []),
            "no_worker": (made["no_worker"].id, []),
            "upstream": (run.nodes["resize"].job_id, [run.nodes["fetch"].job_id]),
        }
        for code, (job_id, linked) in cases.items():
            page.goto(f"{site.url}/jobs/{job_id}")
            reason = page.locator(f"#why [data-reason={code}]")
            expect(reason, f"reason {code} for job {job_id}").to_be_visible()
            expect(reason).not_to_be_empty()
            for other in linked:
                expect(reason.locator(f"a[href='/jobs/{other}']")).to_have_count(1)
            if code == "scheduled":
                expect(reason).to_contain_text("UTC")
            if code == "binding_full":
                expect(reason).to_contain_text(re.compile(r"1\s*/\s*1"))
                screenshot(page, site, "job-why-not-running")
    finally:
        async def cleanup() -> None:
            await app.resume_binding("Pausable")
            await app.cancel_run("why-run")
            for key in ("limited_running", "binding_full", "key_running", "key_full", "no_worker", "rate_limited"):
                with contextlib.suppress(JobloomError):  # finished meanwhile
                    await app.cancel(made[key].id)

        site.run(cleanup())


def test_pause_and_trigger_a_schedule(page: Any, site: Site) -> None:
    page.goto(f"{site.url}/schedules")
    row = page.locator("#schedules tr[data-schedule=hourly-digest]")
    row.get_by_role("button", name="Pause").click()
    expect(page.get_by_role("status")).to_have_text("schedule hourly-digest paused")
    expect(row).to_contain_text("paused")
    assert next(s for s in site.run(site.app.list_schedules()) if s.name == "hourly-digest").paused

    row.get_by_role("button", name="Trigger now").click()  # paused or not
    expect(page.get_by_role("status")).to_contain_text("schedule hourly-digest triggered: job ")
    job_id = int(page.get_by_role("status").inner_text().rsplit(" ", 1)[1])
    wait_until("the triggered job to run", lambda: site.job(job_id).state == "succeeded")
    expect(row.get_by_role("link", name=f"job {job_id}")).to_be_visible()

    row.get_by_role("button", name="Resume").click()
    expect(page.get_by_role("status")).to_have_text("schedule hourly-digest resumed")
    expect(row.locator("td[data-next]")).to_contain_text("Europe/Berlin")


def test_a_limit_changed_on_the_limits_page_is_what_dispatch_follows(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp
    jobs = site.run(app.enqueue_many([(d.Throttled, {"sleep": 1.0}) for _ in range(7)]))

    def running() -> int:
        return int(site.run(app.counts()).get("Throttled", {}).get("running", 0))

    wait_until("one to run", lambda: running() == 1)
    page.goto(f"{site.url}/limits")
    panel = page.locator("[data-binding=Throttled]")
    panel.get_by_label("Concurrency", exact=True).fill("3")
    panel.get_by_role("button", name="Save limits of Throttled").click()
    expect(page.get_by_role("status")).to_have_text("Throttled: concurrency 3")
    expect(panel.locator(".override")).to_have_count(1)
    peak = wait_until("three to run at once", lambda: running() == 3 and 3)
    assert peak == 3
    seen = []
    for _ in range(20):  # never more than the new limit
        seen.append(running())
    assert max(seen) <= 3
    page.goto(f"{site.url}/")
    expect(page.locator("#bindings tr[data-binding=Throttled]")).to_contain_text("*")
    wait_until("them all to finish", lambda: all(site.job(j.id).finished for j in jobs), timeout=60)
    site.run(app.reset_limits("Throttled"))


def test_the_job_page_names_the_debounce_window_and_why_an_expired_job_never_ran(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp

    async def setup() -> tuple[Any, Any]:
        debounced = await app.enqueue(d.Quick, {"n": 1}, debounce=3600, debounce_key="user:42")
        lapsing = await app.enqueue(d.Unserved, {}, expires_in=0.5)  # no worker serves it: it cannot start
        return debounced, lapsing

    debounced, lapsing = site.run(setup())
    try:
        page.goto(f"{site.url}/jobs/{debounced.id}")
        reason = page.locator("#why [data-reason=debounce_window]")
        expect(reason).to_contain_text("'user:42'")
        expect(page.locator("#why [data-reason=expires]")).to_have_count(0)
        wait_until("the unserved job to expire", lambda: site.job(lapsing.id).state == "expired")
        page.goto(f"{site.url}/jobs/{lapsing.id}")
        expect(page.locator("#why h2")).to_have_text("Why did it never run?")
        expect(page.locator("#why [data-reason=expired]")).to_contain_text("It never ran")
    finally:
        with contextlib.suppress(JobloomError):
            site.run(app.cancel(debounced.id))
