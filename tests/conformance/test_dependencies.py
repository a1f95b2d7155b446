"""Dependencies between jobs: a job enqueued with ``depends_on`` waits until every dependency ended,
then runs (or is skipped when one did not succeed), on both stores."""

from __future__ import annotations

from typing import Any

import pytest

import jobloom

RAN: list[tuple[int, dict[int, tuple[str, Any]]]] = []


class Step(jobloom.Performer[dict[str, Any], Any]):
    """Records its dependencies as it saw them, then fails if asked to."""

    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> Any:
        deps = await self.ctx.dependencies()
        RAN.append((self.ctx.job_id, {i: (j.state, j.result) for i, j in deps.items()}))
        if payload.get("fail"):
            raise jobloom.Permanent("asked to fail")
        return payload.get("value")


class SyncStep(jobloom.Performer[dict[str, Any], Any]):
    """A plain ``def`` that reads its dependencies too."""

    def perform(self, payload: dict[str, Any]) -> Any:
        return sorted(j.result for j in self.ctx.dependencies().values() if j.result is not None)


@pytest.fixture
async def app(store_url: str):
    RAN.clear()
    app = jobloom.App(store_url, performers=[Step, SyncStep], auto_migrate=True)
    yield app
    await app.close()


async def test_a_dependant_waits_until_its_dependencies_succeeded(app: jobloom.App) -> None:
    a = await app.enqueue(Step, {"value": 1})
    b = await app.enqueue(Step, {"value": 2})
    c = await app.enqueue(Step, {"value": 3}, depends_on=[a.id, b.id])
    assert c.state == "waiting"
    assert (await app.get_job(c.id)).state == "waiting"
    assert await app.drain() == 3
    assert [i for i, _ in RAN] == [a.id, b.id, c.id]
    assert RAN[-1][1] == {a.id: ("succeeded", 1), b.id: ("succeeded", 2)}
    assert (await app.get_job(c.id)).state == "succeeded"


async def test_a_failed_dependency_skips_its_dependants_down_the_chain(app: jobloom.App) -> None:
    a = await app.enqueue(Step, {"fail": True})
    b = await app.enqueue(Step, {}, depends_on=[a.id])
    c = await app.enqueue(Step, {}, depends_on=[b.id])
    await app.drain()
    assert [i for i, _ in RAN] == [a.id]
    b_done, c_done = await app.get_job(b.id), await app.get_job(c.id)
    assert b_done.state == c_done.state == "skipped"
    assert b_done.error is not None and f"dependency {a.id} ended failed" in b_done.error
    assert c_done.error is not None and f"dependency {b.id} ended skipped" in c_done.error


async def test_on_dependency_failure_run_runs_once_all_ended(app: jobloom.App) -> None:
    a = await app.enqueue(Step, {"fail": True})
    b = await app.enqueue(Step, {"value": 2})
    c = await app.enqueue(Step, {"value": 3}, depends_on=[a.id, b.id], on_dependency_failure="run")
    await app.drain()
    assert RAN[-1] == (c.id, {a.id: ("failed", None), b.id: ("succeeded", 2)})


async def test_a_cancelled_dependency_skips_its_dependant(app: jobloom.App) -> None:
    a = await app.enqueue(Step, {}, delay=3600)
    b = await app.enqueue(Step, {}, depends_on=[a.id])
    await app.cancel(a.id)
    done = await app.get_job(b.id)
    assert done.state == "skipped" and done.error is not None and "ended cancelled" in done.error


async def test_finished_dependencies_count_as_they_ended(app: jobloom.App) -> None:
    a = await app.enqueue(Step, {"value": 1})
    f = await app.enqueue(Step, {"fail": True})
    await app.drain()
    ok = await app.enqueue(Step, {}, depends_on=[a.id])
    assert ok.state == "waiting" and (await app.get_job(ok.id)).state == "queued"
    skipped = await app.enqueue(Step, {}, depends_on=[a.id, f.id])
    assert (await app.get_job(skipped.id)).state == "skipped"
    runs = await app.enqueue(SyncStep, {}, depends_on=[a.id, f.id], on_dependency_failure="run")
    await app.drain()
    assert (await app.get_job(runs.id)).result == [1]
    assert (await app.get_job(ok.id)).state == "succeeded"


async def test_unknown_dependencies_and_bad_options_are_refused(app: jobloom.App) -> None:
    a = await app.enqueue(Step, {})
    with pytest.raises(jobloom.InvalidOption, match=r"depends_on.*999999.*existing job"):
        await app.enqueue(Step, {}, depends_on=[a.id, 999999])
    with pytest.raises(jobloom.InvalidOption, match="depends_on"):
        await app.enqueue(Step, {}, depends_on=["x"])  # type: ignore[list-item]
    with pytest.raises(jobloom.InvalidOption, match="on_dependency_failure"):
        await app.enqueue(Step, {}, depends_on=[a.id], on_dependency_failure="maybe")
    with pytest.raises(jobloom.InvalidOption, match="delay"):
        await app.enqueue(Step, {}, depends_on=[a.id], delay=5)
    assert [j.id for j in await app.list_jobs()] == [a.id]  # nothing else was enqueued


async def test_a_deleted_dependency_is_refused(app: jobloom.App) -> None:
    a = await app.enqueue(Step, {})
    await app.enqueue(Step, {})  # the newest job is never deleted
    await app.drain()
    await app.delete(a.id)
    with pytest.raises(jobloom.InvalidOption, match="depends_on"):
        await app.enqueue(Step, {}, depends_on=[a.id])


async def test_enqueue_many_and_options_take_dependencies(app: jobloom.App) -> None:
    a = await app.enqueue(Step, {"value": 1})
    made = await app.enqueue_many([
        (Step, {"value": 2}, jobloom.EnqueueOptions(depends_on=[a.id])),
        (Step, {"value": 3}),
    ])
    assert [j.state for j in made] == ["waiting", "queued"]
    await app.drain()
    assert [i for i, _ in RAN][-1] == made[0].id
    assert (await app.get_job(made[0].id)).state == "succeeded"


async def test_a_retried_dependency_is_not_counted_twice(app: jobloom.App) -> None:
    a = await app.enqueue(Step, {"fail": True})
    b = await app.enqueue(Step, {"value": 2})
    c = await app.enqueue(Step, {}, depends_on=[a.id, b.id], on_dependency_failure="run")
    await app.cancel(b.id)  # b ends cancelled: one of two counted
    await app.drain()  # a fails: both counted, c runs
    assert [i for i, _ in RAN] == [a.id, c.id]
    await app.retry(a.id)
    await app.drain()  # a fails again: its edge was closed, c is not counted down again
    assert [i for i, _ in RAN] == [a.id, c.id, a.id]
