"""The app the dashboard's browser tests serve (``jobloom serve --app dashapp:app``) and run in real
worker processes; its store comes from ``JOBLOOM_DASH_URL``."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pydantic

import jobloom

URL = os.environ.get("JOBLOOM_DASH_URL", "sqlite:///dash.db")


class Quick(jobloom.Performer[dict[str, Any], int]):
    """Returns ``n`` after ``sleep`` seconds; steps when asked."""

    async def perform(self, payload: dict[str, Any]) -> int:
        if payload.get("steps"):
            for name in ("fetch", "store"):
                await self.step(name, lambda name=name: {"step": name})
        await asyncio.sleep(float(payload.get("sleep", 0)))
        return int(payload.get("n", 1))


class Flaky(jobloom.Performer[dict[str, Any], str]):
    """Fails its first attempt for good; a retry by hand succeeds."""

    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> str:
        if self.ctx.attempt == 1:
            raise RuntimeError(f"flaky {payload.get('n')}: upstream said no")
        return "ok"


class Limited(jobloom.Performer[dict[str, Any], None]):
    """One at a time (the dashboard raises it); each sleeps ``sleep`` seconds."""

    concurrency = 1

    async def perform(self, payload: dict[str, Any]) -> None:
        await asyncio.sleep(float(payload.get("sleep", 1)))


class Keyed(jobloom.Performer[dict[str, Any], None]):
    """One running job per concurrency key."""

    key_concurrency = 1

    async def perform(self, payload: dict[str, Any]) -> None:
        await asyncio.sleep(float(payload.get("sleep", 30)))


class Rated(jobloom.Performer[dict[str, Any], None]):
    """One start a minute."""

    rate_limit = "1/m"

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Throttled(jobloom.Performer[dict[str, Any], None]):
    """One at a time until the limits page raises it; each sleeps ``sleep`` seconds."""

    concurrency = 1

    async def perform(self, payload: dict[str, Any]) -> None:
        await asyncio.sleep(float(payload.get("sleep", 1)))


class Shown(jobloom.Performer[dict[str, Any], int]):
    """Returns at once (the overview's live test)."""

    async def perform(self, payload: dict[str, Any]) -> int:
        return 1


class Order(pydantic.BaseModel):
    sku: str
    qty: int


class Ship(jobloom.Performer[Order, int]):
    """A typed payload (the enqueue form checks it against its schema); returns the quantity."""

    async def perform(self, payload: Order) -> int:
        return payload.qty


class Approval(jobloom.Performer[dict[str, Any], Any]):
    """Waits for the event ``approved`` and returns its data."""

    async def perform(self, payload: dict[str, Any]) -> Any:
        return await self.wait_for_event("approved")


class Latent(jobloom.Performer[dict[str, Any], int]):
    """Returns at once (the overview's queue latency test pauses it)."""

    async def perform(self, payload: dict[str, Any]) -> int:
        return 1


class Pausable(jobloom.Performer[dict[str, Any], None]):
    """Paused by the "why not running" test."""

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Unserved(jobloom.Performer[dict[str, Any], None]):
    """No worker of the tests serves this binding."""

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Picky(jobloom.Performer[dict[str, Any], int]):
    """Fails (for good) when its payload says ``fail``; returns ``i`` otherwise."""

    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> int:
        if payload.get("fail"):
            raise RuntimeError(f"item {payload.get('i')} refused")
        return int(payload.get("i", 0))


pipeline = jobloom.Flow("pipeline")
_fetch = pipeline.node("fetch", Quick, input=lambda inp, up: {"n": 3, "sleep": inp.get("sleep", 0)})
_resize = pipeline.map("resize", Quick, after=[_fetch], over=lambda inp, up: [{"n": i} for i in range(up["fetch"])])
pipeline.node("publish", Quick, after=[_resize], input=lambda inp, up: {"n": up["resize"]["succeeded"]})

fanout = jobloom.Flow("fanout")
_count = fanout.node("count", Quick, input=lambda inp, up: {"n": inp.get("n", 10)})
_each = fanout.map("each", Picky, after=[_count],
                   over=lambda inp, up: [{"i": i, "fail": i % 50 == 7} for i in range(up["count"])])
fanout.node("tally", Quick, after=[_each], input=lambda inp, up: {"n": up["each"]["failed"]})

PULLED = jobloom.RemoteBinding("Pulled", payload={"type": "object"})
"""A remote binding: the tests claim its jobs as a remote (pull) worker would."""
PERFORMERS = [Quick, Flaky, Limited, Keyed, Rated, Throttled, Shown, Pausable, Unserved, Picky, Latent, Ship, Approval,
              PULLED]
app = jobloom.App(URL, performers=PERFORMERS, flows=[pipeline, fanout], lease=2.0,
                  schedules=[jobloom.Schedule("hourly-digest", every=3600, performer=Quick, payload={"n": 7},
                                              timezone="Europe/Berlin")])
SERVED = "Quick,Flaky,Limited,Keyed,Rated,Throttled,Shown,Pausable,Picky,Latent,Ship,Approval,jobloom.map"
"""The bindings the tests' workers serve (all but Unserved)."""
