"""The app of the many-hosts test: a binding with ``concurrency = 5`` and one with ``rate_limit = "50/s"``.

Worker processes load it as ``hostsapp:app`` inside network namespaces; the store URL comes from
``JOBLOOM_IT_URL``. ``Capped`` returns the moments its ``perform`` began and ended, so that how many
ran at once can be counted from every job's own record afterwards.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import jobloom

HOLD = 0.05  # seconds a Capped job runs: long enough for the limit to bind with 8 processes claiming


class Capped(jobloom.Performer[dict[str, Any], list[float]]):
    """At most five at once, across every worker process and host."""

    concurrency = 5

    async def perform(self, payload: dict[str, Any]) -> list[float]:
        """Hold a slot for ``HOLD`` seconds; return [begin, end] (epoch seconds)."""
        begin = time.time()
        await asyncio.sleep(HOLD)
        return [begin, time.time()]


class Paced(jobloom.Performer[dict[str, Any], None]):
    """At most 50 starts per second, across every worker process and host."""

    rate_limit = "50/s"

    async def perform(self, payload: dict[str, Any]) -> None:
        """Return at once."""
        return None


app = jobloom.App(os.environ.get("JOBLOOM_IT_URL", "sqlite:///hosts.db"), performers=[Capped, Paced],
                  auto_migrate=False)
