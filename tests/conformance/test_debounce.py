"""Debounce: enqueues of one key within the window collapse into one job, run with the latest payload
once the window passes without another (at the latest debounce_max after the first)."""

from __future__ import annotations

from typing import Any

import pytest

import jobloom
from jobloom.testing import TestClock


class Sync(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    """Returns its payload: the result says which payload the one run saw."""

    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        return payload


@pytest.fixture
async def clocked(store_url: str):
    clock = TestClock()
    app = jobloom.App(store_url, performers=[Sync], auto_migrate=True, clock=clock)
    yield app, clock
    await app.close()


async def test_enqueues_in_the_window_collapse_into_one_job_with_the_latest_payload(clocked: Any) -> None:
    app, clock = clocked
    first = await app.enqueue(Sync, {"n": 1}, debounce=10, debounce_key="user:42")
    assert first.state == "scheduled"
    await clock.advance(6)  # inside the window: the next enqueue moves it on to 6 + 10
    second = await app.enqueue(Sync, {"n": 2}, debounce=10, debounce_key="user:42")
    other = await app.enqueue(Sync, {"n": 9}, debounce=10, debounce_key="user:7")  # another key: its own job
    assert second.id == first.id and second.payload == {"n": 2} and other.id != first.id
    await clock.advance(9)  # 15 s after the first enqueue, 9 after the last: not yet
    assert (await app.get_job(first.id)).state == "scheduled"
    await clock.advance(1)  # the window passed with no new enqueue: it runs, once, with the latest payload
    done = await app.get_job(first.id)
    assert (done.state, done.result, done.attempt) == ("succeeded", {"n": 2}, 1)
    assert len(await app.list_jobs(binding="Sync")) == 2


async def test_an_enqueue_after_the_window_starts_a_new_job(clocked: Any) -> None:
    app, clock = clocked
    first = await app.enqueue(Sync, {"n": 1}, debounce=5, debounce_key="k")
    await clock.advance(5)
    assert (await app.get_job(first.id)).state == "succeeded"
    again = await app.enqueue(Sync, {"n": 2}, debounce=5, debounce_key="k")
    assert again.id != first.id and again.state == "scheduled"


async def test_debounce_max_runs_it_under_a_steady_stream(clocked: Any) -> None:
    app, clock = clocked
    ids = set()
    for n in range(5):  # every 3 s, a 5 s window: without debounce_max it would never run
        job = await app.enqueue(Sync, {"n": n}, debounce=5, debounce_key="k", debounce_max=10)
        ids.add(job.id)
        await clock.advance(3)
    first, *later = sorted(ids)
    done = await app.get_job(first)
    # enqueued at 0, 3, 6, 9 (then 9 + 5 capped at 0 + 10), run at 10 with the payload of 9; 12 starts anew
    assert (done.state, done.result) == ("succeeded", {"n": 3})
    assert len(later) == 1 and (await app.get_job(later[0])).payload == {"n": 4}


async def test_enqueue_many_collapses_within_one_transaction(clocked: Any) -> None:
    app, clock = clocked
    jobs = await app.enqueue_many([
        jobloom.EnqueueRequest(Sync, {"n": n}, jobloom.EnqueueOptions(debounce=5, debounce_key="k"))
        for n in range(3)
    ])
    assert len({j.id for j in jobs}) == 1 and jobs[-1].payload == {"n": 2}
    await clock.advance(5)
    assert (await app.get_job(jobs[0].id)).result == {"n": 2}


@pytest.mark.parametrize(("options", "field", "says"), [
    ({"debounce": 5}, "debounce_key", "a key with debounce="),
    ({"debounce_key": "k"}, "debounce", "with debounce_key='k'"),
    ({"debounce": -1, "debounce_key": "k"}, "debounce", "seconds >= 0"),
    ({"debounce": 5, "debounce_key": "k", "delay": 3}, "debounce", "not both"),
    ({"debounce": 5, "debounce_key": "k", "unique_key": "u"}, "debounce_key", "not both"),
    ({"debounce_max": 5}, "debounce_max", "only with debounce="),
    ({"debounce": 5, "debounce_key": "k", "debounce_max": -2}, "debounce_max", "seconds >= 0"),
])
async def test_bad_debounce_options_name_field_value_and_binding(
    clocked: Any, options: dict[str, Any], field: str, says: str
) -> None:
    app, _ = clocked
    with pytest.raises(jobloom.InvalidOption) as caught:
        await app.enqueue(Sync, {}, **options)
    assert caught.value.option == field and says in str(caught.value) and "Sync" in str(caught.value)
    assert await app.list_jobs() == []


async def test_why_not_running_names_the_debounce_window(clocked: Any) -> None:
    from jobloom.app.diagnose import why_not_running

    app, clock = clocked
    job = await app.enqueue(Sync, {"n": 1}, debounce=10, debounce_key="user:42")
    d = await why_not_running(app, job.id)
    assert d.codes[0] == "debounce_window" and "'user:42'" in d.reasons[0].text
    assert d.reasons[0].until is not None and d.reasons[0].until.timestamp() == pytest.approx(job.run_ts)
    await clock.advance(4)
    await app.enqueue(Sync, {"n": 2}, debounce=10, debounce_key="user:42")  # the window moves on
    moved = (await why_not_running(app, job.id)).reasons[0]
    assert moved.until is not None and moved.until.timestamp() == pytest.approx(job.run_ts + 4)
