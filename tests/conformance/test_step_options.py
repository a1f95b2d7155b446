"""A step's own retries and timeout (``self.step(name, fn, retries=, backoff=, timeout=)``), on every store."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import jobloom

tries: dict[str, int] = {}
NOW = jobloom.Backoff.fixed(0)


def flaky(name: str, fails: int) -> str:
    tries[name] = tries.get(name, 0) + 1
    if tries[name] <= fails:
        raise ConnectionError(f"{name} try {tries[name]}")
    return f"{name} after {tries[name]}"


class Retrying(jobloom.Performer[dict[str, Any], str]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> str:
        return str(await self.step("call", flaky, "async", payload["fails"], retries=2, backoff=NOW))


class SyncRetrying(jobloom.Performer[dict[str, Any], str]):
    max_attempts = 1

    def perform(self, payload: dict[str, Any]) -> str:
        return str(self.step("call", flaky, "sync", payload["fails"], retries=2, backoff=NOW))


class Slow(jobloom.Performer[dict[str, Any], str]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> str:
        async def slow() -> str:
            tries["slow"] = tries.get("slow", 0) + 1
            await asyncio.sleep(3600 if tries["slow"] == 1 else 0)
            return "fast enough"

        try:
            first = await self.step("slow-once", slow, timeout=0.2, retries=1, backoff=NOW)
        except jobloom.StepTimeout as exc:
            return f"gave up: {exc}"
        try:
            await self.step("always-slow", asyncio.sleep, 3600, timeout=0.2)
        except jobloom.StepTimeout as exc:
            return f"{first}; then {exc}"  # only the step was cancelled: the attempt goes on
        return "no timeout"


class SyncSlow(jobloom.Performer[dict[str, Any], str]):
    max_attempts = 1

    def perform(self, payload: dict[str, Any]) -> str:
        try:
            self.step("blocking", time.sleep, 1.0, timeout=0.1)
        except jobloom.StepTimeout as exc:
            return str(exc)
        return "no timeout"


class BadStep(jobloom.Performer[dict[str, Any], None]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> None:
        await self.step("bad", lambda: None, **payload)


@pytest.fixture
async def app(store_url: str):
    tries.clear()
    app = jobloom.App(store_url, performers=[Retrying, SyncRetrying, Slow, SyncSlow, BadStep], auto_migrate=True)
    yield app
    await app.close()


@pytest.mark.parametrize("performer", ["Retrying", "SyncRetrying"])
async def test_a_step_retries_by_itself_before_failing_the_attempt(app: jobloom.App, performer: str) -> None:
    kind = "sync" if performer.startswith("Sync") else "async"
    ok = await app.enqueue(performer, {"fails": 2})
    await app.drain()
    done = await app.get_job(ok.id)
    assert done.state == "succeeded" and done.result == f"{kind} after 3" and done.attempt == 1
    tries.clear()
    worse = await app.enqueue(performer, {"fails": 3})
    await app.drain()
    failed = await app.get_job(worse.id)
    assert failed.state == "failed" and failed.error == f"ConnectionError: {kind} try 3" and tries[kind] == 3


async def test_a_steps_timeout_cancels_only_the_step(app: jobloom.App) -> None:
    job = await app.enqueue(Slow, {})
    await app.drain()
    done = await app.get_job(job.id)
    assert done.state == "succeeded", done.error
    assert done.result == "fast enough; then step 'always-slow' ran longer than its timeout of 0.2 s"
    assert tries["slow"] == 2


async def test_a_sync_steps_timeout_raises_in_the_job(app: jobloom.App) -> None:
    job = await app.enqueue(SyncSlow, {})
    await app.drain()
    done = await app.get_job(job.id)
    assert done.state == "succeeded" and done.result == "step 'blocking' ran longer than its timeout of 0.1 s"


@pytest.mark.parametrize(("options", "words"), [
    ({"retries": -1}, ["retries of step 'bad'", "-1", "BadStep"]),
    ({"retries": 1000}, ["retries of step 'bad'", "1000", "from 0 to 100"]),
    ({"backoff": 5}, ["backoff of step 'bad'", "5", "jobloom.Backoff"]),
    ({"timeout": 0}, ["timeout of step 'bad'", "0", "BadStep"]),
    ({"timeout": "soon"}, ["timeout of step 'bad'", "'soon'"]),
])
async def test_bad_step_options_are_refused_naming_them(app: jobloom.App, options: dict[str, Any],
                                                        words: list[str]) -> None:
    job = await app.enqueue(BadStep, options)
    await app.drain()
    failed = await app.get_job(job.id)
    assert failed.state == "failed"
    for word in words:
        assert word in failed.error, (word, failed.error)
