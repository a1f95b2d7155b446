"""``cancel_and_wait`` stops a task that misses its first cancellation (as Python 3.11's ``wait_for``
makes one miss it when the cancel meets a result)."""

from __future__ import annotations

import asyncio

from jobloom.core.tasks import cancel_and_wait


async def test_a_task_that_drops_its_first_cancel_is_cancelled_again() -> None:
    dropped: list[int] = []

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if dropped:
                    raise
                dropped.append(1)  # dropped, as a wait_for that met a result drops it

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    assert await cancel_and_wait([task]) is True
    assert task.cancelled() and dropped == [1]


async def test_a_task_that_does_not_end_is_given_up_after_the_timeout() -> None:
    deaf = [True]

    async def ignores_cancels() -> None:
        while deaf[0]:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                continue

    task = asyncio.create_task(ignores_cancels())
    await asyncio.sleep(0)
    assert await cancel_and_wait([task], timeout=0.2) is False
    assert not task.done()
    deaf[0] = False
    assert await cancel_and_wait([task]) is True and task.done()


async def test_ended_tasks_have_their_exceptions_read() -> None:
    async def fails() -> None:
        raise ValueError("read, not logged")

    task = asyncio.create_task(fails())
    await asyncio.sleep(0)
    assert await cancel_and_wait([task]) is True
    assert isinstance(task.exception(), ValueError)
