"""A search that no index narrows reads a bounded slice of ids per page, on every store: its pages
end where the reading stopped (fewer jobs than asked, maybe none) and following their cursors still
lists every match once, newest first."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import jobloom
from jobloom.app import search


class Often(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Rare(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[jobloom.App]:
    app = jobloom.App(store_url, performers=[Often, Rare], auto_migrate=True)
    yield app
    await app.close()


async def _all_pages(app: jobloom.App, **filters: Any) -> list[list[int]]:
    pages, cursor = [], None
    while True:
        page = await app.list_jobs(limit=3, cursor=cursor, **filters)
        pages.append([j.id for j in page])
        cursor = page.next_cursor
        if cursor is None:
            return pages


async def test_a_page_reads_at_most_the_budget_and_the_cursor_goes_on(app: jobloom.App,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "SCAN_BUDGET", 10)
    jobs = []
    for i in range(40):
        jobs.append(await app.enqueue(Rare if i in (2, 5, 6, 7, 25) else Often, {"i": i}))
    rare = sorted((j.id for j in jobs if j.binding == "Rare"), reverse=True)
    pages = await _all_pages(app, binding="Rare")
    assert [i for p in pages for i in p] == rare  # every match once, newest first
    top = jobs[-1].id
    # the first page read ids top-9..top only: none of them is Rare, so it is empty, with a cursor
    assert pages[0] == [] and len(pages) >= 4
    first = await app.list_jobs(binding="Rare", limit=3)
    assert search.decode_cursor(first.next_cursor) == top + 1 - 10
    assert all(len(p) <= 3 for p in pages)


async def test_a_full_page_ends_at_its_last_job_and_indexed_filters_have_no_budget(
        app: jobloom.App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "SCAN_BUDGET", 10)
    jobs = [await app.enqueue(Often, {"i": i}) for i in range(30)]
    page = await app.list_jobs(binding="Often", limit=3)
    assert [j.id for j in page] == [j.id for j in jobs[::-1][:3]]
    assert search.decode_cursor(page.next_cursor) == jobs[-3].id
    queued = await app.list_jobs("queued", limit=100)  # the queued index: read whole, however far
    assert len(queued) == 30 and queued.next_cursor is None
    everything = await _all_pages(app)
    assert [i for p in everything for i in p] == [j.id for j in jobs[::-1]]


async def test_an_empty_store_has_one_empty_page(app: jobloom.App) -> None:
    page = await app.list_jobs(text="anything")
    assert list(page) == [] and page.next_cursor is None
