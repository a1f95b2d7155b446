"""Tags, metadata and search on every store: what is stored, each filter against a model, pages that
stay right while jobs are inserted, and the plans (every common filter is read through an index)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jobloom
from jobloom.app.search import decode_cursor, encode_cursor
from jobloom.core.states import ALL_STATES
from jobloom.core.text import MAX_ID, MAX_META_BYTES

from .search_support import Row, plan, seed, seed_sql


class SendMail(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[jobloom.App]:
    app = jobloom.App(store_url, performers=[SendMail], auto_migrate=True)
    await app.migrate()
    yield app
    await app.close()


# -- tags and meta ------------------------------------------------------------------------------------


async def test_tags_and_meta_are_stored_and_read_back(app: jobloom.App) -> None:
    job = await app.enqueue(SendMail, {}, tags=["tenant:42", "import", "tenant:42"], meta={"request_id": "r-1"})
    assert job.tags == ["tenant:42", "import"] and job.meta == {"request_id": "r-1"}  # duplicates dropped
    stored = await app.get_job(job.id)
    assert stored.tags == ["tenant:42", "import"] and stored.meta == {"request_id": "r-1"}
    plain = await app.enqueue(SendMail, {})
    assert (await app.get_job(plain.id)).tags == [] and (await app.get_job(plain.id)).meta == {}
    many = await app.enqueue_many([
        jobloom.EnqueueRequest(SendMail, {}, jobloom.EnqueueOptions(tags=["bulk"], meta={"n": i})) for i in range(3)
    ] + [(SendMail, {})])
    assert [(await app.get_job(j.id)).meta for j in many] == [{"n": 0}, {"n": 1}, {"n": 2}, {}]
    assert sorted(j.id for j in await app.list_jobs(tags=["bulk"])) == sorted(j.id for j in many[:3])
    unique = await app.enqueue(SendMail, {}, unique_key="u", tags=["u"])
    assert [j.id for j in await app.list_jobs(tags=["u"])] == [unique.id]


@pytest.mark.parametrize(("options", "message"), [
    ({"tags": "import"}, "not a single string"),
    ({"tags": ["a"] * 1 + [str(i) for i in range(16)]}, "at most 16 tags (it has 17)"),
    ({"tags": ["x" * 65]}, "at most 64 characters (it has 65)"),
    ({"tags": [""]}, "each tag a non-empty string"),
    ({"tags": ["a\x00b"]}, "without control characters"),
    ({"tags": [3]}, "each tag a string"),
    ({"meta": ["not", "a", "dict"]}, "a dict of JSON data with string keys"),
    ({"meta": {"x": float("nan")}}, "NaN"),
    ({"meta": {"x": "y" * MAX_META_BYTES}}, f"at most {MAX_META_BYTES} bytes as JSON"),
])
async def test_bad_tags_and_meta_are_refused_naming_the_problem(
    app: jobloom.App, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(jobloom.InvalidOption, match="tags|meta") as err:
        await app.enqueue(SendMail, {}, **options)
    assert message in str(err.value) and "SendMail" in str(err.value)
    assert await app.list_jobs() == []


async def test_flow_nodes_and_schedules_carry_tags(store_url: str) -> None:
    flow = jobloom.Flow("tagged")
    flow.node("mail", SendMail, tags=["flow"], meta={"k": 1})
    schedule = jobloom.Schedule("nightly", every=3600, performer=SendMail, payload={}, tags=["cron"], meta={"s": 1})
    with pytest.raises(jobloom.InvalidOption, match="at most 64 characters"):
        jobloom.Flow("bad").node("mail", SendMail, tags=["x" * 65])
    with pytest.raises(jobloom.InvalidOption, match="tags"):
        jobloom.Schedule("bad", every=60, performer=SendMail, payload={}, tags="cron")
    app = jobloom.App(store_url, performers=[SendMail], flows=[flow], schedules=[schedule], auto_migrate=True)
    try:
        run = await app.start(flow, {}, id="r1")
        [node_job] = await app.list_jobs(tags=["flow"])
        assert node_job.id == run.nodes["mail"].job_id and node_job.meta == {"k": 1}
        ticked = await app.trigger_schedule("nightly")
        [cron_job] = await app.list_jobs(tags=["cron"])
        assert cron_job.id == ticked.id and cron_job.meta == {"s": 1}
        stored = jobloom.Schedule("runtime", every=60, performer="SendMail", payload={}, tags=["rt"])
        await app.add_schedule(stored)
        [info] = [s for s in await app.list_schedules() if s.name == "runtime"]
        assert (await app.trigger_schedule("runtime")).tags == ["rt"]
        assert info.name == "runtime"
    finally:
        await app.close()


# -- search filters -----------------------------------------------------------------------------------

BINDINGS = ("A", "B")
TAGS = ("t1", "t2", "t3")


def matches(r: Row, f: dict[str, Any]) -> bool:
    """The model: whether seeded row ``r`` matches the list_jobs keywords ``f``."""
    states = f.get("state")
    if states is not None and r.state not in ([states] if isinstance(states, str) else states):
        return False
    return ((f.get("binding") is None or r.binding == f["binding"])
            and all(t in r.tags for t in f.get("tags") or ())
            and (f.get("unique_key") is None or r.unique_key == f["unique_key"])
            and (f.get("text") is None or (r.error is not None and f["text"] in r.error))
            and (f.get("created_after") is None or r.created_at >= f["created_after"])
            and (f.get("created_before") is None or r.created_at < f["created_before"]))


rows_st = st.builds(
    Row, binding=st.sampled_from(BINDINGS), state=st.sampled_from(ALL_STATES),
    tags=st.lists(st.sampled_from(TAGS), max_size=2, unique=True).map(tuple),
    error=st.sampled_from([None, "boom: disk", "other"]), created_at=st.integers(0, 9).map(float),
    unique_key=st.sampled_from([None, "k1", "k2"]),
)
filters_st = st.fixed_dictionaries({}, optional={
    "state": st.one_of(st.sampled_from(ALL_STATES), st.lists(st.sampled_from(ALL_STATES), min_size=1, max_size=3)),
    "binding": st.sampled_from(BINDINGS),
    "tags": st.lists(st.sampled_from(TAGS), min_size=1, max_size=2, unique=True),
    "unique_key": st.just("k1"),
    "text": st.sampled_from(["boom", "disk", "zzz"]),
    "created_after": st.integers(0, 9).map(float),
    "created_before": st.integers(0, 9).map(float),
})


async def page_through(app: jobloom.App, f: dict[str, Any], limit: int,
                       between: list[list[Row]], store_url: str) -> tuple[list[int], list[int]]:
    """Every page of a search, seeding a batch of rows before each next page; (listed ids, inserted ids)."""
    listed: list[int] = []
    inserted: list[int] = []
    cursor = None
    for i in range(10_000):
        page = await app.list_jobs(**f, limit=limit, cursor=cursor)
        assert len(page) <= limit
        listed += [j.id for j in page]
        if page.next_cursor is None:
            return listed, inserted
        cursor = page.next_cursor
        if i < len(between):
            inserted += await asyncio.to_thread(seed, store_url, between[i])
    raise AssertionError("the pages never ended")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(rows_st, max_size=40), f=filters_st, limit=st.integers(1, 7),
       between=st.lists(st.lists(rows_st, min_size=1, max_size=5), max_size=4))
def test_pages_list_every_match_once_while_jobs_are_inserted(
    store_url: str, rows: list[Row], f: dict[str, Any], limit: int, between: list[list[Row]]
) -> None:
    async def go() -> None:
        app = jobloom.App(store_url, performers=[SendMail], auto_migrate=True)
        try:
            await app.migrate()
            ids = await asyncio.to_thread(seed, store_url, rows, wipe=True)
            listed, inserted = await page_through(app, f, limit, between, store_url)
            want = [i for i, r in sorted(zip(ids, rows, strict=True), reverse=True) if matches(r, f)]
            assert listed == sorted(set(listed), reverse=True), "pages overlap or are out of order"
            # inserted jobs get higher ids than any listed: no later page shows them
            assert listed == want, (f, limit)
            assert not set(inserted) & set(listed)
        finally:
            await app.close()

    asyncio.run(go())


async def test_a_page_stays_right_while_another_app_inserts(store_url: str) -> None:
    """Pages read while another connection keeps inserting matching jobs: each job that existed before
    the first page is listed once, newest first, and nothing inserted meanwhile is."""
    app = jobloom.App(store_url, performers=[SendMail], auto_migrate=True)
    other = jobloom.App(store_url, performers=[SendMail], auto_migrate=True)
    try:
        before = [j.id for j in await app.enqueue_many([
            jobloom.EnqueueRequest(SendMail, {"i": i}, jobloom.EnqueueOptions(tags=["t"])) for i in range(60)])]
        stop = asyncio.Event()
        added: list[int] = []

        async def insert() -> None:
            while not stop.is_set():
                added.append((await other.enqueue(SendMail, {}, tags=["t"])).id)
                await asyncio.sleep(0)

        task = asyncio.create_task(insert())
        listed: list[int] = []
        cursor = None
        while True:
            page = await app.list_jobs(tags=["t"], state="queued", limit=7, cursor=cursor)
            listed += [j.id for j in page]
            await asyncio.sleep(0.005)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        stop.set()
        await task
        assert added, "nothing was inserted meanwhile"
        first = max(before)
        assert [i for i in listed if i <= first] == sorted(before, reverse=True)
        assert listed == sorted(set(listed), reverse=True)
    finally:
        await app.close()
        await other.close()


async def test_cursors_are_opaque_and_checked(app: jobloom.App) -> None:
    assert decode_cursor(encode_cursor(12345)) == 12345
    for bad in ("12", "j1.!!", "j1.", 3):
        with pytest.raises(jobloom.InvalidOption, match="cursor"):
            await app.list_jobs(cursor=bad)  # type: ignore[arg-type]
    with pytest.raises(jobloom.InvalidOption, match="either cursor or before"):
        await app.list_jobs(cursor=encode_cursor(5), before=3)
    with pytest.raises(jobloom.InvalidOption, match="state"):
        await app.list_jobs(state=["failed", "done"])
    with pytest.raises(jobloom.InvalidOption, match="created_after"):
        await app.list_jobs(created_after=datetime(2026, 1, 1))  # naive
    assert decode_cursor(encode_cursor(MAX_ID + 5)) == MAX_ID
    page = await app.list_jobs(created_after=datetime(2026, 1, 1, tzinfo=UTC))
    assert page.jobs == [] and page.next_cursor is None


# -- plans --------------------------------------------------------------------------------------------

HISTORY = 20_000
SEED = f"""
INSERT INTO jobloom_jobs (binding, state, payload, run_at, max_attempts, delivery, created_at, finished_at)
SELECT 'B' || (i % 5), 'succeeded', '{{}}', 0, 1, 'at_least_once', i, i
FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {HISTORY}) SELECT i FROM n) s;
INSERT INTO jobloom_jobs (binding, state, payload, run_at, max_attempts, delivery, created_at, finished_at, error,
                          unique_key, tags)
SELECT 'B' || (i % 5), CASE i % 4 WHEN 0 THEN 'failed' WHEN 1 THEN 'queued' WHEN 2 THEN 'scheduled' ELSE 'running' END,
       '{{}}', 0, 1, 'at_least_once', i, NULL, 'boom', 'k' || i, '["rare"]'
FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200) SELECT i FROM n) s;
INSERT INTO jobloom_job_tags (tag, job_id) SELECT 'rare', id FROM jobloom_jobs WHERE tags IS NOT NULL;
INSERT INTO jobloom_jobs (binding, state, payload, run_at, max_attempts, delivery, created_at, finished_at, error)
SELECT 'F', 'failed', '{{}}', 0, 1, 'at_least_once', i, i, 'boom'
FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000) SELECT i FROM n) s;
"""
NONE = {"states": None, "binding": None, "unique_key": None, "text": None, "created_after": None,
        "created_before": None, "tags": None, "payload_text": None, "before": MAX_ID, "limit": 51}
# (query, parameters, the index that must drive it: one of "|"-separated names)
PLANS = [
    ("search_tagged", {"tag": "rare", "tags": ["rare"], "text": "boom"}, "jobloom_job_tags"),
    ("search_unique", {"binding": "B1", "unique_key": "k1"}, "jobloom_jobs_unique"),
    ("search_counted", {"state": "failed", "binding": "B0"}, "jobloom_jobs_counted"),
    ("search_queued", {"state": "queued", "binding": "B1"}, "jobloom_jobs_queued"),
    ("search_scheduled", {"state": "scheduled"}, "jobloom_jobs_scheduled"),
    ("search_running", {"state": "running", "binding": "B3"}, "jobloom_jobs_running|jobloom_jobs_leases"),
    ("search_bindings_counted", {"state": "failed"}, "jobloom_jobs_counted"),
    ("search_bindings_queued", {}, "jobloom_jobs_queued"),
]


async def test_searches_read_indexes_not_the_history(store_url: str) -> None:
    app = jobloom.App(store_url, auto_migrate=True)
    await app.migrate()
    await app.close()
    await asyncio.to_thread(seed_sql, store_url, SEED)
    for name, params, index in PLANS:
        steps = await asyncio.to_thread(plan, store_url, name, NONE | params)
        if store_url.startswith("sqlite:"):
            scans = [s for s in steps.splitlines() if " j" in s + " " or "jobloom_jobs" in s]
            assert not any(s.startswith(("SCAN j", "SCAN jobloom_jobs")) and "INDEX" not in s for s in scans), steps
        else:
            assert "Seq Scan on jobloom_jobs" not in steps, (name, steps)
        if name == "search_tagged" and store_url.startswith("sqlite:"):
            index = "SEARCH g USING PRIMARY KEY (tag=? AND job_id<?)"  # the WITHOUT ROWID table's key
        assert any(i in steps for i in index.split("|")), (name, steps)  # either partial index of the state
    # the counted index is walked in id order from the cursor: no sort of a binding's 5,000 failed jobs
    counted = await asyncio.to_thread(plan, store_url, "search_counted", NONE | {"state": "failed", "binding": "F"})
    assert "Sort" not in counted and "TEMP B-TREE" not in counted, counted
    tagged = await asyncio.to_thread(plan, store_url, "search_tagged", NONE | PLANS[0][1])
    assert "Sort" not in tagged and "TEMP B-TREE" not in tagged, tagged


async def test_search_picks_the_indexed_query_for_each_filter(store_url: str) -> None:
    app = jobloom.App(store_url, auto_migrate=True)
    await app.migrate()
    await asyncio.to_thread(seed_sql, store_url, SEED)
    store = await app.store()
    names: list[str] = []
    transact = store.transact

    class Recording:
        def __init__(self, tx: Any) -> None:
            self.tx = tx

        async def fetch(self, name: Any, params: Any = None) -> Any:
            names.append(getattr(name, "name", name))
            return await self.tx.fetch(name, params)

        async def fetch_batch(self, queries: Any) -> Any:
            names.extend(getattr(n, "name", n) for n, _ in queries)
            return await self.tx.fetch_batch(queries)

        async def execute(self, name: str, params: Any = None) -> Any:  # search_in_id_order: a setting
            return await self.tx.execute(name, params)

    store.transact = lambda fn, **kw: transact(lambda tx: fn(Recording(tx)), **kw)  # type: ignore[method-assign]
    try:
        cases: list[tuple[dict[str, Any], set[str]]] = [
            ({"tags": ["rare"], "state": "failed"}, {"search_tagged"}),
            ({"binding": "B1", "unique_key": "k1"}, {"search_unique"}),
            ({"state": "failed", "binding": "B0"}, {"search_counted"}),
            ({"state": "failed"}, {"search_bindings_counted", "search_counted"}),
            ({"state": ["queued", "scheduled"]}, {"search_bindings_queued", "search_queued", "search_scheduled"}),
            ({"state": "succeeded", "binding": "B0"}, {"top_job_id", "search_all"}),
        ]
        for f, want in cases:
            names.clear()
            page = await app.list_jobs(**f, limit=10)
            assert set(names) == want, (f, names)
            assert len(page) == (1 if "unique_key" in f else 10)
            assert all(j.state in ([f["state"]] if isinstance(f.get("state"), str) else f.get("state", ALL_STATES))
                       for j in page)
    finally:
        store.transact = transact  # type: ignore[method-assign]
        await app.close()


async def test_deleting_a_job_deletes_its_tags(app: jobloom.App, store_url: str) -> None:
    ids = await asyncio.to_thread(seed, store_url, [Row("A", "failed", ("x",)), Row("A", "failed", ("x",)),
                                                    Row("A", "queued")])
    assert await app.delete_many(jobloom.JobFilter(tags=["x"])) == 2
    assert await app.list_jobs(tags=["x"]) == []
    kept = await asyncio.to_thread(seed, store_url, [Row("A", "failed", ("x",))])
    assert [j.id for j in await app.list_jobs(tags=["x"])] == kept  # no tag row of a deleted job is left
    assert [j.id for j in await app.list_jobs(state="queued")] == [ids[2]]
    assert json.loads((await app.get_job(kept[0])).tags_json or "[]") == ["x"]
