"""The benchmark workloads: enqueue, drain, latency, limits and history (flows: :mod:`jobloom.bench.flow_workloads`).

Each workload runs against private stores (:mod:`jobloom.bench.sandbox`), with no-op jobs unless
it says otherwise, and returns :class:`~jobloom.bench.model.Measurement` values. Throughput of
workers is taken from the store's own timestamps (first ``started_at`` to last ``finished_at``),
so process start-up and the bench's polling are not counted.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import jobloom
from jobloom.bench.model import Measurement
from jobloom.bench.performers import ACTIVE_KEYS, LATENCY_APP_REF, Limited, Noop, Stamped, Turns
from jobloom.bench.processes import BenchError, Launcher, Producer, WorkerGroup, popen
from jobloom.bench.progress import Reporter
from jobloom.bench.sandbox import Sandbox, Target
from jobloom.engine.performer import Performer

DEFAULT_JOBS = 20_000
DEFAULT_LATENCY_JOBS = 500
FILL_BATCH = 5_000
POLL = 0.3  # each poll counts the measured jobs: polling less often loads the measured machine less
IDLE = 0.5  # what the latency workloads measure is waking an idle worker: it is left idle this long first


@dataclass(slots=True)
class Params:
    """The knobs of a run. ``jobs=None`` means each workload's default (20,000; latency 500).

    ``pairs``: how many times limits and history alternate their two drains (the ratio is of medians).
    ``poll``: seconds between two counts of the jobs a workload waits for; ``idle``: seconds the latency
    workloads leave their worker idle after its warm-up job, before the jobs they time (both sized for
    thousands of jobs: a run of a few dozen may shorten them).
    """

    jobs: int | None = None
    concurrency: int = 100
    processes: tuple[int, ...] = (1, 2)
    tasks: int = 100
    batch: int = 1_000
    rate: float = 50.0
    history_rows: int = 1_000_000
    pairs: int = 3
    timeout: float | None = None
    poll: float = POLL
    idle: float = IDLE

    def n(self, default: int = DEFAULT_JOBS) -> int:
        """The job count for a workload whose default is ``default``."""
        return self.jobs if self.jobs is not None else default

    def deadline(self, n: int) -> float:
        """Seconds to wait for ``n`` jobs to finish before calling the run failed."""
        return self.timeout if self.timeout is not None else max(120.0, n / 100)


@dataclass(slots=True)
class Context:
    """What a workload works with: the user's store, the parameters, the progress reporter, and what
    starts its worker and producer processes."""

    target: Target
    params: Params
    progress: Reporter = field(default_factory=Reporter)
    launcher: Launcher = popen

    async def sandbox(self) -> Sandbox:
        """A fresh, migrated private store."""
        box = self.target.sandbox()
        await box.prepare()
        return box


Workload = Callable[[Context], Awaitable[list[Measurement]]]


# -- enqueue ---------------------------------------------------------------------------------------


async def _timed_enqueue(
    ctx: Context, label: str, n: int, body: Callable[[jobloom.App, Callable[[int], None]], Awaitable[None]]
) -> tuple[float, float]:
    """Run ``body`` on a fresh store; return (jobs per second, seconds). One warm-up job is not timed."""
    box = await ctx.sandbox()
    app = box.app()
    try:
        await app.enqueue(Noop, {"i": -1})
        ctx.progress.begin(label, n)
        t0 = time.perf_counter()
        await body(app, ctx.progress.update)
        seconds = time.perf_counter() - t0
        ctx.progress.end()
        stored = box.last_id() - 1
        if stored != n:
            raise BenchError(f"{label}: {stored} jobs stored, {n} expected")
    finally:
        await app.close()
        box.close()
    return n / seconds, seconds


async def enqueue(ctx: Context) -> list[Measurement]:
    """Enqueue N jobs: one awaited call at a time; from concurrent tasks (coalesced); with ``enqueue_many``."""
    n, tasks, batch = ctx.params.n(), ctx.params.tasks, ctx.params.batch
    step = max(1, n // 100)

    async def sequential(app: jobloom.App, tick: Callable[[int], None]) -> None:
        for i in range(n):
            await app.enqueue(Noop, {"i": i})
            if i % step == 0:
                tick(i)

    async def concurrent(app: jobloom.App, tick: Callable[[int], None]) -> None:
        done = [0]

        async def one_task(first: int) -> None:
            for i in range(first, n, tasks):
                await app.enqueue(Noop, {"i": i})
                done[0] += 1
                if done[0] % step == 0:
                    tick(done[0])

        await asyncio.gather(*(one_task(k) for k in range(tasks)))

    async def many(app: jobloom.App, tick: Callable[[int], None]) -> None:
        for start in range(0, n, batch):
            await app.enqueue_many([(Noop, {"i": i}) for i in range(start, min(n, start + batch))])
            tick(min(n, start + batch))

    out = []
    for key, label, body, how in (
        ("enqueue.sequential", "enqueue, one awaited call at a time", sequential, {}),
        ("enqueue.concurrent", f"enqueue, {tasks} concurrent tasks", concurrent, {"tasks": tasks}),
        ("enqueue.many", f"enqueue_many, {batch:,} jobs per call", many, {"batch": batch}),
    ):
        rate, seconds = await _timed_enqueue(ctx, label, n, body)
        out.append(Measurement(key, label, rate, "jobs/s", details={"jobs": n, "seconds": seconds, **how}))
    return out


# -- drain -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class Drained:
    """One drain: throughput from the store's timestamps, and the workers' peak memory."""

    jobs: int
    seconds: float
    rate: float
    peak_rss_mb: float | None
    wall_seconds: float

    def details(self, processes: int, concurrency: int, **extra: Any) -> dict[str, Any]:
        """The figures behind a measurement."""
        return {"jobs": self.jobs, "processes": processes, "concurrency": concurrency,
                "seconds": round(self.seconds, 4), "wall_seconds": round(self.wall_seconds, 3),
                "peak_rss_mb": None if self.peak_rss_mb is None else round(self.peak_rss_mb, 1), **extra}


async def fill(box: Sandbox, n: int, performer: type[Performer[Any, Any]] = Noop,
               tick: Callable[[int], None] | None = None, extra: dict[str, Any] | None = None) -> None:
    """Queue ``n`` jobs (set-up, not measured) with ``enqueue_many`` (payloads ``{"i": i, **extra}``)."""
    app = box.app()
    try:
        for start in range(0, n, FILL_BATCH):
            end = min(n, start + FILL_BATCH)
            await app.enqueue_many([(performer, {"i": i, **(extra or {})}) for i in range(start, end)])
            if tick is not None:
                tick(end)
    finally:
        await app.close()


async def wait_finished(
    ctx: Context, box: Sandbox, after_id: int, n: int, label: str, alive: Callable[[], None],
    output: Callable[[], str] = lambda: "",
) -> None:
    """Poll the store until ``n`` jobs above ``after_id`` are finished; all must have succeeded."""
    await wait_for(ctx, lambda: box.finished(after_id), n, label, alive, output)


async def wait_for(
    ctx: Context, count: Callable[[], tuple[int, int]], n: int, label: str, alive: Callable[[], None],
    output: Callable[[], str] = lambda: "", what: str = "jobs",
) -> None:
    """Poll ``count()`` (finished, not succeeded) until ``n`` are finished; all must have succeeded."""
    deadline = time.monotonic() + ctx.params.deadline(n)
    ctx.progress.begin(label, n)
    while True:
        finished, failed = count()
        ctx.progress.update(finished)
        if failed:
            raise BenchError(f"{label}: {failed} {what} did not succeed")
        if finished >= n:
            break
        alive()
        if time.monotonic() > deadline:
            said = output().strip()
            raise BenchError(f"{label}: only {finished} of {n} {what} finished within {ctx.params.deadline(n):.0f} s"
                             + (f"; the workers said:\n{said}" if said else ""))
        await asyncio.sleep(ctx.params.poll)
    ctx.progress.end()


async def drain_once(
    ctx: Context, box: Sandbox, n: int, *, processes: int, performer: type[Performer[Any, Any]] = Noop,
    label: str = "drain", extra: dict[str, Any] | None = None,
) -> Drained:
    """Queue ``n`` jobs, then run ``jobloom worker`` until all are done; measure from the store."""
    ctx.progress.begin(f"{label}: queueing", n)
    after = box.last_id()
    await fill(box, n, performer, ctx.progress.update, extra)
    ctx.progress.end()
    group = WorkerGroup(box, processes=processes, concurrency=ctx.params.concurrency,
                        bindings=[performer.binding or performer.__name__], launcher=ctx.launcher)
    t0 = time.perf_counter()
    group.start()
    try:
        await wait_finished(ctx, box, after, n, label, group.check, group.output)
        wall = time.perf_counter() - t0
    finally:
        group.stop()
    count, first, last = box.span(after)
    if count != n or first is None or last is None:
        raise BenchError(f"{label}: {count} of {n} jobs succeeded")
    seconds = max(float(last) - float(first), 1e-9)
    return Drained(n, seconds, n / seconds, group.peak_rss_mb, wall)


async def drain(ctx: Context) -> list[Measurement]:
    """N queued jobs, then one ``jobloom worker`` with 1 process (and with 2) runs them all."""
    n, c = ctx.params.n(), ctx.params.concurrency
    out = []
    for p in ctx.params.processes:
        box = await ctx.sandbox()
        try:
            label = f"drain, {p} process{'es' if p > 1 else ''} x {c}"
            d = await drain_once(ctx, box, n, processes=p, label=label)
        finally:
            box.close()
        details = d.details(p, c)
        out.append(Measurement(f"drain.p{p}", label, d.rate, "jobs/s", details=details))
        out.append(Measurement(f"drain.p{p}.rss", f"{label}: worker peak RSS", d.peak_rss_mb, "MiB",
                               better="lower", details=details))
    return out


# -- latency ---------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile (``q`` in 0..100) of non-empty ``values``."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


async def start_delays(ctx: Context, box: Sandbox, group: WorkerGroup, n: int, rate: float, what: str) -> list[float]:
    """Start ``group``, let its worker run a warm-up job and go idle, then enqueue ``n`` :class:`Stamped`
    jobs at ``rate`` from another process: each job's time (ms) from enqueue to the start of ``perform``.
    The caller stops ``group``."""
    after = await stamped_jobs(ctx, box, group, n, rate, what)
    return [d * 1000 for d in box.start_delays(after)]


async def stamped_jobs(ctx: Context, box: Sandbox, group: WorkerGroup, n: int, rate: float, what: str) -> int:
    """The run behind :func:`start_delays`, until the ``n`` jobs have finished; the id after which they
    are (each job's result is the moment its ``perform`` began). The caller stops ``group``."""
    group.start()
    warm = box.last_id()
    app = box.app(latency=True)
    try:
        await app.enqueue(Stamped, {"i": -1})
    finally:
        await app.close()
    await wait_finished(ctx, box, warm, 1, f"{what}: warm-up job", group.check, group.output)
    await asyncio.sleep(ctx.params.idle)  # let the worker go idle: what is measured is waking it
    after = box.last_id()
    producer = Producer(box, rate=rate, count=n, launcher=ctx.launcher)
    try:
        def alive() -> None:
            group.check()
            producer.done()  # raises if it failed

        await wait_finished(ctx, box, after, n, f"{what}: {n} jobs at {rate:g}/s", alive, group.output)
        return after
    finally:
        producer.stop()


async def latency(ctx: Context) -> list[Measurement]:
    """An idle worker; jobs enqueued at a steady rate from another process; enqueue-to-start times.

    A job starts when its ``perform`` begins (:class:`Stamped` returns that moment), not when the
    worker's cycle claimed it: the time between is part of what a job waits."""
    n, rate, c = ctx.params.n(DEFAULT_LATENCY_JOBS), ctx.params.rate, ctx.params.concurrency
    box = await ctx.sandbox()
    group = WorkerGroup(box, processes=1, concurrency=c, app_ref=LATENCY_APP_REF, bindings=[Stamped.__name__],
                        launcher=ctx.launcher)
    try:
        ctx.progress.begin("latency: worker warming up", None)
        delays = await start_delays(ctx, box, group, n, rate, "latency")
    finally:
        group.stop()
        box.close()
    details = {"jobs": len(delays), "rate": rate, "processes": 1, "concurrency": c,
               "mean_ms": round(sum(delays) / len(delays), 3)}
    return [
        Measurement("latency.p50", "latency p50, enqueue to start", percentile(delays, 50), "ms", "lower",
                    details=details),
        Measurement("latency.p99", "latency p99, enqueue to start", percentile(delays, 99), "ms", "lower",
                    details=details),
        Measurement("latency.max", "latency max, enqueue to start", max(delays), "ms", "lower", details=details),
    ]


# -- limits and history: the same drain, with and without ---------------------------------------


def _median(runs: list[Drained]) -> float:
    return statistics.median(d.rate for d in runs)


def _pair_ratio(tops: list[Drained], bottoms: list[Drained]) -> float:
    """The median over pairs of ``top / bottom``: each pair ran back to back, so it shares the
    machine's state (on a shared virtual machine the speed of a core can move by half in seconds)."""
    return statistics.median(t.rate / b.rate for t, b in zip(tops, bottoms, strict=True))


async def limits(ctx: Context) -> list[Measurement]:
    """The drain with concurrency, per-key and rate limits set high enough never to bind, against none;
    and the drain of a binding whose keys take turns (with a rate per key), over 1,000 keys and over none.

    The drains alternate ``pairs`` times (none, limited, none, ...) on fresh stores; the ratio
    is the median of the pairs' ratios.
    """
    n, c, pairs = ctx.params.n(), ctx.params.concurrency, ctx.params.pairs
    runs: dict[str, list[Drained]] = {"none": [], "limited": [], "no_keys": [], "keys": []}
    drains: tuple[tuple[str, type[Performer[Any, Any]], dict[str, Any] | None], ...] = (
        ("none", Noop, None), ("limited", Limited, None), ("no_keys", Turns, {"no_key": True}), ("keys", Turns, None))
    for k in range(pairs):
        for name, performer, extra in drains:
            box = await ctx.sandbox()
            try:
                runs[name].append(await drain_once(ctx, box, n, processes=1, performer=performer,
                                                   label=f"limits: drain, {name} ({k + 1}/{pairs})", extra=extra))
            finally:
                box.close()
    none, limited = _median(runs["none"]), _median(runs["limited"])
    how = "concurrency, per-key (100 keys) and rate limits that never bind"

    def details(name: str, **extra: Any) -> dict[str, Any]:
        return {"jobs": n, "processes": 1, "concurrency": c, "pairs": pairs,
                "rates": [round(d.rate) for d in runs[name]],
                "peak_rss_mb": max((d.peak_rss_mb or 0.0) for d in runs[name]), **extra}

    return [
        Measurement("limits.none", "limits: drain, no limits", none, "jobs/s", details=details("none")),
        Measurement("limits.limited", "limits: drain, limits set", limited, "jobs/s",
                    details=details("limited", limits=how)),
        Measurement("limits.ratio", "limits: limited / none", _pair_ratio(runs["limited"], runs["none"]), "ratio",
                    details={"limits": how, "pairs": pairs, "ratios": [
                        round(t.rate / b.rate, 3) for t, b in zip(runs["limited"], runs["none"], strict=True)]}),
        *_keys_measurements(runs, details),
    ]


def _keys_measurements(runs: dict[str, list[Drained]], details: Callable[..., dict[str, Any]]) -> list[Measurement]:
    """The drains of a binding whose keys take turns (with a rate per key), over ``ACTIVE_KEYS`` keys
    and over none, and their ratio."""
    how = f"fairness round_robin, key_rate_limit that never binds, {ACTIVE_KEYS} keys"
    return [
        Measurement("limits.turns_no_keys", "limits: drain, turns, no key", _median(runs["no_keys"]), "jobs/s",
                    details=details("no_keys", limits=how)),
        Measurement("limits.turns_keys", f"limits: drain, turns, {ACTIVE_KEYS:,} keys", _median(runs["keys"]),
                    "jobs/s", details=details("keys", limits=how)),
        Measurement("limits.keys_ratio", f"limits: {ACTIVE_KEYS:,} keys / no key",
                    _pair_ratio(runs["keys"], runs["no_keys"]), "ratio", details={"limits": how, "ratios": [
                        round(t.rate / b.rate, 3) for t, b in zip(runs["keys"], runs["no_keys"], strict=True)]}),
    ]


async def history(ctx: Context) -> list[Measurement]:
    """The drain on a table already holding many finished jobs, against an empty one.

    The table with history is filled once; drains on it alternate ``pairs`` times with drains on
    fresh empty stores; the ratio is the median of the pairs' ratios.
    """
    n, c, rows, pairs = ctx.params.n(), ctx.params.concurrency, ctx.params.history_rows, ctx.params.pairs
    runs: dict[str, list[Drained]] = {"empty": [], "full": []}
    full_box = await ctx.sandbox()
    try:
        ctx.progress.begin(f"history: inserting {rows:,} finished jobs", None)
        t0 = time.perf_counter()
        await asyncio.to_thread(full_box.insert_history, rows)
        setup = time.perf_counter() - t0
        ctx.progress.end()
        for k in range(pairs):
            box = await ctx.sandbox()
            try:
                runs["empty"].append(await drain_once(ctx, box, n, processes=1,
                                                      label=f"history: drain, empty table ({k + 1}/{pairs})"))
            finally:
                box.close()
            runs["full"].append(await drain_once(ctx, full_box, n, processes=1,
                                                 label=f"history: drain, {rows:,} finished ({k + 1}/{pairs})"))
    finally:
        full_box.close()
    empty, full = _median(runs["empty"]), _median(runs["full"])

    def details(name: str, **extra: Any) -> dict[str, Any]:
        return {"jobs": n, "processes": 1, "concurrency": c, "pairs": pairs,
                "rates": [round(d.rate) for d in runs[name]], **extra}

    return [
        Measurement("history.empty", "history: drain, empty table", empty, "jobs/s", details=details("empty")),
        Measurement("history.full", f"history: drain, {rows:,} finished jobs", full, "jobs/s",
                    details=details("full", history_rows=rows, setup_seconds=round(setup, 1))),
        Measurement("history.ratio", "history: full / empty", _pair_ratio(runs["full"], runs["empty"]), "ratio",
                    details={"history_rows": rows, "pairs": pairs, "ratios": [
                        round(t.rate / b.rate, 3) for t, b in zip(runs["full"], runs["empty"], strict=True)]}),
    ]
