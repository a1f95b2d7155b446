"""A run's page in Chromium: its result, duration and jobs per state, a fan-out of 250 children counted
by state and listed a page at a time, and why a run whose fan-out had failed children succeeded."""

from __future__ import annotations

import re
from typing import Any

from tests.dashboard.conftest import Site, screenshot, sync_api, wait_until

expect = sync_api.expect


def test_a_large_fan_out_is_summarised_paged_and_its_failed_children_explained(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp
    run = site.run(app.start(d.fanout, {"n": 250}, id="fan-250"))
    wait_until("the run to finish", lambda: site.run(app.get_run(run.id)).state == "succeeded", timeout=120)

    page.goto(f"{site.url}/runs")
    row = page.locator("#runs tr[data-run=fan-250]")
    expect(row.locator("td[data-counts]")).to_contain_text("248 succeeded, 5 failed")  # 245 children and 3 nodes
    expect(row.locator("td[data-duration]")).to_have_text(re.compile(r"^\d"))

    page.goto(f"{site.url}/runs/fan-250")
    expect(page.locator("#run-state")).to_have_text("succeeded")
    expect(page.locator("#nodes tbody tr")).to_have_count(3)  # count, each, tally: not 250 rows
    group = page.locator("[data-children=each]")
    expect(group).to_contain_text("250 children")
    expect(group).to_contain_text("245 succeeded, 5 failed")
    expect(page.locator("#fanout-rule")).to_contain_text("each: 5 of 250 children did not succeed")
    expect(page.locator("#fanout-rule")).to_contain_text("whatever their outcomes")
    expect(page.locator("#run-result")).to_have_text("5")  # tally: the failed children it was told of
    expect(page.locator("#run-counts [data-count=failed]")).to_contain_text("5")
    expect(page.locator("#run-live [data-duration]")).to_have_text(re.compile(r"^\d"))
    screenshot(page, site, "run-fanout")

    group.get_by_role("link", name="List them").click()
    children = page.locator("[data-children=each] table.children tbody tr")
    expect(children).to_have_count(100)
    expect(page.locator("[data-children=each] .pager")).to_contain_text("page 1 of 3")
    page.get_by_role("link", name="Next page").click()
    expect(page.locator("[data-children=each] .pager")).to_contain_text("page 2 of 3")
    page.get_by_role("link", name="Next page").click()
    expect(children).to_have_count(50)
    expect(children.filter(has_text="failed")).to_have_count(1)  # item 207 of the last page
    expect(page.locator("[data-children=each] tr[data-node='each:207']")).to_contain_text("item 207 refused")
