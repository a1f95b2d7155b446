"""What an operator met on the dashboard and the dashboard now does: a binding's link lists its jobs,
the charts' axes read in UTC and their labels fit, a narrow overview says that its table scrolls, a
job's page shows "Runs at" only while it is due and each attempt's duration, the limits form makes
overrides of changed values only and resets each to the code's, and key concurrency shows only for
keyed bindings."""

from __future__ import annotations

import re
from typing import Any

from tests.dashboard.conftest import Site, sync_api, wait_until

expect = sync_api.expect


def test_a_bindings_link_on_the_overview_lists_its_jobs_finished_ones_too(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp
    job = site.run(app.enqueue(d.Quick, {"n": 5}))
    wait_until("it to succeed", lambda: site.job(job.id).state == "succeeded")
    page.goto(f"{site.url}/")
    page.locator("#bindings tr[data-binding=Quick] th a").click()
    expect(page.locator(f"#jobs tr[data-job='{job.id}']")).to_contain_text("succeeded")
    expect(page.get_by_label("State")).to_have_value("all")

    page.goto(f"{site.url}/jobs?binding=Quick&unique_key=nothing-has-this")  # the default states: a way on
    expect(page.locator("#no-match")).to_contain_text("Only unfinished and failed jobs are listed")
    page.locator("#no-match a").click()
    expect(page.get_by_label("State")).to_have_value("all")


def test_the_charts_axes_are_utc_and_their_labels_fit(page: Any, site: Site) -> None:
    job = site.run(site.app.enqueue(site.dashapp.Quick, {"n": 1}))
    wait_until("it to succeed", lambda: site.job(job.id).state == "succeeded")
    page.goto(f"{site.url}/")
    expect(page.locator("[data-chart=runtimes] canvas")).to_have_count(1)
    for kind in ("throughput", "runtimes"):
        x_labels = page.evaluate(f"window.jobloomCharts.{kind}.axes[0]._values")
        assert x_labels and all(re.fullmatch(r"\d\d:\d\d", v) for v in x_labels), x_labels
        drawn = f"!!(window.jobloomCharts.{kind}.axes[1]._values || []).length"
        wait_until(f"the {kind} chart's y axis", lambda drawn=drawn: page.evaluate(drawn))
        fits = page.evaluate(f"""(() => {{
            const u = window.jobloomCharts.{kind}, axis = u.axes[1];
            const ctx = document.createElement("canvas").getContext("2d");
            ctx.font = axis.font[0];
            const widest = Math.max(0, ...axis._values.map(v => ctx.measureText(String(v)).width));
            return [widest + axis.ticks.size + axis.gap, axis._size, axis._values];
        }})()""")
        assert fits[0] <= fits[1], f"{kind}: y labels {fits[2]} need {fits[0]} px, the axis has {fits[1]}"


def test_a_narrow_overview_says_that_its_table_scrolls(page: Any, site: Site) -> None:
    page.set_viewport_size({"width": 420, "height": 800})  # a phone
    page.goto(f"{site.url}/")
    hint = page.locator("#overview-live .scroll-hint")
    expect(hint).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 420 + 1  # the table scrolls, not the page
    page.set_viewport_size({"width": 800, "height": 900})
    page.goto(f"{site.url}/")
    expect(page.locator("#bindings")).to_be_visible()
    over = page.evaluate("(e => e.scrollWidth > e.clientWidth + 1)(document.querySelector('[data-scroll]'))")
    expect(hint).to_be_visible() if over else expect(hint).to_be_hidden()
    assert page.evaluate("document.documentElement.scrollWidth") <= 800 + 1


def test_a_jobs_page_shows_runs_at_only_while_due_and_each_attempts_duration(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp
    later = site.run(app.enqueue(d.Quick, {"n": 1}, delay=3600))
    done = site.run(app.enqueue(d.Quick, {"n": 1, "sleep": 0.2}))
    wait_until("it to succeed", lambda: site.job(done.id).state == "succeeded")
    page.goto(f"{site.url}/jobs/{later.id}")
    expect(page.locator("#job-live dl.facts")).to_contain_text("Runs at")
    page.goto(f"{site.url}/jobs/{done.id}")
    expect(page.locator("#job-live dl.facts")).not_to_contain_text("Runs at")
    cell = page.locator("#attempts tr[data-attempt='1'] td[data-duration]")
    expect(cell).to_have_text(re.compile(r"^\d+(\.\d+)? (ms|s)$"))
    seconds = float(cell.inner_text().split()[0]) / (1000 if cell.inner_text().endswith("ms") else 1)
    assert seconds >= 0.2  # it slept 0.2 s


def test_limits_override_only_the_changed_value_and_reset_each_to_the_code(page: Any, site: Site) -> None:
    app = site.app

    def overridden() -> tuple[str, ...]:
        return next(b for b in site.run(app.list_bindings()) if b.binding == "Rated").overridden

    keyed = site.run(app.enqueue(site.dashapp.Keyed, {"sleep": 30}, concurrency_key="limits-k"))
    wait_until("the keyed job to run", lambda: site.job(keyed.id).state == "running")
    page.goto(f"{site.url}/limits")
    expect(page.locator("[data-binding=Quick] input[name=key_concurrency]")).to_have_count(0)  # no key
    expect(page.locator("[data-binding=Keyed] input[name=key_concurrency]")).to_have_value("1")  # jobs with keys run
    site.run(app.cancel(keyed.id))
    panel = page.locator("[data-binding=Rated]")
    panel.get_by_label("Rate limit").fill("5/s")
    panel.get_by_role("button", name="Save limits of Rated").click()
    expect(page.get_by_role("status")).to_have_text("Rated: rate_limit 5/s")
    assert overridden() == ("rate_limit",)
    expect(panel.locator(".override")).to_have_count(1)
    panel.get_by_role("button", name="Save limits of Rated").click()  # nothing changed: nothing pinned
    expect(page.get_by_role("status")).to_have_text("Rated: nothing changed")
    assert overridden() == ("rate_limit",)
    panel.get_by_role("button", name="Reset rate limit to code (1/m)").click()
    expect(page.get_by_role("status")).to_have_text("Rated: rate_limit reset to the code's value")
    assert overridden() == ()
    expect(panel.get_by_label("Rate limit")).to_have_value("1/m")
    expect(panel.locator(".override")).to_have_count(0)
