"""Counting outbox events together: the read model a counted batch folds to is the one its events give."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobloom.core.outbox import COUNTED_KINDS, count_enqueues, count_events, count_starts
from jobloom.core.rows import ClaimRow, ProjectedEventRow
from jobloom.housekeeping.stats import fold

KINDS = sorted(COUNTED_KINDS | {"cancelled", "requeued", "released", "stalled", "snoozed"})
DURATIONS = st.one_of(st.none(), st.floats(min_value=-10, max_value=1e6, allow_nan=False),
                      st.sampled_from([0.0, 1e-5, 1e-5 * 1.1, -1e-12, 2.0]),
                      st.floats(min_value=0.00200, max_value=0.00201))  # one bucket, different run times
EVENT = st.fixed_dictionaries({
    "at": st.sampled_from([1000.0, 1059.999, 1060.0, 5000.5]), "job_id": st.integers(1, 10**6),
    "binding": st.sampled_from(["Ok", "日本語", "a'b"]), "kind": st.sampled_from(KINDS),
    "attempt": st.integers(0, 5), "duration": DURATIONS,
})


def rows_of(single: list[dict[str, object]], counted: list[dict[str, object]]) -> list[ProjectedEventRow]:
    """The outbox rows as ``project_events`` reads them back."""
    out = [ProjectedEventRow(0, e["at"], e["binding"], e["kind"], e["duration"]) for e in single]  # type: ignore[arg-type]
    out += [ProjectedEventRow(0, c["at"], c["binding"], c["kind"], c["duration"], c["n"], c["top"], c["bucket"])  # type: ignore[arg-type]
            for c in counted]
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(EVENT, max_size=60))
def test_counted_rows_fold_to_what_each_event_gives(events: list[dict[str, object]]) -> None:
    single, counted = count_events(events)
    assert len(single) + sum(int(c["n"]) for c in counted) == len(events)  # type: ignore[call-overload]
    assert all(int(c["n"]) >= 2 for c in counted)  # type: ignore[call-overload]
    assert all(e["kind"] in COUNTED_KINDS for e in events if e not in single)
    want = fold(rows_of(events, []))
    got = fold(rows_of(single, counted))
    assert got.keys() == want.keys()
    for key, tally in want.items():
        other = got[key]
        assert other.counts == tally.counts
        assert (other.runs, other.histogram, other.run_max) == (tally.runs, tally.histogram, tally.run_max)
        assert other.run_time == pytest.approx(tally.run_time, rel=1e-9, abs=1e-9)


def test_a_cycle_of_outcomes_is_a_row_per_kind_and_bucket_and_the_rest_name_their_jobs() -> None:
    at = 1000.0
    events = [{"at": at, "job_id": i, "binding": "Ok", "kind": "succeeded", "attempt": 1, "duration": 0.002}
              for i in range(100)]
    events += [{"at": at, "job_id": 200, "binding": "Ok", "kind": "succeeded", "attempt": 1, "duration": 5.0},
               {"at": at, "job_id": 201, "binding": "Ok", "kind": "cancelled", "attempt": 1, "duration": None},
               {"at": at, "job_id": 202, "binding": "Ok", "kind": "cancelled", "attempt": 1, "duration": None}]
    single, counted = count_events(events)
    assert [(c["kind"], c["n"], c["top"]) for c in counted] == [("succeeded", 100, 0.002)]
    assert counted[0]["duration"] == pytest.approx(0.2)
    assert sorted(int(e["job_id"]) for e in single) == [200, 201, 202]  # type: ignore[call-overload]
    assert count_events(events[:1]) == (events[:1], [])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["Ok", "Other"]), st.sampled_from(["enqueued", "scheduled", "waiting"])),
                max_size=40))
def test_counting_enqueues_is_counting_their_events(jobs: list[tuple[str, str]]) -> None:
    ids = list(range(100, 100 + len(jobs)))
    rows = [{"binding": b, "event": k} for b, k in jobs]
    events = [{"at": 5.0, "job_id": i, "binding": b, "kind": k, "attempt": 0, "duration": None}
              for i, (b, k) in zip(ids, jobs, strict=True)]
    single, counted = count_enqueues(5.0, ids, rows)
    want_single, want_counted = count_events(events)
    key = lambda r: sorted(r.items())  # noqa: E731
    assert sorted(single, key=key) == sorted(want_single, key=key)
    assert sorted(counted, key=key) == sorted(want_counted, key=key)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["Ok", "Other", "日本語"]), st.integers(1, 5)), max_size=40))
def test_counting_starts_is_counting_their_events(claims: list[tuple[str, int]]) -> None:
    rows = [ClaimRow(100 + i, b, "{}", attempt, 3, None, "at_least_once", None, None, 1.0, None)
            for i, (b, attempt) in enumerate(claims)]
    events = [{"at": 7.0, "job_id": r.id, "binding": r.binding, "kind": "started", "attempt": r.attempt,
               "duration": None} for r in rows]
    single, counted = count_starts(7.0, rows)
    want_single, want_counted = count_events(events)
    key = lambda r: sorted(r.items())  # noqa: E731
    assert sorted(single, key=key) == sorted(want_single, key=key)
    assert sorted(counted, key=key) == sorted(want_counted, key=key)
