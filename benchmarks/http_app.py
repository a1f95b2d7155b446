"""The app that ``benchmarks/http_api.py`` and ``http_pull.py`` serve (its store from JOBLOOM_BENCH_URL): a
performer, and ``Remote``, a binding run by remote workers through the worker protocol."""

from __future__ import annotations

import os
from typing import Any

import jobloom


class Noop(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


app = jobloom.App(os.environ.get("JOBLOOM_BENCH_URL", "sqlite:///http-bench.db"),
                  performers=[Noop, jobloom.RemoteBinding("Remote")])


async def backlog(n: int) -> None:
    """Enqueue ``n`` jobs of ``Remote`` (in batches of 5,000)."""
    for k in range(0, n, 5000):
        await app.enqueue_many([("Remote", {"n": i}) for i in range(k, min(k + 5000, n))])
    await app.close()
