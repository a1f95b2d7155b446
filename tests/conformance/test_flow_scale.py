"""Flows at scale on every store: a fan-out's cost per child does not grow with its size."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

import jobloom

SMALL, LARGE = 200, 2_000


class Item(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        return int(payload["i"])


def fan_out() -> jobloom.Flow:
    flow = jobloom.Flow("scale")
    each = flow.map("each", Item, over=lambda inp, up: [{"i": i} for i in range(int(inp["n"]))])
    flow.node("total", Item, after=[each], input=lambda inp, up: {"i": up["each"]["succeeded"]})
    return flow


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[jobloom.App]:
    app = jobloom.App(store_url, performers=[Item], flows=[fan_out()], auto_migrate=True)
    yield app
    await app.close()


async def per_child(app: jobloom.App, n: int) -> float:
    """Seconds per child to run a fan-out of ``n`` children to its end (in-process workers)."""
    started = time.perf_counter()
    run = await app.start(app.flows["scale"], {"n": n})
    for _ in range(10):
        if not await app.drain(concurrency=64):
            break
    seconds = time.perf_counter() - started
    done = await app.get_run(run.id)
    assert done.state == "succeeded", done.error
    assert done.nodes["total"].result == n and len(done.nodes) == n + 2
    return seconds / n


@pytest.mark.serial  # a ratio of two timings: run alone, as other processes slow one timing and not the other
async def test_a_fan_out_costs_the_same_per_child_at_ten_times_the_size(app: jobloom.App) -> None:
    await per_child(app, 10)  # warm up: connections, statements, imports
    # the best of a few runs each: a loaded machine slows single runs, not the best of them
    small = min([await per_child(app, SMALL) for _ in range(3)])
    large = await per_child(app, LARGE)
    for _ in range(2):
        if large <= 2 * small:
            break
        large = min(large, await per_child(app, LARGE))
    assert large <= 2 * small, f"per child: {SMALL} children {small * 1e3:.3f} ms, {LARGE} {large * 1e3:.3f} ms"
