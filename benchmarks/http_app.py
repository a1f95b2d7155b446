"""The app that ``benchmarks/http_api.py`` serves: one performer (its store from JOBLOOM_BENCH_URL)."""

from __future__ import annotations

import os
from typing import Any

import jobloom


class Noop(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


app = jobloom.App(os.environ.get("JOBLOOM_BENCH_URL", "sqlite:///http-bench.db"), performers=[Noop])
