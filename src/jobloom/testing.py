"""Helpers for testing your own jobs: a clock the test moves, and assertions on what was enqueued.

::

    clock = jobloom.testing.TestClock()
    app = jobloom.App("sqlite:///test.db", performers=[SendMail], clock=clock)
    await app.enqueue(SendMail, Mail(to="a@example.com"), delay=3600)
    await jobloom.testing.assert_enqueued(app, SendMail, payload={"to": "a@example.com"})
    await clock.advance(3600)     # the hour passes at once: the job runs, as do schedules due meanwhile

Every decision of an app built with ``clock=`` reads the clock (delays, backoff, durable sleeps, run
deadlines, schedules, leases, retention, rate tokens): nothing waits for real time.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jobloom.core.errors import InvalidOption, JobloomError
from jobloom.core.options import MAX_DELAY, finite
from jobloom.core.types import Job
from jobloom.engine.worker import Worker

if TYPE_CHECKING:
    from jobloom.app.facade import App
    from jobloom.engine.enqueue import PerformerRef

MAX_STOPS = 100_000
"""Moments one :meth:`TestClock.advance` stops at, at most (an every-second schedule over a day is 86,400)."""
UNSTARTED = ("waiting", "scheduled", "queued")
_ANY: Any = object()


class TestClock:
    """A clock the test controls: ``App(..., clock=clock)``, then :meth:`advance` moves time on.

    It starts at ``start`` (a datetime or epoch seconds; default: now) and stands still until moved.
    Time only goes forward.
    """

    __test__ = False  # not a test class, whatever pytest thinks of its name

    def __init__(self, start: datetime | float | None = None) -> None:
        if start is None:
            self._now = time.time()
        elif isinstance(start, datetime):
            if start.tzinfo is None:
                raise InvalidOption("start", start, "an aware datetime (with a tzinfo) or epoch seconds")
            self._now = start.timestamp()
        else:
            self._now = finite("start", start, minimum=-MAX_DELAY)
        self._apps: weakref.WeakSet[App] = weakref.WeakSet()

    def now(self) -> float:
        """The clock's time, in epoch seconds."""
        return self._now

    def attach(self, app: App) -> None:
        """Remember ``app`` (each ``App`` built with this clock calls it): :meth:`advance` drives it."""
        self._apps.add(app)

    def set(self, when: datetime | float) -> None:
        """Move to ``when`` at once, running nothing (like a spell in which no worker ran): what came
        due meanwhile runs at the next ``app.drain()``, and schedules catch up by their ``catch_up``."""
        target = when.timestamp() if isinstance(when, datetime) else finite("when", when, minimum=-MAX_DELAY)
        if target < self._now:
            raise InvalidOption("when", when, f"a moment not before the clock's time ({self._now})")
        self._now = target

    def jump(self, seconds: float) -> None:
        """Move ``seconds`` on at once, running nothing (see :meth:`set`)."""
        self._now += finite("seconds", seconds, maximum=MAX_DELAY)

    async def advance(self, seconds: float) -> int:
        """Let ``seconds`` pass as if workers ran all along; return how many attempts ran.

        The clock stops at every moment something becomes due on the way (a scheduled job or retry,
        a durable sleep's end, a schedule's tick, a run's deadline, a lease's expiry) and drains every
        app built with it there (``app.drain()``): an hourly schedule fires twice in ``advance(7200)``,
        and a retry that fails again is retried after its next backoff, all within the time given."""
        target = self._now + finite("seconds", seconds, maximum=MAX_DELAY)
        ran = 0
        for _ in range(MAX_STOPS):
            due: float | None = None
            for app in list(self._apps):
                n, when = await _drain(app)
                ran += n
                if when is not None:
                    due = when if due is None else min(due, when)
            if due is None or due > target:
                break
            # something due now that draining could not run (a failing schedule) is tried again a
            # second later, as a worker would
            self._now = max(due, self._now + 1.0) if due <= self._now else due
            if self._now > target:
                break
        else:
            raise JobloomError(f"TestClock.advance({seconds}) stopped at {MAX_STOPS} moments before reaching "
                               "its end: advance in smaller steps, or use jump() to skip time without running it")
        self._now = target
        for app in list(self._apps):
            ran += (await _drain(app))[0]
        return ran

    def __repr__(self) -> str:
        return f"TestClock({datetime.fromtimestamp(self._now).astimezone().isoformat()})"


async def _drain(app: App) -> tuple[int, float | None]:
    """Drain ``app`` at the current time; the attempts run and the next moment something is due."""
    worker = Worker(app, concurrency=32)
    ran = await worker.drain()
    store = await app.store()
    now = app.now()
    moments = [worker.next_due] + [await keeper.planned(store, now) for keeper in app.housekeepers]
    due = [m for m in moments if m is not None]
    return ran, (min(due) if due else None)


# -- assertions -----------------------------------------------------------------------------------


async def enqueued(app: App, performer: PerformerRef, *, payload: Any = _ANY, tags: Iterable[str] | None = None,
                   state: str | Sequence[str] = UNSTARTED) -> list[Job]:
    """The jobs of ``performer`` in ``state`` (default: not started yet: waiting, scheduled or queued) that
    match, oldest first.

    ``payload``: a dict matches every job whose payload has those keys with those values; another value
    (a dataclass, a model) is validated as the performer's payload and matches an equal payload.
    ``tags``: jobs that carry every one of them."""
    spec = app.spec(performer)
    states = [state] if isinstance(state, str) else list(state)
    want_tags = None if tags is None else set(tags)
    if payload is _ANY or isinstance(payload, dict):
        expected = payload
    else:
        import json

        expected = json.loads(spec.dump_payload(payload))
    exact = not isinstance(payload, dict)
    found: list[Job] = []
    for st in states:
        for job in await app.list_jobs(state=st, binding=spec.binding, limit=100_000):
            if expected is not _ANY and not _payload_matches(job.payload, expected, exact=exact):
                continue
            if want_tags is not None and not want_tags <= set(getattr(job, "tags", None) or ()):
                continue
            found.append(job)
    return sorted(found, key=lambda j: j.id)


def _payload_matches(actual: Any, expected: Any, *, exact: bool) -> bool:
    if exact or not isinstance(actual, dict):
        return bool(actual == expected)
    return all(k in actual and actual[k] == v for k, v in expected.items())


async def assert_enqueued(app: App, performer: PerformerRef, *, payload: Any = _ANY,
                          tags: Iterable[str] | None = None, state: str | Sequence[str] = UNSTARTED,
                          count: int | None = None) -> list[Job]:
    """Fail (``AssertionError``) unless a job of ``performer`` matching ``payload`` and ``tags`` is enqueued
    (exactly ``count`` of them, if given); return the matching jobs, oldest first. The arguments are
    those of :func:`enqueued`; the message lists what is enqueued instead."""
    found = await enqueued(app, performer, payload=payload, tags=tags, state=state)
    if (count is None and found) or (count is not None and len(found) == count):
        return found
    spec = app.spec(performer)
    others = await enqueued(app, performer, state=state)
    wanted = ", ".join(f"{k}={v!r}" for k, v in (("payload", payload), ("tags", tags)) if v is not _ANY and v)
    listed = "; ".join(_describe(j) for j in others[:10]) or "none"
    raise AssertionError(
        f"expected {'a' if count is None else count} {spec.binding} job(s) in {_states(state)}"
        f"{' with ' + wanted if wanted else ''}, found {len(found)}. {spec.binding} jobs there: {listed}"
        + (f" (and {len(others) - 10} more)" if len(others) > 10 else "")
    )


async def assert_not_enqueued(app: App, performer: PerformerRef, *, payload: Any = _ANY,
                              tags: Iterable[str] | None = None, state: str | Sequence[str] = UNSTARTED) -> None:
    """Fail (``AssertionError``) if a job of ``performer`` matching ``payload`` and ``tags`` is enqueued."""
    found = await enqueued(app, performer, payload=payload, tags=tags, state=state)
    if found:
        raise AssertionError(f"expected no such {app.spec(performer).binding} job in {_states(state)}, found "
                             + "; ".join(_describe(j) for j in found[:10]))


def _states(state: str | Sequence[str]) -> str:
    return state if isinstance(state, str) else "/".join(state)


def _describe(job: Job) -> str:
    tags = getattr(job, "tags", None)
    return f"#{job.id} {job.state} payload={job.payload_json[:200]}" + (f" tags={list(tags)}" if tags else "")


__all__ = ["TestClock", "assert_enqueued", "assert_not_enqueued", "enqueued"]
