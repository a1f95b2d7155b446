"""Sync performers of the conformance tests: plain ``def perform``, in threads and in child processes."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

import jobloom


@dataclass
class Point:
    """A typed payload and result, to check they cross the process boundary."""

    x: int
    y: int


class Exits(jobloom.Performer[dict[str, Any], None]):
    """Raises SystemExit from a worker thread."""

    def perform(self, payload: dict[str, Any]) -> None:
        raise SystemExit(3)


class InChild(jobloom.Performer[Point, Point]):
    """Process-isolated: returns its payload moved by its attempt, with its ctx checked."""

    isolation = "process"

    def perform(self, payload: Point) -> Point:
        assert self.ctx.binding == "InChild" and threading.current_thread() is threading.main_thread()
        return Point(payload.x + self.ctx.attempt, os.getpid())


class ChildRetries(jobloom.Performer[dict[str, Any], int]):
    """Process-isolated: asks for another attempt once, then succeeds."""

    isolation = "process"

    def perform(self, payload: dict[str, Any]) -> int:
        if self.ctx.attempt == 1:
            raise jobloom.Retry(after=0, reason="not yet")
        return self.ctx.attempt


class ChildFails(jobloom.Performer[dict[str, Any], None]):
    """Process-isolated: fails with the kind of error its payload names."""

    isolation = "process"
    max_attempts = 1

    def perform(self, payload: dict[str, Any]) -> None:
        if payload["how"] == "permanent":
            raise jobloom.Permanent("card declined")
        if payload["how"] == "exit":
            os._exit(9)
        raise ValueError(f"bad value {payload['n']}")


class ChildEnv(jobloom.Performer[dict[str, Any], str]):
    """Process-isolated: reads the app's env."""

    isolation = "process"
    max_attempts = 1

    def perform(self, payload: dict[str, Any]) -> str:
        return str(self.env["greeting"])


class AsyncExits(jobloom.Performer[dict[str, Any], None]):
    """Raises SystemExit from an async perform, on the worker's event loop."""

    async def perform(self, payload: dict[str, Any]) -> None:
        raise SystemExit(4)


class ChildProgress(jobloom.Performer[dict[str, Any], None]):
    isolation = "process"

    def perform(self, payload: dict[str, Any]) -> None:
        assert self.ctx.progress(0.75, "in the child") is None
        try:
            self.ctx.progress(2, None)
        except jobloom.InvalidOption:
            pass
        else:
            raise AssertionError("a fraction of 2 was accepted")


STEP_RUNS: dict[str, list[int]] = {}


class SyncDurable(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    """A plain def perform using every durable form: step, sleep, wait_for_event and spawn."""

    def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        doubled = self.step("double", self._double, payload["n"])
        self.sleep("nap", 3600)
        data = self.wait_for_event("go", timeout=86400)
        child = self.ctx.spawn("receipt", SyncChild, {"n": doubled})
        return {"doubled": doubled, "data": data, "child": child.id}

    def _double(self, n: int) -> int:
        STEP_RUNS.setdefault("double", []).append(threading.get_ident())
        return n * 2


class SyncChild(jobloom.Performer[dict[str, Any], int]):
    def perform(self, payload: dict[str, Any]) -> int:
        return int(payload["n"]) + 1


class Cooperative(jobloom.Performer[dict[str, Any], str]):
    """Loops until the worker asks it to stop (a cancel or its timeout), then returns."""

    max_attempts = 1
    timeout = 30

    def perform(self, payload: dict[str, Any]) -> str:
        import time

        self.ctx.progress(0.0, "looping")
        while not self.ctx.cancelled:
            time.sleep(0.01)
        return "stopped"


class CooperativeTimeout(Cooperative):
    timeout = 0.3
