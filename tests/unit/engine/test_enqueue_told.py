"""Every enqueue is told to the telemetry through one object, ``EnqueueTold``: started before the insert,
ended once, with the ids or the error; nothing when no telemetry wants enqueues."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from jobloom.engine.jobs import NewJob
from jobloom.engine.telemetry import EnqueueTold, Telemetry

SRC = Path(__file__).resolve().parents[3] / "src" / "jobloom"


class Recorder(Telemetry):
    def __init__(self, wanted: bool = True) -> None:
        self.per_enqueue = wanted
        self.calls: list[tuple[Any, ...]] = []

    def enqueue_started(self, jobs: Sequence[NewJob]) -> Any:
        self.calls.append(("started", len(jobs)))
        return "token"

    def enqueued(self, jobs: Sequence[NewJob], ids: Sequence[int] | None, token: Any,
                 error: BaseException | None) -> None:
        self.calls.append(("enqueued", len(jobs), ids, token, type(error).__name__ if error else None))


JOBS: list[Any] = [object(), object()]  # only counted here


def test_an_enqueue_is_told_once_with_its_ids_or_its_error() -> None:
    tel = Recorder()
    with EnqueueTold(tel, JOBS) as told:
        told.done([7], JOBS[:1])  # one of the two was made now
    assert tel.calls == [("started", 2), ("enqueued", 1, [7], "token", None)]

    tel = Recorder()
    with pytest.raises(KeyError), EnqueueTold(tel, JOBS):
        raise KeyError("insert failed")
    assert tel.calls == [("started", 2), ("enqueued", 2, None, "token", "KeyError")]

    tel = Recorder(wanted=False)
    with pytest.raises(KeyError), EnqueueTold(tel, JOBS) as told:
        told.done([1, 2])
        raise KeyError("never told")
    assert tel.calls == []


def test_nothing_else_calls_the_telemetrys_enqueue_methods() -> None:
    calls = re.compile(r"\.(enqueue_started|enqueue_carry|enqueued)\(")
    found = [f"{path.relative_to(SRC)}:{n}" for path in SRC.rglob("*.py") if path.name != "telemetry.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if calls.search(line)]
    assert found == [], "tell the telemetry of an enqueue through engine.telemetry.EnqueueTold"
