"""The metrics telemetry: a cycle's claims and outcomes folded into the same numbers as one call per job."""

from __future__ import annotations

import random

from prometheus_client import CollectorRegistry, Histogram

from jobloom.engine.jobs import Claimed, NewJob, Outcome
from jobloom.engine.telemetry import Telemetries, Telemetry
from jobloom.observe.metrics import RUN_BUCKETS, Metrics


def claimed(job_id: int, binding: str, started: float, run_at: float) -> Claimed:
    return Claimed(job_id, binding, "{}", 1, 3, None, "at_least_once", started, run_at=run_at)


def new(binding: str) -> NewJob:
    return NewJob(binding, "{}", 0, 0.0, "queued", 3, "at_least_once", None, None, None, None, 0.0)


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    got = registry.get_sample_value(name, labels)
    return 0.0 if got is None else got


def test_a_cycle_counts_outcomes_and_histograms_as_per_job_observations_would() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry)
    reference = Histogram("ref_run_seconds", "", ["binding"], buckets=RUN_BUCKETS, registry=registry)
    rng = random.Random(5)
    jobs = [claimed(i, "A" if i % 3 else "B", 100.0, 100.0 - rng.random()) for i in range(300)]
    m.cycle(jobs, [])
    outcomes = []
    for c in jobs:
        seconds = rng.choice([0.0, 0.001, 0.005, 0.0051, 2.5, 7200.0, rng.random()])
        outcomes.append(Outcome(c.id, 1, "failed" if c.id % 7 == 0 else "succeeded", "w", 100.0, 100.0 + seconds))
        reference.labels(c.binding).observe(seconds)
    m.cycle([], outcomes)
    for binding in ("A", "B"):
        for bound in (*RUN_BUCKETS, float("inf")):
            le = "+Inf" if bound == float("inf") else str(bound)
            assert value(registry, "jobloom_job_run_seconds_bucket", binding=binding, le=le) == value(
                registry, "ref_run_seconds_bucket", binding=binding, le=le), (binding, le)
        assert abs(value(registry, "jobloom_job_run_seconds_sum", binding=binding)
                   - value(registry, "ref_run_seconds_sum", binding=binding)) < 1e-6
        n = sum(1 for c in jobs if c.binding == binding)
        assert value(registry, "jobloom_jobs_started_total", binding=binding) == n
        assert value(registry, "jobloom_job_wait_seconds_count", binding=binding) == n
    failed = sum(1 for c in jobs if c.id % 7 == 0)
    assert value(registry, "jobloom_jobs_finished_total", binding="A", outcome="failed") + value(
        registry, "jobloom_jobs_finished_total", binding="B", outcome="failed") == failed
    assert value(registry, "jobloom_worker_cycles_total") == 2
    m.cycle([], outcomes)  # the same outcomes again (a report retried): counted once
    assert value(registry, "jobloom_job_run_seconds_count", binding="A") == sum(1 for c in jobs if c.binding == "A")


def test_enqueues_are_counted_per_binding_once_committed() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry)
    m.enqueued([new("A"), new("B"), new("A")], [1, 2, 3], None, None)
    m.enqueued([new("A")], None, None, RuntimeError("rolled back"))
    assert value(registry, "jobloom_jobs_enqueued_total", binding="A") == 2
    assert value(registry, "jobloom_jobs_enqueued_total", binding="B") == 1


class Recorder(Telemetry):
    per_attempt = True
    per_enqueue = True

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def enqueue_started(self, jobs: object) -> str:
        return f"{self.name}-token"

    def enqueued(self, jobs: object, ids: object, token: object, error: object) -> None:
        self.log.append(f"{self.name} got {token}")

    def attempt_started(self, c: Claimed, worker: str) -> str:
        return f"{self.name}-attempt"

    def attempt_ended(self, c: Claimed, o: Outcome, token: object) -> None:
        self.log.append(f"{self.name} ended {token}")


class Quiet(Telemetry):
    pass


def test_telemetries_hand_each_child_its_own_token_and_ask_attempts_only_of_those_that_want_them() -> None:
    log: list[str] = []
    t = Telemetries(Quiet())
    assert not t.per_attempt
    t.add(Recorder("a", log))
    assert t.per_attempt
    token = t.enqueue_started([new("A")])
    t.enqueued([new("A")], [1], token, None)
    c = claimed(1, "A", 0.0, 0.0)
    t.attempt_ended(c, Outcome(1, 1, "succeeded", "w", 0.0, 1.0), t.attempt_started(c, "w"))
    assert log == ["a got a-token", "a ended a-attempt"]
    t.add(Recorder("b", log))  # another of the same class replaces it
    assert len(t.children) == 2 and t.find(Recorder) is t.children[-1]


class Other(Recorder):
    pass


def test_a_child_added_during_an_attempt_or_an_enqueue_is_not_asked_to_end_it() -> None:
    log: list[str] = []
    t = Telemetries(Recorder("a", log))
    c = claimed(1, "A", 0.0, 0.0)
    token, ended = t.attempt_started(c, "w"), t.attempt_ended  # as the worker keeps them
    t.add(Other("b", log))
    ended(c, Outcome(1, 1, "succeeded", "w", 0.0, 1.0), token)
    assert log == ["a ended a-attempt"]
    log.clear()
    both = t.attempt_started(c, "w")
    enq = t.enqueue_started([new("A")])
    t.add(Quiet())
    t.attempt_ended(c, Outcome(1, 1, "succeeded", "w", 0.0, 1.0), both)
    t.enqueued([new("A")], [1], enq, None)
    assert log == ["a ended a-attempt", "b ended b-attempt", "a got a-token", "b got b-token"]


def test_jobs_a_cycle_ended_expired_are_counted_as_their_outcome() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry)
    both = Telemetries()
    both.add(m)
    both.cycle([], [], (), ["A", "A", "B"])
    assert value(registry, "jobloom_jobs_finished_total", binding="A", outcome="expired") == 2
    assert value(registry, "jobloom_jobs_finished_total", binding="B", outcome="expired") == 1
    both.cycle([], [])  # a cycle that ended none
    assert value(registry, "jobloom_jobs_finished_total", binding="A", outcome="expired") == 2


def test_publishes_are_counted_by_topic_and_unsubscribed_ones_under_one_label() -> None:
    registry = CollectorRegistry()
    t = Telemetries(Metrics(registry))
    t.published("order.created", 2)
    t.published("order.created", 2)
    for i in range(50):  # any name a caller sends: one label, not fifty
        t.published(f"typo.{i}", 0)
    assert value(registry, "jobloom_topic_publishes_total", topic="order.created") == 2
    assert value(registry, "jobloom_topic_publishes_total", topic="(unsubscribed)") == 50
    assert value(registry, "jobloom_topic_publishes_total", topic="typo.1") == 0
