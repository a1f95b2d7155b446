"""Prometheus metrics of the engine: enqueues, outcomes, run and wait times, worker cycles, store retries.

:class:`Metrics` is the engine's :class:`~jobloom.engine.telemetry.Telemetry` for Prometheus: the
worker tells it each cycle's claims and outcomes as one batch, and it folds them into one increment
per (binding, outcome) and one histogram update per bucket. There is one per process
(:func:`process_metrics`), registered in :data:`REGISTRY`; under ``PROMETHEUS_MULTIPROC_DIR``
(a ``jobloom worker --metrics-port``'s processes) prometheus-client keeps the values in files that
the supervisor sums, and that outlive a process killed with ``kill -9``.

``prometheus_client`` is imported here only: nothing imports this module unless metrics are enabled.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from jobloom.engine.telemetry import Telemetry
from jobloom.store.base import observe_retries

if TYPE_CHECKING:
    from jobloom.engine.jobs import Claimed, NewJob, Outcome
    from jobloom.engine.telemetry import Telemetries

REGISTRY = CollectorRegistry(auto_describe=True)
"""The registry of jobloom's metrics in this process (not prometheus-client's default one)."""

RUN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


class Metrics(Telemetry):
    """The counters and histograms of one process, fed by the engine (see the module docstring)."""

    per_attempt = True  # an attempt's binding, outcome and run time, kept until its cycle reports it

    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.enqueued_total = Counter("jobloom_jobs_enqueued", "Jobs enqueued (inserted), by binding.",
                                      ["binding"], registry=registry)
        self.finished_total = Counter("jobloom_jobs_finished", "Attempts ended and reported by workers, "
                                      "by binding and outcome.", ["binding", "outcome"], registry=registry)
        self.started_total = Counter("jobloom_jobs_started", "Attempts started by workers, by binding.",
                                     ["binding"], registry=registry)
        self.run_seconds = Histogram("jobloom_job_run_seconds", "Seconds from an attempt's start to its end.",
                                     ["binding"], buckets=RUN_BUCKETS, registry=registry)
        self.wait_seconds = Histogram("jobloom_job_wait_seconds", "Seconds from when a job was due to its start.",
                                      ["binding"], buckets=WAIT_BUCKETS, registry=registry)
        self.cycles_total = Counter("jobloom_worker_cycles", "Worker cycles committed (report, reap, promote, "
                                    "claim).", registry=registry)
        self.cycle_failures_total = Counter("jobloom_worker_cycle_failures", "Worker cycles that failed "
                                            "(retried with backoff).", registry=registry)
        self.store_retries_total = Counter("jobloom_store_retries", "Transactions a store ran again or waited "
                                           "to begin, by store and reason.", ["store", "reason"], registry=registry)
        self._ended: list[tuple[str, str, float]] = []  # (binding, outcome, seconds) not yet counted
        self._hist: dict[tuple[int, str], Any] = {}  # labelled histogram children, by (id(histogram), binding)
        observe_retries(self._retried)

    def _retried(self, dialect: str, reason: str) -> None:
        self.store_retries_total.labels(dialect, reason).inc()

    def enqueued(self, jobs: Sequence[NewJob], ids: Sequence[int] | None, token: Any,
                 error: BaseException | None) -> None:
        """Count the inserted jobs, one increment per binding."""
        if error is not None or not jobs:
            return
        first = jobs[0].binding
        if all(j.binding == first for j in jobs):
            self.enqueued_total.labels(first).inc(len(jobs))
            return
        counts: dict[str, int] = defaultdict(int)
        for j in jobs:
            counts[j.binding] += 1
        for binding, n in counts.items():
            self.enqueued_total.labels(binding).inc(n)

    def enqueue_carry(self, jobs: Sequence[NewJob], token: Any) -> None:
        """Nothing: a streamed enqueue is counted once it committed."""

    def attempt_ended(self, claimed: Claimed, outcome: Outcome, token: Any) -> None:
        """Keep the attempt's binding, outcome and run time for the cycle that reports it."""
        self._ended.append((claimed.binding, outcome.kind, outcome.finished_at - claimed.started_at))

    def cycle(self, claimed: Sequence[Claimed], reported: Sequence[Outcome]) -> None:
        """One cycle: its starts and wait times, and the outcomes ended since the last cycle."""
        self.cycles_total.inc()
        if claimed:
            waits: dict[str, list[float]] = defaultdict(list)
            for c in claimed:
                waits[c.binding].append(0.0 if c.run_at is None else max(0.0, c.started_at - c.run_at))
            for binding, values in waits.items():
                self.started_total.labels(binding).inc(len(values))
                self._observe(self.wait_seconds, binding, values)
        if self._ended:
            ended, self._ended = self._ended, []
            outcomes: dict[tuple[str, str], int] = defaultdict(int)
            runs: dict[str, list[float]] = defaultdict(list)
            for binding, kind, seconds in ended:
                outcomes[binding, kind] += 1
                runs[binding].append(seconds)
            for (binding, kind), n in outcomes.items():
                self.finished_total.labels(binding, kind).inc(n)
            for binding, values in runs.items():
                self._observe(self.run_seconds, binding, values)

    def store_failed(self, worker: str, exc: BaseException, first: bool) -> None:
        """Count the failed cycle."""
        self.cycle_failures_total.inc()

    def _observe(self, histogram: Histogram, binding: str, values: list[float]) -> None:
        """Observe ``values`` at once: one increment per bucket that got any, one of the sum."""
        key = (id(histogram), binding)
        child = self._hist.get(key)
        if child is None:
            child = self._hist[key] = histogram.labels(binding)
        try:  # prometheus-client's own fields of a histogram (stable since 0.4); observe() one by one otherwise
            bounds, buckets, total = child._upper_bounds, child._buckets, child._sum
        except AttributeError:
            for v in values:
                child.observe(v)
            return
        hits: dict[int, int] = defaultdict(int)
        for v in values:
            hits[bisect_left(bounds, v)] += 1
        for i, n in hits.items():
            buckets[i].inc(n)
        total.inc(sum(values))


_process_metrics: Metrics | None = None


def process_metrics() -> Metrics:
    """This process's :class:`Metrics` (made at the first call, registered in :data:`REGISTRY`)."""
    global _process_metrics
    if _process_metrics is None:
        _process_metrics = Metrics()
    return _process_metrics


def enable_metrics(telemetry: Telemetries) -> Metrics:
    """Feed this process's metrics from an app's engine (``app.telemetry``); harmless if done twice."""
    metrics = process_metrics()
    if telemetry.find(Metrics) is not metrics:
        telemetry.add(metrics)
    return metrics


def multiprocess_dir() -> str | None:
    """The folder where prometheus-client keeps the values of several processes, if this process has one."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None
