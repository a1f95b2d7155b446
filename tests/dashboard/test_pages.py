"""Every page of the dashboard renders with data in Chromium (a screenshot of each goes to
docs/screenshots/), the overview follows a job without a reload, and a run's DAG shows its nodes."""

from __future__ import annotations

import re
from typing import Any

from tests.dashboard.conftest import Site, screenshot, sync_api, wait_until

expect = sync_api.expect


def seed(site: Site) -> dict[str, Any]:
    """Jobs in several states, a finished run, steps, and a fired schedule."""
    app, d = site.app, site.dashapp

    async def work() -> dict[str, Any]:
        done = [await app.enqueue(d.Quick, {"n": i, "steps": i == 0}) for i in range(5)]
        failed = await app.enqueue(d.Flaky, {"n": 0})
        later = await app.enqueue(d.Quick, {"n": 9}, delay=3600, unique_key="later-9")
        run = await app.start(d.pipeline, {}, id="pages-run")
        for job in [*done, failed]:
            await app.wait(job.id, timeout=30)
        await app.trigger_schedule("hourly-digest")
        return {"done": done, "failed": failed, "later": later, "run": run}

    return site.run(work())


def test_each_page_renders_with_data(page: Any, site: Site) -> None:
    errors: list[str] = []  # a script error or a blocked resource (the pages' CSP) shows up here
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    made = seed(site)
    wait_until("the run to finish", lambda: site.run(site.app.get_run("pages-run")).state == "succeeded")
    wait_until("the read model to count them", lambda: site.run(site.app.stats()).total.succeeded >= 5)

    failed = site.run(site.app.counts())["Flaky"]["failed"]  # other tests of this server fail some too
    page.goto(f"{site.url}/")
    expect(page.locator("#bindings tr[data-binding=Quick]")).to_be_visible()
    expect(page.locator("#bindings tr[data-binding=Flaky] td[data-state=failed]")).to_have_text(str(failed))
    expect(page.locator("[data-workers-alive]")).to_have_text("1")
    expect(page.locator("[data-chart=throughput] canvas")).to_have_count(1)  # uPlot drew it
    screenshot(page, site, "overview")

    page.get_by_role("link", name="Jobs", exact=True).click()
    expect(page.locator("#jobs tbody tr")).not_to_have_count(0)
    expect(page.locator(f"#jobs tr[data-job='{made['failed'].id}']")).to_contain_text("failed")
    screenshot(page, site, "jobs")

    page.goto(f"{site.url}/jobs/{made['failed'].id}")
    expect(page.locator("#error")).to_contain_text("upstream said no")
    page.locator("#attempts summary").first.click()
    expect(page.locator("#attempts pre")).to_contain_text("Traceback")
    expect(page.locator("#timeline")).to_contain_text("attempt 1 failed")
    screenshot(page, site, "job-failed")

    page.goto(f"{site.url}/jobs/{made['done'][0].id}")
    expect(page.locator("#result")).to_have_text("0")
    expect(page.locator("#steps")).to_contain_text("fetch")
    expect(page.locator("#payload")).to_contain_text('"steps": true')

    page.goto(f"{site.url}/runs")
    expect(page.locator("#runs tr[data-run=pages-run]")).to_contain_text("succeeded")
    screenshot(page, site, "runs")
    page.locator("#runs a", has_text="pages-run").click()
    expect(page.locator("#run-state")).to_have_text("succeeded")
    expect(page.locator("#nodes tbody tr")).to_have_count(3)  # fetch, resize, publish
    expect(page.locator("[data-children=resize]")).to_contain_text("3 children")  # counted, listed on demand
    expect(page.locator("#run-counts [data-count=succeeded]")).to_contain_text("6")
    expect(page.locator("#run-result")).to_have_text("3")  # publish's result: the children that succeeded
    screenshot(page, site, "run")

    page.goto(f"{site.url}/schedules")
    row = page.locator("#schedules tr[data-schedule=hourly-digest]")
    expect(row).to_contain_text("Europe/Berlin")
    expect(row.locator("td[data-next]")).to_contain_text(re.compile(r"Europe/Berlin \(UTC[+-]\d{4}\)"))
    fired = next(s for s in site.run(site.app.list_schedules()) if s.name == "hourly-digest").fired
    expect(row).to_contain_text(f"{fired} / 0")
    screenshot(page, site, "schedules")

    page.goto(f"{site.url}/limits")
    expect(page.locator("[data-binding=Limited] input[name=concurrency]")).to_have_value("1")
    expect(page.locator("[data-binding=Rated] input[name=rate_limit]")).to_have_value("1/m")
    screenshot(page, site, "limits")

    page.goto(f"{site.url}/workers")
    expect(page.locator("#workers tbody tr")).to_have_count(1)
    expect(page.locator("#workers tbody tr")).to_contain_text("alive")
    expect(page.locator("#workers tbody tr")).to_contain_text("Quick")
    screenshot(page, site, "workers")

    page.set_viewport_size({"width": 800, "height": 900})
    page.goto(f"{site.url}/")
    expect(page.locator("#bindings")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 800 + 1  # no sideways scrolling of the page
    screenshot(page, site, "overview-800px")
    page.emulate_media(color_scheme="dark")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{site.url}/jobs/{made['later'].id}")
    expect(page.locator("#why")).to_be_visible()
    screenshot(page, site, "job-scheduled-dark")
    assert errors == []


def test_the_overview_follows_a_job_from_queued_to_succeeded_without_a_reload(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp
    site.run(app.pause_binding("Shown"))
    site.run(app.enqueue(d.Shown, {}))
    page.goto(f"{site.url}/")
    row = page.locator("#bindings tr[data-binding=Shown]")
    expect(row.locator("td[data-state=queued]")).to_have_text("1")
    page.evaluate("window.stillTheSamePage = true")
    site.run(app.resume_binding("Shown"))
    expect(row.locator("td[data-state=queued]")).to_have_text("0")
    expect(row.locator("td[data-state=succeeded]")).to_have_text("1")  # the read model caught up
    assert page.evaluate("window.stillTheSamePage === true")


def test_a_runs_dag_shows_every_node_with_its_state(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp
    run = site.run(app.start(d.pipeline, {"sleep": 30}, id="dag-run"))
    wait_until("fetch to start", lambda: site.run(app.get_run(run.id)).nodes["fetch"].state == "running")
    page.goto(f"{site.url}/runs/dag-run")
    dag = page.locator("#dag svg")
    for name, state in (("fetch", "running"), ("resize", "waiting"), ("publish", "waiting")):
        node = dag.locator(".dag-node", has_text=name)
        expect(node).to_have_class(re.compile(rf"\bstate-{state}\b"))
    fetch_job = site.run(app.get_run(run.id)).nodes["fetch"].job_id
    expect(dag.locator(f"a[href='/jobs/{fetch_job}']")).to_have_count(1)
    screenshot(page, site, "run-dag")
    page.get_by_role("button", name="Cancel run").click()
    expect(page.get_by_role("status")).to_contain_text("run dag-run is")
    expect(page.locator("#run-state")).to_have_text("cancelled")
    expect(dag.locator(".dag-node", has_text="fetch")).to_have_class(re.compile(r"\bstate-cancelled\b"))
    page.get_by_role("button", name="Resume run").click()
    expect(page.get_by_role("status")).to_contain_text("resumed")
    site.run(app.cancel_run(run.id))
