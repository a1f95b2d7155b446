"""Prometheus metrics of the engine: enqueues, outcomes, run and wait times, worker cycles, store retries.

:class:`Metrics` is the engine's :class:`~jobloom.engine.telemetry.Telemetry` for Prometheus: the
worker tells it each cycle's claims and outcomes as one batch, and it folds them into one increment
per (binding, outcome) and one histogram update per bucket. There is one per process
(:func:`process_metrics`), registered in prometheus-client's default registry; under ``PROMETHEUS_MULTIPROC_DIR``
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

from jobloom.core.extras import needs_extra
from jobloom.engine.telemetry import Telemetry
from jobloom.store.base import observe_retries

with needs_extra("metrics", "jobloom.observe.metrics"):
    from prometheus_client import REGISTRY as DEFAULT_REGISTRY
    from prometheus_client import CollectorRegistry, Counter, Histogram

if TYPE_CHECKING:
    from jobloom.engine.jobs import Claimed, NewJob, Outcome
    from jobloom.engine.telemetry import Telemetries

REGISTRY: CollectorRegistry = DEFAULT_REGISTRY
"""The registry of jobloom's metrics in this process: prometheus-client's default one, so that an
exposition the app already has (its own ``/metrics``) shows them too."""

RUN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
MAX_TRACKED = 100_000
"""Jobs claimed and not reported that :class:`Metrics` keeps the binding of, at most."""
UNSUBSCRIBED = "(unsubscribed)"
"""The ``topic`` label of publishes to a topic nobody subscribes to (no topic name has parentheses)."""
WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


class Metrics(Telemetry):
    """The counters and histograms of one process, fed by the engine (see the module docstring)."""

    per_enqueue = True

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
        self.publishes_total = Counter("jobloom_topic_publishes", "Events published to a topic, by topic; "
                                       f"those to a topic nobody subscribes to as topic={UNSUBSCRIBED!r}.",
                                       ["topic"], registry=registry)
        self._claimed: dict[int, str] = {}  # the binding of each job claimed here and not reported yet
        self._children: dict[tuple[int, str, str], Any] = {}  # labelled children, by (id(metric), *labels)
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

    def cycle(self, claimed: Sequence[Claimed], reported: Sequence[Outcome], reaped: Sequence[str] = (),
              expired: Sequence[str] = ()) -> None:
        """One cycle: the outcomes it stored (of jobs claimed since metrics were on), the attempts it reaped
        (outcome ``lost``), the jobs it ended unstarted past their expiry (outcome ``expired``), its starts
        and waits."""
        self.cycles_total.inc()
        known = self._claimed
        for lost in reaped:  # rare: a worker vanished
            self._child(self.finished_total, lost, "lost").inc()
        for ended in expired:
            self._child(self.finished_total, ended, "expired").inc()
        if reported:
            outcomes: dict[tuple[str, str], int] = defaultdict(int)
            runs: dict[str, list[float]] = defaultdict(list)
            for o in reported:
                binding = known.pop(o.job_id, None)
                if binding is not None:
                    outcomes[binding, o.kind] += 1
                    runs[binding].append(o.finished_at - o.started_at)
            for (binding, kind), n in outcomes.items():
                self._child(self.finished_total, binding, kind).inc(n)
            for binding, values in runs.items():
                self._observe(self.run_seconds, binding, values)
        if claimed:
            if len(known) > MAX_TRACKED:  # outcomes reported outside cycles (after a failed one): forget them
                known.clear()
            waits: dict[str, list[float]] = defaultdict(list)
            for c in claimed:
                known[c.id] = c.binding
                waits[c.binding].append(0.0 if c.run_at is None else max(0.0, c.started_at - c.run_at))
            for binding, values in waits.items():
                self._child(self.started_total, binding).inc(len(values))
                self._observe(self.wait_seconds, binding, values)

    def published(self, topic: str, jobs: int) -> None:
        """Count the publish: by its topic if a binding subscribes to it (the app's own topics, a bounded
        set), else under :data:`UNSUBSCRIBED` (any name a caller sends would grow the labels without end)."""
        self._child(self.publishes_total, topic if jobs else UNSUBSCRIBED).inc()

    def store_failed(self, worker: str, exc: BaseException, first: bool) -> None:
        """Count the failed cycle."""
        self.cycle_failures_total.inc()

    def _child(self, metric: Any, first: str, second: str = "") -> Any:
        """``metric.labels(...)``, remembered (labels() takes a lock and builds a tuple each time)."""
        key = (id(metric), first, second)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(first, second) if second else metric.labels(first)
        return child

    def _observe(self, histogram: Histogram, binding: str, values: list[float]) -> None:
        """Observe ``values`` at once: one increment per bucket that got any, one of the sum."""
        child = self._child(histogram, binding)
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
