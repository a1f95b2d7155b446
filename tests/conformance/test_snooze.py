"""Snooze: a job puts itself back for later without spending an attempt, a bounded number of times."""

from __future__ import annotations

from typing import Any

import pytest

import jobloom


class Later(jobloom.Performer[dict[str, Any], int]):
    """Snoozes (no delay) twice, fails once, then succeeds: two attempts are all it has."""

    max_attempts = 2
    backoff = jobloom.Backoff.fixed(0)

    async def perform(self, payload: dict[str, Any]) -> int:
        if self.ctx.attempt <= 2:
            raise jobloom.Snooze(after=float(payload.get("after", 0)))
        if self.ctx.attempt == 3:
            raise RuntimeError("once")
        return self.ctx.attempt


class LaterSync(jobloom.Performer[dict[str, Any], int]):
    """The same, as a plain ``def`` (in a thread)."""

    max_attempts = 2
    backoff = jobloom.Backoff.fixed(0)

    def perform(self, payload: dict[str, Any]) -> int:
        if self.ctx.attempt <= 2:
            raise jobloom.Snooze()
        if self.ctx.attempt == 3:
            raise RuntimeError("once")
        return self.ctx.attempt


class Forever(jobloom.Performer[dict[str, Any], None]):
    """Always snoozes: stopped by ``max_snoozes``."""

    max_snoozes = 2

    async def perform(self, payload: dict[str, Any]) -> None:
        raise jobloom.Snooze(after=0)


async def drain_all(app: jobloom.App) -> int:
    """Drain until nothing runs: a job snoozed with no delay is due again after the drain that ran it."""
    total = 0
    while ran := await app.drain():
        total += ran
    return total


@pytest.fixture
async def app(store_url: str):
    app = jobloom.App(store_url, performers=[Later, LaterSync, Forever], auto_migrate=True, lease=5.0)
    yield app
    await app.close()


@pytest.mark.parametrize("performer", [Later, LaterSync])
async def test_a_snooze_spends_no_attempt_and_is_in_the_history(app: jobloom.App, performer: Any) -> None:
    job = await app.enqueue(performer, {})
    assert await drain_all(app) == 4
    done = await app.get_job(job.id)
    assert (done.state, done.result) == ("succeeded", 4)  # max_attempts = 2: the snoozes spent none
    history = await app.attempts(job.id)
    assert [a.outcome for a in history] == ["snoozed", "snoozed", "failed", "succeeded"]
    assert history[0].error == "snoozed for 0 s"


async def test_a_snoozed_job_waits_scheduled_for_its_delay(app: jobloom.App) -> None:
    job = await app.enqueue(Later, {"after": 30})
    before = app.now()
    assert await app.drain() == 1  # ran once, snoozed, and is not due again for 30 s
    later = await app.get_job(job.id)
    assert later.state == "scheduled" and later.run_ts is not None
    assert before + 29 < later.run_ts < app.now() + 31


async def test_max_snoozes_ends_a_job_that_always_snoozes(app: jobloom.App) -> None:
    job = await app.enqueue(Forever, {})
    assert await drain_all(app) == 3
    failed = await app.get_job(job.id)
    assert failed.state == "failed"
    assert failed.error is not None and "snoozed 2 times" in failed.error and "max_snoozes" in failed.error
    assert [a.outcome for a in await app.attempts(job.id)] == ["snoozed"] * 3


def test_bad_snooze_values_are_refused() -> None:
    with pytest.raises(jobloom.InvalidOption, match="after"):
        jobloom.Snooze(after=-1)

    class Zero(jobloom.Performer[dict[str, Any], None]):
        max_snoozes = 0

        async def perform(self, payload: dict[str, Any]) -> None:
            return None

    with pytest.raises(jobloom.InvalidOption, match="max_snoozes on Zero"):
        jobloom.App("sqlite:///:memory:", performers=[Zero])
