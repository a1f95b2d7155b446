"""Versions of long-lived work: ``self.ctx.version`` is the version that first ran the job, on every store."""

from __future__ import annotations

from typing import Any

import pytest

import jobloom


def _long(version: int | None) -> type[jobloom.Performer[dict[str, Any], dict[str, int]]]:
    """The performer of binding ``Long`` as one deploy has it (``None``: code without a version)."""

    class Long(jobloom.Performer[dict[str, Any], dict[str, int]]):
        binding = "Long"

        async def perform(self, payload: dict[str, Any]) -> dict[str, int]:
            first = self.ctx.version
            await self.wait_for_event("go")
            return {"first": first, "resumed": self.ctx.version}

    if version is not None:
        Long.version = version
    return Long


async def _run_across_deploy(store_url: str, before: int | None, after: int | None) -> dict[str, int]:
    old = jobloom.App(store_url, performers=[_long(before)], auto_migrate=True)
    job = await old.enqueue("Long", {})
    await old.drain()
    assert (await old.get_job(job.id)).state == "scheduled"  # waiting across the deploy
    await old.send_event(job.id, "go", None)
    await old.close()
    new = jobloom.App(store_url, performers=[_long(after)], auto_migrate=True)
    try:
        await new.drain()
        done = await new.get_job(job.id)
        assert done.state == "succeeded", done.error
        return dict(done.result)
    finally:
        await new.close()


@pytest.mark.parametrize(("before", "after", "seen"), [
    (2, 3, {"first": 2, "resumed": 2}),     # version 3 resumes a job version 2 started
    (None, 2, {"first": 1, "resumed": 1}),  # a job of code without a version is version 1
    (3, 3, {"first": 3, "resumed": 3}),
])
async def test_a_resumed_job_knows_the_version_that_first_ran_it(store_url: str, before: int | None,
                                                                  after: int | None, seen: dict[str, int]) -> None:
    assert await _run_across_deploy(store_url, before, after) == seen


@pytest.mark.parametrize("bad", [0, -1, "2", 1.5])
def test_a_bad_version_is_refused_naming_it(bad: object, tmp_path: Any) -> None:
    with pytest.raises(jobloom.InvalidOption) as err:
        jobloom.App(f"sqlite:///{tmp_path}/unused.db", performers=[_long(bad)])  # type: ignore[arg-type]
    assert "version" in str(err.value) and repr(bad) in str(err.value) and "Long" in str(err.value)
