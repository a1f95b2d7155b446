"""Hostile input on every store: each value is stored as it was, or refused with a JobloomError naming the field
and the limit, or (free text from user code) made storable as documented; the store stays usable."""

from __future__ import annotations

import math
import sqlite3
from typing import Any

import pytest

import jobloom
from jobloom.core.text import MAX_ERROR_BYTES, MAX_KEY_BYTES, MAX_TRACEBACK_BYTES


class Echo(jobloom.Performer[dict[str, Any], Any]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> Any:
        return payload.get("return", payload)


class Raise(jobloom.Performer[dict[str, Any], None]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> None:
        raise RuntimeError(payload["message"] * payload.get("repeat", 1))


class RaiseSurrogate(jobloom.Performer[dict[str, Any], None]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> None:
        raise RuntimeError("bad \ud800 surrogate\x00")


class ReturnNaN(jobloom.Performer[dict[str, Any], Any]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> Any:
        return {"value": math.nan}


class StepNaN(jobloom.Performer[dict[str, Any], Any]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> Any:
        return await self.step("measure", lambda: [1.0, math.inf])


BAD_KEYS = ["", "a\x00b", "tab\there", "x\udc80", "k" * (MAX_KEY_BYTES + 1)]


class KeyedBy(jobloom.Performer[dict[str, Any], None]):
    concurrency_key = staticmethod(lambda p: BAD_KEYS[p["bad"]])

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


flow = jobloom.Flow("pipeline")
flow.node("only", Echo)
PERFORMERS = [Echo, Raise, RaiseSurrogate, ReturnNaN, StepNaN, KeyedBy]


@pytest.fixture
async def app(store_url: str):
    app = jobloom.App(store_url, performers=PERFORMERS, flows=[flow], auto_migrate=True)
    yield app
    await app.close()


async def still_usable(app: jobloom.App) -> None:
    job = await app.enqueue(Echo, {"plain": 1})
    await app.drain()
    assert (await app.get_job(job.id)).result == {"plain": 1}


async def test_nul_in_error_text_is_stored(app: jobloom.App) -> None:
    job = await app.enqueue(Raise, {"message": "bad\x00byte"})
    await app.drain()
    failed = await app.get_job(job.id)
    assert failed.state == "failed"
    assert failed.error == "RuntimeError: bad\\x00byte"
    [attempt] = await app.attempts(job.id)
    assert attempt.error == "RuntimeError: bad\\x00byte"
    assert attempt.traceback is not None and "bad\\x00byte" in attempt.traceback
    await still_usable(app)


async def test_lone_surrogate_in_error_text_is_escaped(app: jobloom.App) -> None:
    job = await app.enqueue(RaiseSurrogate, {})
    await app.drain()
    failed = await app.get_job(job.id)
    assert failed.state == "failed" and failed.error == "RuntimeError: bad \\ud800 surrogate\\x00"
    await still_usable(app)


async def test_huge_error_text_is_cut_with_a_marker(app: jobloom.App) -> None:
    job = await app.enqueue(Raise, {"message": "é", "repeat": 100_000})
    await app.drain()
    failed = await app.get_job(job.id)
    assert failed.error is not None and len(failed.error.encode()) <= MAX_ERROR_BYTES
    assert failed.error.startswith("RuntimeError: éé") and "bytes cut: the limit is 16384 bytes" in failed.error
    [attempt] = await app.attempts(job.id)
    assert attempt.traceback is not None and len(attempt.traceback.encode()) <= MAX_TRACEBACK_BYTES
    assert attempt.traceback.startswith("Traceback") and "bytes cut" in attempt.traceback


@pytest.mark.parametrize("priority", [10**30, 2**31, -(2**31) - 1, 1.5, True])
async def test_priority_out_of_the_column_range_is_refused(app: jobloom.App, priority: Any) -> None:
    with pytest.raises(jobloom.InvalidOption, match="invalid priority.*from -2147483648 to 2147483647"):
        await app.enqueue(Echo, {}, priority=priority)
    with pytest.raises(jobloom.InvalidOption, match="invalid priority"):
        await app.enqueue_many([jobloom.EnqueueRequest(Echo, {}, jobloom.EnqueueOptions(priority=priority))])
    edge = await app.enqueue(Echo, {}, priority=2**31 - 1)
    low = await app.enqueue(Echo, {}, priority=-(2**31))
    assert (await app.get_job(edge.id)).priority == 2**31 - 1 and (await app.get_job(low.id)).priority == -(2**31)
    await still_usable(app)


async def test_max_attempts_out_of_the_column_range_is_refused(app: jobloom.App) -> None:
    with pytest.raises(jobloom.InvalidOption, match="invalid max_attempts.*from 1 to 2147483647"):
        await app.enqueue(Echo, {}, max_attempts=10**30)
    job = await app.enqueue(Echo, {}, max_attempts=2**31 - 1)
    assert (await app.get_job(job.id)).max_attempts == 2**31 - 1


async def test_a_10kb_unique_key_is_refused_before_the_index(app: jobloom.App) -> None:
    with pytest.raises(jobloom.InvalidOption, match=f"invalid unique_key.*at most {MAX_KEY_BYTES} UTF-8 bytes"):
        await app.enqueue(Echo, {}, unique_key="k" * 10_000)
    longest = "é" * (MAX_KEY_BYTES // 2)
    job = await app.enqueue(Echo, {}, unique_key=longest)
    assert (await app.get_job(job.id)).unique_key == longest
    await still_usable(app)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
async def test_nan_and_infinity_in_a_payload_are_refused_not_stored_as_null(app: jobloom.App, value: float) -> None:
    with pytest.raises(jobloom.InvalidPayload, match="cannot be stored as JSON.*NaN and infinities are refused"):
        await app.enqueue(Echo, {"x": [1, {"y": value}]})
    with pytest.raises(jobloom.InvalidPayload):
        await app.enqueue(Echo, {"x": value}, priority=1)  # the path with options too
    kept = await app.enqueue(Echo, {"x": "NaN", "y": "Infinity", "z": None})
    assert (await app.get_job(kept.id)).payload == {"x": "NaN", "y": "Infinity", "z": None}


async def test_lone_surrogates_and_deep_nesting_in_a_payload_are_refused(app: jobloom.App) -> None:
    with pytest.raises(jobloom.InvalidPayload, match="lone surrogate"):
        await app.enqueue(Echo, {"key\udc80": 1})
    with pytest.raises(jobloom.InvalidPayload):
        await app.enqueue(Echo, {"x": "value\udc80"})
    deep: Any = 1
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(jobloom.InvalidPayload):
        await app.enqueue(Echo, {"deep": deep})
    nested: Any = 1
    for _ in range(64):
        nested = [nested]
    with pytest.raises(jobloom.InvalidPayload, match="nested deeper than 64"):
        await app.enqueue(Echo, {"deep": nested})
    job = await app.enqueue(Echo, {"nul": "a\x00b", "big": 10**30})
    assert (await app.get_job(job.id)).payload == {"nul": "a\x00b", "big": 10**30}
    await still_usable(app)


async def test_get_job_with_an_id_beyond_64_bits_is_not_found(app: jobloom.App) -> None:
    for call in (app.get_job, app.attempts, app.cancel, app.retry):
        with pytest.raises(jobloom.JobNotFound):
            await call(10**30)
    with pytest.raises(jobloom.InvalidOption, match="job_id"):
        await app.get_job("7")  # type: ignore[arg-type]
    job = await app.enqueue(Echo, {})
    assert [j.id for j in await app.list_jobs(before=10**30)] == [job.id]
    with pytest.raises(jobloom.InvalidOption, match="invalid limit"):
        await app.list_jobs(limit=10**30)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 10**400])
async def test_non_finite_numeric_options_are_refused_naming_the_option(app: jobloom.App, value: Any) -> None:
    with pytest.raises(jobloom.InvalidOption, match="invalid delay on Echo"):
        await app.enqueue(Echo, {}, delay=value)
    with pytest.raises(jobloom.InvalidOption, match="invalid run_at on Echo"):
        await app.enqueue(Echo, {}, run_at=value)
    with pytest.raises(jobloom.InvalidOption, match="invalid deadline"):
        await app.start(flow, {}, deadline=value)
    with pytest.raises(jobloom.InvalidOption, match="invalid lease"):
        jobloom.App(app.url, lease=value)
    with pytest.raises(jobloom.InvalidOption, match="invalid after"):
        jobloom.Retry(after=value)

    class Timed(jobloom.Performer[dict[str, Any], None]):
        timeout = value

        async def perform(self, payload: dict[str, Any]) -> None:
            return None

    with pytest.raises(jobloom.InvalidOption, match="invalid timeout on Timed"):
        jobloom.App(app.url, performers=[Timed])
    await still_usable(app)


async def test_moments_beyond_a_datetime_are_refused(app: jobloom.App) -> None:
    with pytest.raises(jobloom.InvalidOption, match=r"invalid delay on Echo: 1e\+40; expected .* <= 1e\+10"):
        await app.enqueue(Echo, {}, delay=1e40)
    with pytest.raises(jobloom.InvalidOption, match="invalid run_at on Echo"):
        await app.enqueue(Echo, {}, run_at=1e40)
    with pytest.raises(jobloom.InvalidOption, match="invalid deadline"):
        await app.start(flow, {}, deadline=1e40)
    with pytest.raises(jobloom.InvalidOption, match="invalid after"):
        jobloom.Retry(after=1e40)
    far = await app.enqueue(Echo, {}, delay=1e10)
    assert (await app.get_job(far.id)).run_at is not None and (await app.list_jobs())[0].state == "scheduled"


@pytest.mark.parametrize("deadline", [0, -1, 0.0])
async def test_start_deadline_must_be_a_positive_number_of_seconds(app: jobloom.App, deadline: float) -> None:
    with pytest.raises(jobloom.InvalidOption, match="invalid deadline.*finite number > 0"):
        await app.start(flow, {}, deadline=deadline)
    assert await app.list_runs() == []


@pytest.mark.parametrize("bad", range(len(BAD_KEYS)))
async def test_empty_or_unstorable_keys_are_refused(app: jobloom.App, bad: int) -> None:
    key = BAD_KEYS[bad]
    for option in ("unique_key", "concurrency_key"):
        with pytest.raises(jobloom.InvalidOption, match=f"invalid {option} on Echo"):
            await app.enqueue(Echo, {}, **{option: key})
    with pytest.raises(jobloom.InvalidOption, match="invalid concurrency_key on KeyedBy"):
        await app.enqueue(KeyedBy, {"bad": bad})
    assert await app.list_jobs() == []
    await still_usable(app)


async def test_a_result_that_json_cannot_hold_fails_the_job(app: jobloom.App) -> None:
    job = await app.enqueue(ReturnNaN, {})
    await app.drain()
    failed = await app.get_job(job.id)
    assert failed.state == "failed" and failed.result is None
    assert failed.error is not None and "result cannot be stored as JSON" in failed.error
    await still_usable(app)


async def test_a_step_result_that_json_cannot_hold_raises_in_the_job(app: jobloom.App) -> None:
    job = await app.enqueue(StepNaN, {})
    await app.drain()
    failed = await app.get_job(job.id)
    assert failed.state == "failed"
    assert failed.error is not None and failed.error.startswith("StepNotStorable: step 'measure'")
    await still_usable(app)


async def test_event_names_and_data_are_checked(app: jobloom.App) -> None:
    job = await app.enqueue(Echo, {})
    with pytest.raises(jobloom.InvalidOption, match="invalid event data"):
        await app.send_event(job.id, "go", {"x": math.nan})
    for name in ("", "a\x00", "n" * 200):
        with pytest.raises(jobloom.InvalidOption, match="invalid event name"):
            await app.send_event(job.id, name, 1)
    with pytest.raises(jobloom.JobNotFound):
        await app.send_event(10**30, "go")
    assert await app.send_event(job.id, "go", {"n": 10**30, "s": "\x00"}) is False


async def test_flow_input_and_run_ids_are_checked(app: jobloom.App) -> None:
    with pytest.raises(jobloom.FlowError, match="input of flow 'pipeline' must be JSON.*NaN"):
        await app.start(flow, {"x": math.nan})
    for run_id in ("", "a\x00b", "r" * (MAX_KEY_BYTES + 1)):
        with pytest.raises(jobloom.InvalidOption, match="invalid id"):
            await app.start(flow, {}, id=run_id)
    assert await app.list_runs() == []
    run = await app.start(flow, {"text": "nul\x00"}, id="r\u00e9")
    await app.drain()
    assert (await app.get_run(run.id)).nodes["only"].result == {"text": "nul\x00"}


def test_an_empty_flow_is_refused_when_the_app_is_built(store_url: str) -> None:
    with pytest.raises(jobloom.FlowError, match="flow 'nothing' has no nodes"):
        jobloom.App(store_url, performers=[Echo], flows=[jobloom.Flow("nothing")])


def test_a_flow_schedule_without_input_is_refused() -> None:
    with pytest.raises(jobloom.InvalidSchedule, match="invalid input on schedule 'tick'.*needs input="):
        jobloom.Schedule("tick", cron="* * * * *", flow=flow)


def test_an_autocommit_sqlite_connection_is_refused(sqlite_url: str) -> None:
    app = jobloom.App(sqlite_url, performers=[Echo])
    conn = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        with pytest.raises(jobloom.StoreError, match="inside a transaction"):
            app.enqueue_sync(Echo, {}, connection=conn)
        assert conn.execute("SELECT count(*) FROM jobloom_jobs").fetchone() == (0,)
        conn.execute("BEGIN")
        job = app.enqueue_sync(Echo, {}, connection=conn)
        conn.execute("COMMIT")
        assert app.run_sync(app.get_job(job.id)).state == "queued"
    finally:
        conn.close()
        app.close_sync()
