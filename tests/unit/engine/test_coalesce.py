"""The coalescer: one batch per loop tick, results to their callers in order, each caller its own error."""

from __future__ import annotations

import asyncio

from jobloom.engine.coalesce import Coalescer


async def test_the_calls_of_one_tick_run_as_one_batch_and_each_gets_its_result() -> None:
    batches: list[list[int]] = []

    async def run(items: list[int]) -> list[int]:
        batches.append(items)
        await asyncio.sleep(0)
        return [i * 10 for i in items]

    c: Coalescer[int, int] = Coalescer(run)
    first = await asyncio.gather(*(c.submit(i) for i in range(5)))
    second = await asyncio.gather(c.submit(7), c.submit(8))
    assert (first, second) == ([0, 10, 20, 30, 40], [70, 80])
    assert batches == [[0, 1, 2, 3, 4], [7, 8]]


async def test_tasks_ready_in_the_same_tick_join_the_batch() -> None:
    batches: list[list[str]] = []

    async def run(items: list[str]) -> list[str]:
        batches.append(items)
        return [s.upper() for s in items]

    c: Coalescer[str, str] = Coalescer(run)

    async def caller(s: str) -> str:
        return await c.submit(s)

    assert await asyncio.gather(*(caller(s) for s in "abc")) == ["A", "B", "C"]
    assert batches == [["a", "b", "c"]]


async def test_a_bad_item_fails_only_its_caller() -> None:
    batches: list[list[int]] = []

    async def run(items: list[int]) -> list[int]:
        batches.append(items)
        if 2 in items:
            raise ValueError("2 is refused")
        return items

    c: Coalescer[int, int] = Coalescer(run)
    results = await asyncio.gather(c.submit(1), c.submit(2), c.submit(3), return_exceptions=True)
    assert results[0] == 1 and results[2] == 3
    assert isinstance(results[1], ValueError)
    assert batches == [[1, 2, 3], [1], [2], [3]]
    assert await c.submit(4) == 4


async def test_a_batch_of_unknown_fate_fails_every_caller_without_running_again() -> None:
    from jobloom.core.errors import CommitUnknown

    batches: list[list[int]] = []

    async def run(items: list[int]) -> list[int]:
        batches.append(items)
        raise CommitUnknown("the connection failed during COMMIT")

    c: Coalescer[int, int] = Coalescer(run)
    results = await asyncio.gather(c.submit(1), c.submit(2), return_exceptions=True)
    assert [type(r) for r in results] == [CommitUnknown, CommitUnknown]
    assert batches == [[1, 2]]  # not run again: it may have been applied


async def test_a_batch_that_returns_too_few_results_is_an_error() -> None:
    async def run(items: list[int]) -> list[int]:
        return items[:-1]

    c: Coalescer[int, int] = Coalescer(run)
    results = await asyncio.wait_for(asyncio.gather(c.submit(1), c.submit(2), return_exceptions=True), 5)
    assert [str(r) for r in results] == ["a batch of 1 items returned 0 results"] * 2  # none left waiting
