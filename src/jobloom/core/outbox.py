"""Outbox rows: the events a transaction appends for the read model, several counted in one row.

Every state change appends its event to the outbox (``jobloom_events``) in the transaction that makes
it; the projector folds them into the read model. A transaction that records many events of one kind,
for one binding, at one moment (a worker's cycle claiming or finishing a hundred jobs, a batch
enqueue) would write a row per job that only the count is ever read from. :func:`count_events`
writes those as one row instead: their number ``n``, their run times added up in ``duration``, the
longest in ``top``, and the histogram bucket they share in ``bucket`` (events of one kind whose run
times fall in different buckets make different rows). Such a row names no job. An event alone in its
group, and every event of a kind that a job's history shows beside its attempts (a cancel, a retry by
hand, a release), stays a row of its own, naming its job and attempt.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from jobloom.core.histogram import timed_bucket
from jobloom.core.rows import ClaimRow

K = TypeVar("K")
V = TypeVar("V")

COUNTED_KINDS = frozenset({"enqueued", "scheduled", "waiting", "started", "succeeded", "failed", "retried"})
"""Kinds whose events may be counted together: enqueues, and attempts' starts and ends (a job's
attempts, in ``jobloom_attempts``, already tell each one)."""


def count_events(events: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(rows of one event, counted rows)`` for ``events`` (``insert_event`` parameters): the first for
    ``insert_event``, the second for ``insert_counted_event``. Together they count every event once."""
    if len(events) < 2:
        return list(events), []
    single: list[dict[str, Any]] = []
    groups: dict[tuple[float, str, str, int | None], list[dict[str, Any]]] = {}
    for e in events:
        kind = e["kind"]
        if kind not in COUNTED_KINDS:
            single.append(e)
            continue
        key = (e["at"], e["binding"], kind, timed_bucket(kind, e["duration"]))
        group = groups.get(key)
        if group is None:
            groups[key] = [e]
        else:
            group.append(e)
    counted: list[dict[str, Any]] = []
    for (at, binding, kind, bucket), group in groups.items():
        if len(group) == 1:
            single.append(group[0])
            continue
        total: float | None = None
        top: float | None = None
        if bucket is not None:
            durations = [float(g["duration"]) for g in group]
            total, top = sum(durations), max(durations)
        counted.append(counted_row(at, binding, kind, len(group), total, top, bucket))
    return single, counted


def count_enqueues(at: float, ids: Sequence[int], rows: Sequence[Mapping[str, Any]]) -> tuple[
    list[dict[str, Any]], list[dict[str, Any]]
]:
    """:func:`count_events` for new jobs (``insert_job`` rows with the ``event`` kind they record, and
    their ids), without an event per job first: one counted row per binding and kind, or the event
    naming its job where a binding and kind has one job."""
    groups = _grouped(((row["binding"], row["event"]), job_id) for job_id, row in zip(ids, rows, strict=True))
    single: list[dict[str, Any]] = []
    counted: list[dict[str, Any]] = []
    for (binding, kind), group in groups.items():
        if len(group) == 1:
            single.append({"at": at, "job_id": group[0], "binding": binding, "kind": kind, "attempt": 0,
                           "duration": None})
        else:
            counted.append(counted_row(at, binding, kind, len(group)))
    return single, counted


def count_starts(at: float, claimed: Sequence[ClaimRow]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """:func:`count_events` for the ``started`` events of claimed jobs (``claim`` rows), without an event
    per job first: one counted row per binding (a claim's jobs share theirs), or the event naming its
    job and attempt where a binding has one job."""
    single: list[dict[str, Any]] = []
    counted: list[dict[str, Any]] = []
    for binding, group in _grouped((row.binding, row) for row in claimed).items():
        if len(group) == 1:
            single.append({"at": at, "job_id": group[0].id, "binding": binding, "kind": "started",
                           "attempt": group[0].attempt, "duration": None})
        else:
            counted.append(counted_row(at, binding, "started", len(group)))
    return single, counted


def _grouped(pairs: Iterable[tuple[K, V]]) -> dict[K, list[V]]:
    """The values of ``(key, value)`` pairs, grouped by key (keys in first-seen order)."""
    groups: dict[K, list[V]] = {}
    for key, value in pairs:
        group = groups.get(key)
        if group is None:
            groups[key] = [value]
        else:
            group.append(value)
    return groups


def counted_row(at: float, binding: str, kind: str, n: int, duration: float | None = None, top: float | None = None,
                bucket: int | None = None) -> dict[str, Any]:
    """One ``insert_counted_event`` row: ``n`` events of ``kind`` for ``binding`` at ``at`` (their run
    times added up in ``duration``, the longest ``top``, the histogram bucket they share)."""
    return {"at": at, "binding": binding, "kind": kind, "duration": duration, "n": n, "top": top, "bucket": bucket}


__all__ = ["COUNTED_KINDS", "count_enqueues", "count_events", "count_starts", "counted_row"]
