"""Workers in Chromium: a remote (pull) worker is listed beside the local one once it claims, with its
bindings and the job it runs, and "why is it not running" counts it for its remote binding."""

from __future__ import annotations

from typing import Any

from tests.dashboard.conftest import Site, screenshot, sync_api

expect = sync_api.expect


def test_a_remote_worker_is_listed_and_counted_by_why_not_running(page: Any, site: Site) -> None:
    app, d = site.app, site.dashapp
    first = site.run(app.enqueue(d.PULLED, {"video": 1}))
    page.goto(f"{site.url}/jobs/{first.id}")
    expect(page.locator("#why [data-reason=no_worker]")).to_contain_text("No remote worker")

    claimed = site.run(app.remote_claim("pull-dash-1", ["Pulled"], max=2, wait=60))
    assert [j.id for j in claimed] == [first.id]
    second = site.run(app.enqueue(d.PULLED, {"video": 2}))
    try:
        page.goto(f"{site.url}/workers")
        row = page.locator("#workers tr[data-worker=pull-dash-1]")
        expect(row.locator("[data-remote]")).to_contain_text("remote")
        expect(row).to_contain_text("alive")
        expect(row).to_contain_text("Pulled")
        expect(row.get_by_role("link", name=str(first.id))).to_be_visible()
        expect(page.locator("#workers tbody tr")).to_have_count(2)  # the local worker too
        screenshot(page, site, "workers-remote")

        page.goto(f"{site.url}/jobs/{second.id}")
        expect(page.locator("#why")).to_be_visible()
        expect(page.locator("#why [data-reason=no_worker]")).to_have_count(0)
        page.goto(f"{site.url}/")
        expect(page.locator("#bindings tr[data-binding=Pulled] td").last).to_have_text("1")
    finally:
        site.run(app.remote_complete("pull-dash-1", first.id, 1, "succeeded", result={"ok": True},
                                     claim=claimed[0].claim))
        site.run(app.cancel(second.id))
        site.run(_forget(app, "pull-dash-1"))  # the other tests count the workers alive: one, the local one


async def _forget(app: Any, name: str) -> None:
    from jobloom.engine import registry

    async def work(tx: Any) -> None:
        await registry.forget(tx, name)

    await (await app.store()).transact(work)
