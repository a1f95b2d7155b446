"""Arbitrary text and JSON through every stored field, on every store.

Each call either succeeds and the value reads back identical (JSON fields, names and keys) or made
storable as documented (error text), or raises a JobloomError subclass; the store stays usable.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jobloom
from jobloom.core.text import MAX_ERROR_BYTES, storable_text

# Values handed to performers through the process's memory: a payload could not carry them.
GIVEN: dict[int, Any] = {}


class Echo(jobloom.Performer[dict[str, Any], Any]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> Any:
        return GIVEN[payload["i"]] if "i" in payload else payload.get("v")


class RaiseGiven(jobloom.Performer[dict[str, Any], None]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> None:
        raise RuntimeError(GIVEN[payload["i"]])


class StepGiven(jobloom.Performer[dict[str, Any], Any]):
    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> Any:
        name, value = GIVEN[payload["i"]]
        return await self.step(name, lambda: value)


flow = jobloom.Flow("fuzz")
flow.node("echo", Echo, input=lambda inp, up: {"v": inp})

SPECIALS = ["\x00", "\ud800", "\udfff", "é", "\u2028", "\x7f", "\x1b", '"', "\\", "[", "{", "💥"]
chars = st.one_of(st.characters(blacklist_categories=()), st.sampled_from(SPECIALS))
texts = st.one_of(
    st.text(chars, max_size=30),
    st.text("abcé-_ .💥", min_size=1, max_size=12),
    st.sampled_from(["NaN", "Infinity", "a", "-Infinity"]),
    st.builds(lambda s, n: s * n, st.text(chars, min_size=1, max_size=3), st.integers(100, 12_000)),
)
numbers = st.one_of(
    st.integers(-5, 100), st.floats(0, 1e6),
    st.integers(-(10**40), 10**40), st.integers(-(2**63), 2**63), st.floats(allow_nan=True, allow_infinity=True),
)


class Deep:
    """Arrays nested ``depth`` deep, built only when used (so that a report shows it in one line)."""

    def __init__(self, depth: int) -> None:
        self.depth = depth

    def __repr__(self) -> str:
        return f"Deep({self.depth})"

    def build(self) -> Any:
        value: Any = 0
        for _ in range(self.depth):
            value = [value]
        return value


json_values = st.one_of(
    st.recursive(
        st.none() | st.booleans() | numbers | texts,
        lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
        max_leaves=12,
    ),
    st.builds(Deep, st.sampled_from([63, 64, 65, 300, 10_000])),
)
FIELDS = ["payload", "result", "unique_key", "concurrency_key", "error", "event", "flow", "step", "schedule",
          "binding", "numbers"]
cases = st.tuples(st.sampled_from(FIELDS), texts, json_values, numbers)


async def drained(app: jobloom.App, job: jobloom.Job) -> jobloom.Job:
    await app.drain()
    return await app.get_job(job.id)


async def one_case(app: jobloom.App, field: str, text: str, value: Any, number: Any, i: int) -> None:
    """Push one input through ``field``; an assertion fails if it is stored changed."""
    if isinstance(value, Deep):
        value = value.build()
    if field == "payload":
        job = await app.enqueue(Echo, {"v": value})
        assert (await app.get_job(job.id)).payload == {"v": value}
    elif field == "result":
        GIVEN[i] = value
        done = await drained(app, await app.enqueue(Echo, {"i": i}))
        assert (done.state == "succeeded" and done.result == value) or (
            done.state == "failed" and done.error and done.error.split(":")[0] in ("InvalidPayload", "PayloadTooLarge")
        ), done
    elif field in ("unique_key", "concurrency_key"):
        job = await app.enqueue(Echo, {}, **{field: text})
        assert getattr(await app.get_job(job.id), field) == text
    elif field == "error":
        GIVEN[i] = text
        done = await drained(app, await app.enqueue(RaiseGiven, {"i": i}))
        assert done.error == storable_text(f"RuntimeError: {text}", MAX_ERROR_BYTES)
        [attempt] = await app.attempts(done.id)
        assert attempt.error == done.error and attempt.traceback
    elif field == "event":
        job = await app.enqueue(Echo, {"v": 1}, delay=3600)
        await app.send_event(job.id, text, value)
        store = await app.store()

        async def read(tx: Any) -> Any:
            return await tx.fetchone("get_signal", {"job_id": job.id, "name": text})

        row = await store.transact(read, exclusive=False)
        assert row is not None and (None if row[0] is None else json.loads(row[0])) == value
    elif field == "flow":
        run_id = f"{i}:{text}"  # a fresh id: the same id again returns the run made before
        run = await app.start(flow, value, id=run_id)
        stored = await app.get_run(run_id)
        assert stored.id == run.id == run_id and stored.input == value
    elif field == "step":
        GIVEN[i] = (text, value)
        done = await drained(app, await app.enqueue(StepGiven, {"i": i}))
        assert (done.state == "succeeded" and done.result == value) or (
            done.state == "failed" and done.error and done.error.split(":")[0] in ("StepNotStorable", "InvalidOption",
                                                                                 "PayloadTooLarge", "InvalidPayload")
        ), done
    elif field == "schedule":
        schedule = jobloom.Schedule(text, every=3600, performer=Echo, payload={"v": value})
        await app.add_schedule(schedule)
        assert text in {s.name for s in await app.list_schedules()}
    elif field == "binding":  # a name given at run time: limits, pause, search and stats by binding
        await app.set_limits(text, concurrency=3)
        [info] = [b for b in await app.list_bindings() if b.binding == text]
        assert info.policy.concurrency == 3
        assert (await app.pause_binding(text)).paused and not (await app.resume_binding(text)).paused
        assert await app.list_jobs(binding=text) == []
        assert (await app.stats(binding=text)).total.enqueued == 0
    else:
        option = ("priority", "max_attempts", "delay")[i % 3]
        job = await app.enqueue(Echo, {}, **{option: number})
        stored = await app.get_job(job.id)
        if option == "delay":
            assert math.isfinite(number) and stored.run_at is not None
            assert abs(stored.run_at.timestamp() - stored.created_at.timestamp() - number) < 1
        else:
            assert getattr(stored, option) == number


def test_arbitrary_text_and_json_through_every_field(store_url: str) -> None:
    loop = asyncio.new_event_loop()
    app = jobloom.App(store_url, performers=[Echo, RaiseGiven, StepGiven], flows=[flow], auto_migrate=True)
    counter = iter(range(10**9))
    outcomes: dict[str, int] = {}

    @settings(max_examples=60, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(cases)
    def check(case: tuple[str, str, Any, Any]) -> None:
        field, text, value, number = case
        try:
            loop.run_until_complete(one_case(app, field, text, value, number, next(counter)))
            outcomes["stored"] = outcomes.get("stored", 0) + 1
        except jobloom.JobloomError:
            outcomes["refused"] = outcomes.get("refused", 0) + 1

    try:
        check()
        assert outcomes.get("stored") and outcomes.get("refused"), outcomes

        async def usable() -> None:
            job = await app.enqueue(Echo, {"v": "still fine"})
            await app.drain()
            assert (await app.get_job(job.id)).result == "still fine"

        loop.run_until_complete(usable())
    finally:
        loop.run_until_complete(app.close())
        loop.close()
