"""The app that the multi-process tests run in real worker processes (configured by environment)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from typing import Any

import jobloom

STATE = os.environ.get("JOBLOOM_IT_DIR", ".")


def _path(name: str) -> str:
    return os.path.join(STATE, name)


def gauge(delta: int) -> None:
    """A cross-process counter of jobs inside perform, with its peak, kept in a locked file."""
    with open(_path("gauge"), "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        now, peak = (int(x) for x in (f.read().split() or ["0", "0"]))
        now += delta
        peak = max(peak, now)
        f.seek(0)
        f.truncate()
        f.write(f"{now} {peak}")


def append(name: str, line: str) -> None:
    with open(_path(name), "a") as f:
        f.write(line + "\n")


class Gate(jobloom.Performer[dict[str, Any], None]):
    concurrency = 3

    async def perform(self, payload: dict[str, Any]) -> None:
        gauge(+1)
        try:
            await asyncio.sleep(0.02)
        finally:
            gauge(-1)


class Crashy(jobloom.Performer[dict[str, Any], str]):
    backoff = jobloom.Backoff.fixed(0.1)

    async def perform(self, payload: dict[str, Any]) -> str:
        append("crashy", f"{os.getpid()} {self.ctx.attempt}")
        if self.ctx.attempt == 1:
            await asyncio.sleep(3600)
        return "recovered"


class CrashyOnce(jobloom.Performer[dict[str, Any], str]):
    delivery = "at_most_once"

    async def perform(self, payload: dict[str, Any]) -> str:
        append("once", f"{os.getpid()} {self.ctx.attempt}")
        await asyncio.sleep(3600)
        return "never"


class Rated(jobloom.Performer[dict[str, Any], None]):
    rate_limit = "20/s"

    async def perform(self, payload: dict[str, Any]) -> None:
        append("rated", repr(time.time()))


class CpuBound(jobloom.Performer[dict[str, Any], int]):
    def perform(self, payload: dict[str, Any]) -> int:
        end = time.monotonic() + float(payload["seconds"])
        n = 0
        while time.monotonic() < end:
            n += 1
        return self.ctx.attempt


class Plain(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        return int(payload["n"])


app = jobloom.App(
    os.environ.get("JOBLOOM_IT_URL", "sqlite:///it.db"),
    performers=[Gate, Crashy, CrashyOnce, Rated, CpuBound, Plain],
    lease=float(os.environ.get("JOBLOOM_IT_LEASE", "1.0")),
    auto_migrate=True,
)
