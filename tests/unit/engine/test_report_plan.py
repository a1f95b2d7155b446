"""The report plan (jobloom.engine.report_plan) against a reference model of a report, written from the
rules alone: a repeated (job, attempt) counts once; an outcome for a job that is not running that very
attempt under the claim that reported it (its lease owner and started_at: a lost claim's attempt number
is taken again by the re-run's claim), or that an earlier outcome of the report already moved, is stale;
a success with a child still active holds the node, one with a child that did not succeed fails it; a
snooze past its performer's most fails the job, any other snooze schedules it with no attempt spent;
anything else follows the retry
policy (jobloom.core.lifecycle.next_state, tested on its own)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from jobloom.core import lifecycle
from jobloom.core.options import Backoff
from jobloom.core.rows import RunningRow
from jobloom.engine.jobs import Outcome
from jobloom.engine.report_plan import ReportPlan, needs_backoff, unique, verdict

NOW = 50_000.0
BACKOFF = Backoff()
KINDS = [lifecycle.SUCCEEDED, lifecycle.FAILED, lifecycle.TIMEOUT, lifecycle.RETRY, lifecycle.PERMANENT,
         lifecycle.CANCELLED, lifecycle.LOST, lifecycle.SUSPENDED, lifecycle.SNOOZED]


@dataclass(frozen=True)
class Expected:
    """What the model says one applied outcome does: the event it appends, the job's state after it (None
    for a held node), and the error recorded."""

    event: str
    state: str | None
    error: str | None


def model_report(
    outcomes: list[Outcome], rows: dict[int, RunningRow], spawned: dict[int, tuple[bool, str | None]],
    snoozes: dict[int, int],
) -> tuple[dict[tuple[int, int], Expected], list[tuple[int, int]]]:
    """The applied outcomes by (job, attempt) and the stale ones, in report order."""
    seen: set[tuple[int, int, str, float]] = set()
    moved: set[int] = set()
    applied: dict[tuple[int, int], Expected] = {}
    stale: list[tuple[int, int]] = []
    for o in outcomes:
        if (o.job_id, o.attempt, o.worker, o.started_at) in seen:
            continue
        seen.add((o.job_id, o.attempt, o.worker, o.started_at))
        row = rows.get(o.job_id)
        if (row is None or row.state != "running" or row.attempt != o.attempt or row.lease_owner != o.worker
                or row.started_at != o.started_at or o.job_id in moved):
            stale.append((o.job_id, o.attempt))
            continue
        moved.add(o.job_id)
        applied[(o.job_id, o.attempt)] = _model_one(o, row, spawned.get(o.job_id), snoozes.get(o.job_id, 0))
    return applied, stale


def _model_one(o: Outcome, row: RunningRow, spawn: tuple[bool, str | None] | None, snoozed: int) -> Expected:
    if o.kind == lifecycle.SUCCEEDED:
        if spawn is not None and spawn[0]:
            return Expected("waiting", None, o.error)
        if spawn is not None and spawn[1] is not None:
            return Expected("failed", "failed", spawn[1])
        return Expected("succeeded", "succeeded", o.error)
    most = o.max_snoozes or lifecycle.DEFAULT_MAX_SNOOZES
    if o.kind == lifecycle.SNOOZED and not row.cancel_requested:
        if snoozed < most:
            return Expected("snoozed", "scheduled", o.error)
        return Expected("failed", "failed", f"snoozed {snoozed} times, the most its performer's max_snoozes "
                        "allows: failed rather than snoozed again")
    nxt = lifecycle.next_state(
        o.kind, now=NOW, attempt=row.attempt, retries_from=row.retries_from, max_attempts=row.max_attempts,
        delivery=row.delivery, cancel_requested=row.cancel_requested, backoff=BACKOFF, retry_after=o.retry_after,
        rng=random.Random(0), snoozes=snoozed, max_snoozes=most)
    if nxt.state == "scheduled":
        return Expected("suspended" if o.kind == lifecycle.SUSPENDED else "retried", "scheduled", o.error)
    return Expected(nxt.state, nxt.state, o.error)


def run_plan(
    outcomes: list[Outcome], rows: dict[int, RunningRow], spawned: dict[int, tuple[bool, str | None]],
    snoozes: dict[int, int],
) -> tuple[ReportPlan, list[tuple[int, int]]]:
    """The plan as :func:`jobloom.engine.coordinator.report` makes it, from the same rows."""
    plan = ReportPlan(NOW)
    stale = []
    for o in unique(outcomes):
        row = rows.get(o.job_id)
        if row is None or not plan.live(o, row):
            stale.append((o.job_id, o.attempt))
            continue
        plan.add(o, row, verdict(o, row, NOW, spawned=spawned.get(o.job_id), snoozes=snoozes.get(o.job_id, 0),
                                 backoff=BACKOFF if needs_backoff(o) else None, rng=random.Random(0)))
    return plan, stale


@st.composite
def reports(draw: st.DrawFn) -> tuple[list[Outcome], dict[int, RunningRow], dict[int, tuple[bool, str | None]],
                                      dict[int, int]]:
    ids = st.integers(1, 3)
    rows = {}
    for job in draw(st.sets(ids)):
        run = draw(st.sampled_from([None, "run-1"]))
        state = draw(st.sampled_from(["running", "running", "running", "queued", "succeeded"]))
        delivery = draw(st.sampled_from(["at_least_once", "at_most_once"]))
        rows[job] = RunningRow(
            job, draw(st.sampled_from(["A", "B"])), state, draw(st.integers(1, 2)), 0, draw(st.integers(1, 3)),
            delivery, draw(st.booleans()) and draw(st.booleans()), "w1", NOW - 5, run, f"n{job}" if run else None,
            None, None, draw(st.booleans()))
    outcomes = []
    for _ in range(draw(st.integers(0, 8))):  # mostly for a job's running attempt, some for none
        job = draw(st.sampled_from(sorted(rows))) if rows and draw(st.integers(0, 4)) else draw(ids)
        attempt = rows[job].attempt if job in rows and draw(st.integers(0, 3)) else draw(st.integers(1, 2))
        kind = draw(st.sampled_from([lifecycle.SUCCEEDED, lifecycle.SNOOZED, *KINDS]))
        worker, started = draw(st.sampled_from([("w1", NOW - 5)] * 4 + [("w2", NOW - 5), ("w1", NOW - 2)]))
        outcomes.append(Outcome(job, attempt, kind, worker, started, NOW - 1,
                                error=draw(st.sampled_from([None, "boom"])),
                                retry_after=draw(st.sampled_from([None, 0.0, 30.0])),
                                max_snoozes=draw(st.sampled_from([None, 1, 2]))))
    spawned = {j: (draw(st.booleans()), draw(st.sampled_from([None, "child failed"])))
               for j, r in rows.items() if r.run_id is not None and draw(st.booleans())}
    snoozes = {j: draw(st.integers(0, 3)) for j in rows}
    return outcomes, rows, spawned, snoozes


@settings(max_examples=300, deadline=None)
@given(reports())
def test_a_report_plan_does_what_the_model_says(case: tuple) -> None:
    outcomes, rows, spawned, snoozes = case
    expected, expected_stale = model_report(outcomes, rows, spawned, snoozes)
    plan, stale = run_plan(outcomes, rows, spawned, snoozes)
    assert stale == expected_stale
    assert plan.applied == len(expected)
    by_job = {(e["job_id"], e["attempt"]): e for e in plan.events}
    assert set(by_job) == set(expected)
    assert len(plan.events) == len(expected) == len(plan.attempts)
    finishes = {(f["id"], f["attempt"]): f for f in plan.finishes}
    for key, want in expected.items():
        assert by_job[key]["kind"] == want.event, key
        attempt = next(a for a in plan.attempts if (a["job_id"], a["attempt"]) == key)
        assert attempt["error"] == want.error
        if want.event == "waiting":
            assert any((h["id"], h["attempt"]) == key for h in plan.holds)
        elif want.event == "snoozed":
            assert any((s["id"], s["attempt"]) == key for s in plan.snoozed)
        else:
            assert finishes[key]["state"] == want.state
            assert finishes[key]["error"] == want.error
            assert (finishes[key]["finished_at"] is None) == (want.state == "scheduled")
            assert finishes[key]["refund"] == (1 if want.event == "suspended" else 0)
    final = [k[0] for k, w in expected.items() if w.state not in (None, "scheduled")]
    assert plan.finished == final
    assert [f[0] for f in plan.in_runs] == [j for j in final if rows[j].run_id is not None]
    assert [f[0] for f in plan.with_dependants] == [j for j in final if rows[j].dependants]


def _row(job: int, **kw: object) -> RunningRow:
    base = RunningRow(job, "A", "running", 1, 0, 3, "at_least_once", False, "w1", NOW - 5, "run-1", f"n{job}",
                      None, None, False)
    return base._replace(**kw)


def test_a_flow_node_whose_child_failed_fails_with_its_error_and_one_with_a_child_active_waits() -> None:
    outcomes = [Outcome(1, 1, lifecycle.SUCCEEDED, "w1", NOW - 5, NOW - 1, result="1"),
                Outcome(2, 1, lifecycle.SUCCEEDED, "w1", NOW - 5, NOW - 1, result="2"),
                Outcome(3, 1, lifecycle.SUCCEEDED, "w1", NOW - 5, NOW - 1, result="3")]
    rows = {j: _row(j) for j in (1, 2, 3)}
    spawned = {1: (False, "child n1/x failed"), 2: (True, None)}
    plan, stale = run_plan(outcomes, rows, spawned, {})
    assert stale == []
    assert [(f["id"], f["state"], f["error"]) for f in plan.finishes] == [(1, "failed", "child n1/x failed"),
                                                                          (3, "succeeded", None)]
    assert plan.holds == [{"id": 2, "attempt": 1, "worker": "w1", "started_at": NOW - 5, "result": "2",
                           "payload": None}]
    assert [e["kind"] for e in plan.events] == ["failed", "waiting", "succeeded"]
    assert plan.in_runs == [(1, "run-1", "n1", "failed"), (3, "run-1", "n3", "succeeded")]
    assert plan.applied == 3 and plan.finished == [1, 3]


def test_a_second_outcome_of_a_job_in_one_report_is_stale() -> None:
    outcomes = [Outcome(1, 1, lifecycle.FAILED, "w1", NOW - 5, NOW - 1),
                Outcome(1, 1, lifecycle.SUCCEEDED, "w1", NOW - 5, NOW - 1),
                Outcome(1, 1, lifecycle.SUCCEEDED, "w2", NOW - 5, NOW - 1),
                Outcome(1, 2, lifecycle.SUCCEEDED, "w1", NOW - 5, NOW - 1)]
    plan, stale = run_plan(outcomes, {1: _row(1, run_id=None, node=None)}, {}, {})
    # the repeated claim is dropped; another claim of the attempt and attempt 2 are not the running one
    assert stale == [(1, 1), (1, 2)]
    assert [(f["id"], f["state"]) for f in plan.finishes] == [(1, "scheduled")]


def test_an_outcome_of_another_claim_of_the_same_attempt_is_stale() -> None:
    """A claim lost with the server gave its attempt number back and a re-run's claim took it again: the
    first run's report names the same attempt, but another owner or another start, and is not applied."""
    rows = {1: _row(1, lease_owner="w2", started_at=NOW - 3), 2: _row(2, started_at=NOW - 3)}
    outcomes = [Outcome(1, 1, lifecycle.SUCCEEDED, "w1", NOW - 5, NOW - 1, result="1"),
                Outcome(2, 1, lifecycle.SUCCEEDED, "w1", NOW - 5, NOW - 1, result="2")]
    plan, stale = run_plan(outcomes, rows, {}, {})
    assert stale == [(1, 1), (2, 1)] and plan.applied == 0
    # both claims' outcomes in one report: the first run's is stale, the re-run's applied
    both = [outcomes[0], Outcome(1, 1, lifecycle.SUCCEEDED, "w2", NOW - 3, NOW - 1, result="3")]
    plan, stale = run_plan(both, rows, {}, {})
    assert stale == [(1, 1)] and [(f["id"], f["worker"]) for f in plan.finishes] == [(1, "w2")]
    plan, stale = run_plan([Outcome(1, 1, lifecycle.SUCCEEDED, "w2", NOW - 3, NOW - 1, result="1")], rows, {}, {})
    assert stale == [] and [(f["id"], f["worker"], f["started_at"]) for f in plan.finishes] == [(1, "w2", NOW - 3)]
