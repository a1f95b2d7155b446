"""Gauges read from the store at scrape time: jobs by binding and state, each binding's limits and
paused flag, and the tokens in its rate bucket.

A :class:`StoreGauges` is a prometheus-client collector. The numbers come from two reads in one
read-only transaction (the job counts from the partial indexes of the active states, as
``App.counts()``; the bindings' rows), kept for ``ttl`` seconds (5 by default) so that several
scrapers, or a scrape every second, cost the store one read per ``ttl``. Succeeded and skipped jobs
are not counted (that would read the whole history): ``jobloom_jobs_finished_total`` counts outcomes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from jobloom.core.queries import Q

if TYPE_CHECKING:
    from prometheus_client import Metric

    from jobloom.core.rows import BindingRow, StateCountRow
    from jobloom.store.base import Store, Tx

log = logging.getLogger("jobloom.metrics")
COUNTED_STATES = ("waiting", "scheduled", "queued", "running", "failed", "stalled", "cancelled")
"""The states whose jobs ``jobloom_jobs`` counts: each read from its partial index."""


@dataclass(slots=True)
class Snapshot:
    """What the store said at ``at`` (a monotonic time)."""

    at: float
    now: float  # the store's clock then (for the rate buckets)
    counts: list[StateCountRow] = field(default_factory=list)
    bindings: list[BindingRow] = field(default_factory=list)


async def read_snapshot(store: Store) -> Snapshot:
    """Read the job counts and the bindings' rows in one read-only transaction."""

    async def work(tx: Tx) -> tuple[list[StateCountRow], list[BindingRow]]:
        return await tx.fetch(Q.count_by_state_indexed), await tx.fetch(Q.list_bindings)

    counts, bindings = await store.transact(work, exclusive=False)
    return Snapshot(time.monotonic(), store.now(), counts, bindings)


class StoreGauges(Collector):
    """The store's gauges (see the module docstring), for ``registry.register``.

    ``store``: the store to read, a coroutine function of the event loop that scrapes; ``bindings``:
    bindings whose job counts are shown (as zeros) even before a worker stored them. Call
    :meth:`refresh` before a scrape in async code; with ``loop`` (an event loop running in another
    thread), :meth:`collect` refreshes on it itself, waiting at most ``timeout`` seconds.
    """

    def __init__(self, store: Callable[[], Awaitable[Store]], *, ttl: float = 5.0,
                 loop: asyncio.AbstractEventLoop | None = None, timeout: float = 10.0,
                 bindings: Iterable[str] = ()) -> None:
        self.store = store
        self.bindings = tuple(bindings)  # shown with zeros even before the store knows them
        self.ttl = ttl
        self.loop = loop
        self.timeout = timeout
        self.snapshot: Snapshot | None = None
        self.error: str | None = None
        self._lock = asyncio.Lock() if loop is None else None

    def fresh(self) -> bool:
        """Whether the snapshot is younger than ``ttl``."""
        return self.snapshot is not None and time.monotonic() - self.snapshot.at < self.ttl

    async def refresh(self) -> None:
        """Read the store again unless the snapshot is fresh; a failed read keeps the last one (and says so)."""
        if self.fresh():
            return
        try:
            self.snapshot = await read_snapshot(await self.store())
            self.error = None
        except Exception as exc:  # a scrape must answer: the store's gauges are left out, the up gauge says why
            self.error = f"{type(exc).__name__}: {exc}"
            log.warning("metrics: could not read the store (%s)", self.error)

    def collect(self) -> Iterator[Metric]:
        """The gauges of the latest snapshot (refreshed first when a loop was given)."""
        if self.loop is not None and not self.fresh():
            try:
                asyncio.run_coroutine_threadsafe(self.refresh(), self.loop).result(self.timeout)
            except Exception as exc:
                self.error = f"{type(exc).__name__}: {exc}"
        up = GaugeMetricFamily("jobloom_store_up", "1 if the last read of the store's gauges succeeded.")
        up.add_metric([], 0.0 if self.error else 1.0)
        yield up
        snap = self.snapshot
        if snap is None:
            return
        yield from _families(snap, self.bindings)


def _families(snap: Snapshot, known: tuple[str, ...]) -> Iterator[Metric]:
    jobs = GaugeMetricFamily("jobloom_jobs", "Jobs by binding and state (succeeded and skipped not counted).",
                             labels=["binding", "state"])
    seen: dict[str, dict[str, int]] = {}
    for row in snap.counts:
        seen.setdefault(row.binding, {})[row.state] = row.n
    for name in (*known, *(b.binding for b in snap.bindings)):
        seen.setdefault(name, {})
    for binding in sorted(seen):
        for state in COUNTED_STATES:  # zeros too: a series that vanishes cannot be alerted on
            jobs.add_metric([binding, state], float(seen[binding].get(state, 0)))
    yield jobs
    limit = GaugeMetricFamily("jobloom_binding_concurrency_limit",
                              "A binding's concurrency limit (absent: unlimited); compare with "
                              "jobloom_jobs{state=\"running\"}.", labels=["binding"])
    paused = GaugeMetricFamily("jobloom_binding_paused", "1 if the binding is paused.", labels=["binding"])
    rate = GaugeMetricFamily("jobloom_binding_rate_limit", "A binding's rate limit in starts per second "
                             "(absent: none).", labels=["binding"])
    tokens = GaugeMetricFamily("jobloom_binding_rate_tokens", "Tokens in a binding's rate bucket now "
                               "(starts it may make at once).", labels=["binding"])
    for b in snap.bindings:
        if b.concurrency is not None:
            limit.add_metric([b.binding], float(b.concurrency))
        paused.add_metric([b.binding], 1.0 if b.paused else 0.0)
        if b.rate is not None:
            burst = float(b.burst or 1.0)
            rate.add_metric([b.binding], float(b.rate))
            held = burst if b.tokens is None or b.tokens_at is None else min(
                burst, b.tokens + b.rate * max(0.0, snap.now - b.tokens_at))
            tokens.add_metric([b.binding], held)
    yield from (limit, paused, rate, tokens)
