"""The app that the multi-process tests run in real worker processes (configured by environment)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import random
import time
from typing import Any

import jobloom
from jobloom.codecs import Encrypted

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
    """``20/s burst 5``; appends ``job_id time pid`` to ``rated`` as it starts, then runs ``hold`` seconds."""

    rate_limit = "20/s burst 5"

    async def perform(self, payload: dict[str, Any]) -> None:
        append("rated", f"{self.ctx.job_id} {time.time()!r} {os.getpid()}")
        await asyncio.sleep(float(payload.get("hold", 0)))


class TurnTaking(jobloom.Performer[dict[str, Any], None]):
    """One at a time, the keys taking turns; appends ``key time pid`` to ``turns`` as it starts."""

    concurrency = 1
    concurrency_key = staticmethod(lambda p: p["k"])
    fairness = "round_robin"

    async def perform(self, payload: dict[str, Any]) -> None:
        append("turns", f"{payload['k']} {time.time()!r} {os.getpid()}")
        await asyncio.sleep(0.005)


class KeyRated(jobloom.Performer[dict[str, Any], None]):
    """``4/s burst 1`` per key, 4 at once per key; appends ``key time pid job_id`` to ``keyrated`` as it starts."""

    concurrency_key = staticmethod(lambda p: p["k"])
    key_concurrency = 4
    key_rate_limit = "4/s"

    async def perform(self, payload: dict[str, Any]) -> None:
        append("keyrated", f"{payload['k']} {time.time()!r} {os.getpid()} {self.ctx.job_id}")
        await asyncio.sleep(0.3)


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


class StepsThenHang(jobloom.Performer[dict[str, Any], list[str]]):
    backoff = jobloom.Backoff.fixed(0.1)

    async def perform(self, payload: dict[str, Any]) -> list[str]:
        done = [await self.step(name, self._work, name) for name in ("one", "two", "three")]
        if self.ctx.attempt == 1:
            append("hang", str(os.getpid()))
            await asyncio.sleep(3600)
        return done

    def _work(self, name: str) -> str:
        append("steps", name)
        return name.upper()


class Node(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        await asyncio.sleep(float(payload.get("sleep", 0)))
        return int(payload.get("n", 1))


class LoggedAtLeastOnce(jobloom.Performer[dict[str, Any], int]):
    """Appends ``job_id attempt pid`` to ``starts-least`` at each start, then works 5-20 ms."""

    max_attempts = 20  # attempts lost to a server restart must not exhaust the job
    backoff = jobloom.Backoff.fixed(0.1)

    async def perform(self, payload: dict[str, Any]) -> int:
        append("starts-least", f"{self.ctx.job_id} {self.ctx.attempt} {os.getpid()}")
        await asyncio.sleep(random.uniform(0.005, 0.02))
        return self.ctx.attempt


class LoggedAtMostOnce(jobloom.Performer[dict[str, Any], int]):
    """Appends ``job_id attempt pid`` to ``starts-most`` at each start, then works 5-20 ms."""

    delivery = "at_most_once"

    async def perform(self, payload: dict[str, Any]) -> int:
        append("starts-most", f"{self.ctx.job_id} {self.ctx.attempt} {os.getpid()}")
        await asyncio.sleep(random.uniform(0.005, 0.02))
        return self.ctx.attempt


class Spanned(jobloom.Performer[dict[str, Any], None]):
    """At most 3 at once; appends ``start|end job attempt pid time`` lines to ``spans``."""

    concurrency = 3
    max_attempts = 20
    backoff = jobloom.Backoff.fixed(0.1)

    async def perform(self, payload: dict[str, Any]) -> None:
        append("spans", f"start {self.ctx.job_id} {self.ctx.attempt} {os.getpid()} {time.time()!r}")
        try:
            await asyncio.sleep(random.uniform(0.01, 0.04))
        finally:
            append("spans", f"end {self.ctx.job_id} {self.ctx.attempt} {os.getpid()} {time.time()!r}")


class Poison(jobloom.Performer[dict[str, Any], None]):
    """Fails with text no store can hold as it is (a NUL byte and a lone surrogate)."""

    max_attempts = 1

    async def perform(self, payload: dict[str, Any]) -> None:
        raise RuntimeError("bad\x00byte \ud800 here")


class Noop(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Tick(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Indexer(jobloom.BatchPerformer[dict[str, Any], None]):
    """Batches of up to 10, one batch at a time across all workers (the gauge counts batches); appends
    ``pid size`` to ``batches``; an item with ``bad`` fails on its own."""

    batch_size = 10
    batch_wait = 0.05
    concurrency = 1

    async def perform_batch(self, items: list[jobloom.BatchItem[dict[str, Any]]]) -> None:
        gauge(+1)
        try:
            append("batches", f"{os.getpid()} {len(items)}")
            await asyncio.sleep(0.01)
            for item in items:
                if item.payload.get("bad"):
                    item.fail("bad item")
        finally:
            gauge(-1)


class Dependant(jobloom.Performer[dict[str, Any], int]):
    """Appends ``job_id attempt pid ok|early`` to ``dependants``: ``early`` if any of its dependencies
    had not succeeded when it started."""

    max_attempts = 20
    backoff = jobloom.Backoff.fixed(0.1)

    async def perform(self, payload: dict[str, Any]) -> int:
        deps = await self.ctx.dependencies()
        ok = len(deps) == payload["n"] and all(j.state == "succeeded" for j in deps.values())
        append("dependants", f"{self.ctx.job_id} {self.ctx.attempt} {os.getpid()} {'ok' if ok else 'early'}")
        await asyncio.sleep(random.uniform(0.005, 0.02))
        return len(deps)


class CallChild(jobloom.Performer[dict[str, Any], int]):
    """Appends ``<job id> <attempt> <pid>`` to ``child`` as it starts; with ``hang``, its first attempt hangs."""

    backoff = jobloom.Backoff.fixed(0.1)

    async def perform(self, payload: dict[str, Any]) -> int:
        append("child", f"{self.ctx.job_id} {self.ctx.attempt} {os.getpid()}")
        if payload.get("hang") and self.ctx.attempt == 1:
            append("child-hang", str(os.getpid()))
            await asyncio.sleep(3600)
        return int(payload["n"]) * 10


class Calling(jobloom.Performer[dict[str, Any], int]):
    """Calls ``CallChild`` and returns its result. ``hang``: ``"made"`` hangs once after the child is made
    (the caller not suspended yet), ``"resumed"`` once with the child's result in hand (not reported
    yet); appends ``<pid>`` to ``hung-<hang>`` as it hangs, and ``<attempt> <result>`` to ``caller`` at the end."""

    backoff = jobloom.Backoff.fixed(0.1)

    async def perform(self, payload: dict[str, Any]) -> int:
        hang = payload.get("hang")
        call = asyncio.ensure_future(self.call(CallChild, {"n": payload["n"], "hang": payload.get("child_hang")}))
        if hang == "made" and not os.path.exists(_path("hung-made")):
            await asyncio.wait([call])  # the child is made; the call would suspend the caller now
            append("hung-made", str(os.getpid()))
            await asyncio.sleep(3600)
        result = int(await call)
        if hang == "resumed" and not os.path.exists(_path("hung-resumed")):
            append("hung-resumed", str(os.getpid()))
            await asyncio.sleep(3600)
        append("caller", f"{self.ctx.attempt} {result}")
        return result
class BatchDone(jobloom.Performer[dict[str, Any], None]):
    """A batch's callback: appends ``kind batch job_id attempt total succeeded`` to ``callbacks``."""

    max_attempts = 20
    backoff = jobloom.Backoff.fixed(0.1)

    async def perform(self, payload: dict[str, Any]) -> None:
        append("callbacks", f"{payload['kind']} {payload['batch']} {self.ctx.job_id} {self.ctx.attempt} "
                            f"{payload['total']} {payload['succeeded']}")


fan_in = jobloom.Flow("fan-in")
_a = fan_in.node("a", Node, input=lambda inp, up: {"n": 1})
_b = fan_in.node("b", Node, after=[_a], input=lambda inp, up: {"n": 2, "sleep": 0.01})
_c = fan_in.node("c", Node, after=[_a], input=lambda inp, up: {"n": 3, "sleep": 0.01})
fan_in.node("d", Node, after=[_b, _c], input=lambda inp, up: {"n": up["b"] + up["c"]})

# A declared flow as two deployments define it (JOBLOOM_IT_SHIP=2: "label" is gone, "notify" changed)
ship = jobloom.Flow("ship")
_pack = ship.node("pack", Node, input=lambda inp, up: {"n": inp["order"]})
if os.environ.get("JOBLOOM_IT_SHIP", "1") == "1":
    ship.node("label", Node, after=[_pack], input=lambda inp, up: {"n": up["pack"] + 1})
    ship.node("notify", Node, after=[_pack], input=lambda inp, up: {"n": 1})
else:
    ship.node("notify", Node, after=[_pack], input=lambda inp, up: {"n": 2})


app = jobloom.App(
    os.environ.get("JOBLOOM_IT_URL", "sqlite:///it.db"),
    performers=[Gate, Crashy, CrashyOnce, Rated, CpuBound, Plain, StepsThenHang, Node, LoggedAtLeastOnce,
                LoggedAtMostOnce, Poison, Noop, Tick, Spanned, Indexer, Dependant, CallChild, Calling, BatchDone,
                TurnTaking, KeyRated],
    flows=[fan_in, ship],
    schedules=[jobloom.Schedule("tick", every=1, performer=Tick, payload=lambda at: {"tick": at.timestamp()})]
    if os.environ.get("JOBLOOM_IT_TICK") else [],
    lease=float(os.environ.get("JOBLOOM_IT_LEASE", "1.0")),
    auto_migrate=True,
    codec=Encrypted(keys=os.environ["JOBLOOM_IT_KEYS"].split(",")) if os.environ.get("JOBLOOM_IT_KEYS") else None,
)
