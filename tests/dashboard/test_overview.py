"""The overview in Chromium: each binding's queue latency (the age of its oldest runnable job) and
throughput, and the charts of the last hour, day and week read from the read model."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.dashboard.conftest import Site, screenshot, sync_api, wait_until

expect = sync_api.expect
DURATION = re.compile(r"^\d+(\.\d+)? (ms|s)$|^\d+ min \d+ s$")


def test_queue_latency_and_throughput_per_binding(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp
    site.run(app.pause_binding("Latent"))
    try:
        held = site.run(app.enqueue(d.Latent, {}))
        page.goto(f"{site.url}/")
        row = page.locator("#bindings tr[data-binding=Latent]")
        expect(row.locator("td[data-latency]")).to_have_text(DURATION)
        expect(page.locator("[data-total=latency]")).to_have_text(DURATION)
        expect(page.locator("[data-total=latency] + .label")).to_contain_text("longest queue wait (")  # a binding
    finally:
        site.run(app.resume_binding("Latent"))
    wait_until("the held job to succeed", lambda: site.job(held.id).state == "succeeded")
    expect(row.locator("td[data-latency]")).to_have_text("—")  # nothing waits now: live, without a reload
    expect(row.locator("td[data-throughput]")).not_to_have_text("0")  # the read model counted it


def test_charts_of_the_last_day_and_week_read_the_hourly_rows(page: Any, site: Site) -> None:
    job = site.run(site.app.enqueue(site.dashapp.Quick, {"n": 1}))
    wait_until("it to succeed", lambda: site.job(job.id).state == "succeeded")
    wait_until("the read model to count it", lambda: site.run(site.app.stats()).pending_events == 0)
    for window, title, points in (("24h", "Last 24 hours", 25), ("7d", "Last 7 days", 169)):
        page.goto(f"{site.url}/")
        page.get_by_role("navigation", name="Chart window").get_by_role("link", name=window).click()
        expect(page.locator("#chart-title")).to_contain_text(title)
        expect(page.locator("[data-chart=throughput] canvas")).to_have_count(1)
        data = json.loads(page.locator("#chart-data").text_content() or "{}")
        assert data["per"] == "hour" and len(data["x"]) in (points, points - 1)
        assert all(b - a == 3600 for a, b in zip(data["x"], data["x"][1:], strict=False))
        assert sum(data["succeeded"]) >= 1
        labels = page.evaluate("window.jobloomCharts.throughput.axes[0]._values")
        assert labels and all(re.fullmatch(r"\d\d-\d\d \d\d:\d\d", v) for v in labels), labels
        if window == "7d":
            screenshot(page, site, "overview-7d")
    page.get_by_role("navigation", name="Chart window").get_by_role("link", name="1h").click()
    expect(page.locator("#chart-title")).to_contain_text("Last hour")
