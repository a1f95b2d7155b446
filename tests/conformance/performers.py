"""Performers used by the conformance tests, with an in-process counter of simultaneous runs."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from typing import Any

import jobloom


class Counter:
    """Counts simultaneous runs per name and remembers the peak."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now: dict[str, int] = defaultdict(int)
        self.peaks: dict[str, int] = defaultdict(int)
        self.calls: dict[str, int] = defaultdict(int)
        self.order: list[str] = []  # names in the order their runs began

    def reset(self) -> None:
        with self.lock:
            self.now.clear()
            self.peaks.clear()
            self.calls.clear()
            self.order.clear()

    def enter(self, name: str) -> None:
        with self.lock:
            self.order.append(name)
            self.now[name] += 1
            self.calls[name] += 1
            self.peaks[name] = max(self.peaks[name], self.now[name])

    def leave(self, name: str) -> None:
        with self.lock:
            self.now[name] -= 1

    def peak(self, name: str) -> int:
        return self.peaks[name]


counter = Counter()


class Echo(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"echo": payload}


class FailTwice(jobloom.Performer[dict[str, Any], str]):
    backoff = jobloom.Backoff.fixed(0)

    def perform(self, payload: dict[str, Any]) -> str:  # a plain def: runs in a thread
        if self.ctx.attempt <= 2:
            raise RuntimeError(f"failure {self.ctx.attempt}")
        return "ok"


class Perm(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        raise jobloom.Permanent("bad input")


class RetryLater(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        raise jobloom.Retry(after=30)


class Slow(jobloom.Performer[dict[str, Any], None]):
    timeout = 0.2

    async def perform(self, payload: dict[str, Any]) -> None:
        await asyncio.sleep(10)


class Forever(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        await asyncio.sleep(3600)


class Huge(jobloom.Performer[dict[str, Any], str]):
    async def perform(self, payload: dict[str, Any]) -> str:
        return "x" * 200_000


class Limited(jobloom.Performer[dict[str, Any], None]):
    concurrency = 2
    priority_aging = None

    async def perform(self, payload: dict[str, Any]) -> None:
        counter.enter("Limited")
        try:
            await asyncio.sleep(0.03)
        finally:
            counter.leave("Limited")


class Tenant(jobloom.Performer[dict[str, Any], None]):
    concurrency_key = staticmethod(lambda p: p["tenant"])
    key_concurrency = 1

    async def perform(self, payload: dict[str, Any]) -> None:
        name = f"Tenant:{payload['tenant']}"
        counter.enter(name)
        try:
            await asyncio.sleep(0.1)
        finally:
            counter.leave(name)


class Throttled(jobloom.Performer[dict[str, Any], None]):
    rate_limit = "10/s"

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Held(jobloom.Performer[dict[str, Any], None]):
    """``concurrency = 0``: its jobs wait queued until the limit is raised."""

    concurrency = 0

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Lost(jobloom.Performer[dict[str, Any], int]):
    """Retried 1.5 s after a lost attempt (fixed backoff, no jitter)."""

    backoff = jobloom.Backoff.fixed(1.5)

    async def perform(self, payload: dict[str, Any]) -> int:
        return 1


class Nap(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        await asyncio.sleep(float(payload.get("seconds", 0)))
        time.sleep(0)
