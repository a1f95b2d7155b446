"""The job state machine of ``jobloom.states`` against every SQL statement that changes a job's state.

Each dialect's named SQL is read, and every statement that sets ``state`` on ``jobloom_jobs`` is
found by parsing it (``UPDATE jobloom_jobs ... SET state = ...``). Each one must have a driver
here: the driver runs it on a real store, on jobs seeded in every state, the way jobloom's code
calls it, and every row's (before, after) is compared with the statement's transition in
``jobloom.states``. A statement that moves a job where its transition does not allow fails; so does
a transition that allows a move its statement never makes (the definition is kept tight).
"""

from __future__ import annotations

import itertools
import json
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from jobloom.core import lifecycle
from jobloom.core.options import Backoff
from jobloom.core.states import (
    ACTIVE_STATES,
    ALL_STATES,
    ALLOWED,
    BY_NAME,
    FINISHED_STATES,
    TRANSITIONS,
    can_transition,
    transition,
)
from jobloom.store import open_store
from jobloom.store.base import Store, Tx
from jobloom.store.sql import load_queries
from jobloom.store.sqlite.store import sqlite_path

DIALECTS = ["sqlite", "postgres"]
_COMMENT = re.compile(r"--[^\n]*")
_UPDATE = re.compile(
    r"\bUPDATE\s+jobloom_jobs\b(?:\s+AS\s+\w+)?\s+SET\b(?P<set>.*?)(?=\bFROM\b|\bWHERE\b|\bRETURNING\b|$)", re.S | re.I
)
_SETS_STATE = re.compile(r"(?:^|,)\s*(?:\w+\.)?state\s*=", re.I)
_PARAM = re.compile(r"(?<![:\w]):(\w+)")


def state_changing_statements(dialect: str) -> dict[str, str]:
    """Every named statement of the dialect that sets ``state`` on ``jobloom_jobs``."""
    found = {}
    for name, sql in load_queries(dialect).items():
        text = _COMMENT.sub("", sql)
        if any(_SETS_STATE.search(m["set"]) for m in _UPDATE.finditer(text)):
            found[name] = text
    return found


# -- drivers: how jobloom's code calls each statement --------------------------------------------------

NOW = time.time()
BINDING = "StateMachine"
RUN = "run-1"
STEP = "approved"
EXPIRY = 1000.0  # every seeded job expires this long after NOW: only expire_due is driven past it
BASE = {"now": NOW, "reason": "test", "worker": "w1", "lease_expires": NOW + 30, "result": None, "error": None,
        "run_at": NOW, "finished_at": NOW, "refund": 0, "payload": None, "run_id": RUN, "limit": 1000, "step": STEP,
        "started_at": NOW - 5}  # the seeded running jobs' claim: w1, started 5 s ago (the attempt's fence)


@dataclass(frozen=True)
class Job:
    id: int
    state: str
    attempt: int
    node: str


Driver = Callable[[Tx, str, list[Job], dict[str, Any]], Any]


async def each_job(tx: Tx, name: str, jobs: list[Job], variant: dict[str, Any]) -> None:
    """By job id (and its attempt, which fences reports), for every seeded job."""
    for job in jobs:
        await tx.execute(name, {**BASE, **variant, "id": job.id, "attempt": job.attempt})


async def each_node(tx: Tx, name: str, jobs: list[Job], variant: dict[str, Any]) -> None:
    """By (run, node), for every node of the seeded run."""
    for job in jobs:
        await tx.execute(name, {**BASE, **variant, "node": job.node})


async def whole_run(tx: Tx, name: str, jobs: list[Job], variant: dict[str, Any]) -> None:
    """Once for the seeded run."""
    await tx.execute(name, {**BASE, **variant})


async def due(tx: Tx, name: str, jobs: list[Job], variant: dict[str, Any]) -> None:
    """Once, for every job due now."""
    await tx.execute(name, {**BASE, **variant})


async def candidates(tx: Tx, name: str, jobs: list[Job], variant: dict[str, Any]) -> None:
    """The ids that the coordinator's candidate query read (and locked) in the same transaction: on
    PostgreSQL ``claim`` names no state and relies on that."""
    rows = await tx.fetch("candidates_by_priority", {"binding": BINDING, "full_keys": [], "limit": 1000})
    await tx.execute(name, {**BASE, **variant, "ids": [r[0] for r in rows]})


async def named(tx: Tx, name: str, jobs: list[Job], variant: dict[str, Any]) -> None:
    """As a wake-up names a job: each seeded job by id and binding (the seed's binding has no limits, and
    one job of it is queued)."""
    for job in jobs:
        await tx.execute(name, {**BASE, **variant, "id": job.id, "binding": BINDING})


async def as_rows(tx: Tx, name: str, jobs: list[Job], variant: dict[str, Any]) -> None:
    """A set-based twin: every seeded job as one row of :rows."""
    rows = [{**BASE, **variant, "id": job.id, "attempt": job.attempt} for job in jobs]
    await tx.execute(name, {"rows": json.dumps(rows)})


def targets(name: str) -> list[dict[str, Any]]:
    """One variant per target state, for a statement that takes its target as :state."""
    return [{"state": s} for s in sorted(transition(name).targets)]


@dataclass(frozen=True)
class Drive:
    driver: Driver
    variants: list[dict[str, Any]] = field(default_factory=lambda: [{}])


DRIVERS: dict[str, Drive] = {
    "promote_due": Drive(due),
    "expire_due": Drive(due, [{"now": NOW + 2 * EXPIRY}]),  # past every seeded job's expiry
    "claim": Drive(candidates),
    "claim__with_events": Drive(candidates),
    "claim_batch": Drive(candidates, [{"batch": 1}]),
    "claim_direct": Drive(named),
    "claim_direct__with_events": Drive(named),
    "claim_direct__asynchronous": Drive(named),
    "finish_attempt": Drive(each_job, targets("finish_attempt")),
    "finish_attempt__bulk": Drive(as_rows, targets("finish_attempt")),
    "release": Drive(each_job),
    "fail_attempt": Drive(each_job),
    "snooze_attempt": Drive(each_job),
    "cancel_now": Drive(each_job),
    "retry_now": Drive(each_job),
    "retry_now__bulk": Drive(as_rows),
    "queue_waiting": Drive(each_node),
    "skip_waiting": Drive(each_node),
    "release_dependant": Drive(each_job),
    "skip_dependant": Drive(each_job),
    "fail_unstarted": Drive(whole_run),
    "cancel_unstarted": Drive(whole_run),
    "wake_suspended": Drive(each_job),
    "wake_node": Drive(each_node),
    "wake_waiting_for": Drive(each_job),
    "reset_node": Drive(each_job, targets("reset_node")),
    "hold_node": Drive(each_job),
    "settle_node": Drive(each_node, targets("settle_node")),
}


# -- the checks ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_statement_that_changes_a_state_has_a_driver_and_a_transition(dialect: str) -> None:
    found = state_changing_statements(dialect)
    assert "finish_attempt" in found and "claim" in found  # the parser sees the statements
    assert not set(found) - set(DRIVERS), f"{dialect}: statements that change a job's state without a driver here"
    missing = [name for name in found if name.split("__")[0] not in BY_NAME]
    assert not missing, f"{dialect}: statements that change a job's state without a transition in states.py"
    # a driver or a transition for a statement that no longer exists is stale
    all_found = set(found) | set(state_changing_statements("postgres")) | set(state_changing_statements("sqlite"))
    assert set(DRIVERS) <= all_found and set(BY_NAME) <= {n.split("__")[0] for n in found}


def test_the_machine_is_the_union_of_its_transitions() -> None:
    assert set(ALLOWED) == set(ALL_STATES)
    assert ALLOWED["succeeded"] == frozenset()  # a success is final
    for t in TRANSITIONS:
        assert t.sources and t.targets and t.sources | t.targets <= set(ALL_STATES), t
        assert all(can_transition(s, d) for s, d in itertools.product(t.sources, t.targets)), t
    assert not can_transition("succeeded", "queued") and not can_transition("queued", "succeeded")


def test_the_outcomes_of_an_attempt_stay_within_finish_attempt() -> None:
    """``finish_attempt`` takes its target from ``lifecycle.next_state``: every outcome, for every
    delivery and attempt budget, must lead where the transition allows."""
    seen = set()
    for outcome, delivery, cancel, attempt, expires_at in itertools.product(
        sorted(lifecycle.OUTCOMES), ["at_least_once", "at_most_once"], [False, True], [1, 3], [None, NOW + 1]
    ):
        nxt = lifecycle.next_state(outcome, now=NOW, attempt=attempt, retries_from=0, max_attempts=3,
                                   delivery=delivery, cancel_requested=cancel, backoff=Backoff.fixed(1),
                                   expires_at=expires_at)
        seen.add(nxt.state)
    assert seen == transition("finish_attempt").targets


class Raw:
    """A plain connection of the test's own, to seed jobs and read their states between statements."""

    def __init__(self, url: str) -> None:
        if url.startswith("sqlite:"):
            self.conn: Any = sqlite3.connect(sqlite_path(url), isolation_level=None)
        else:
            import psycopg

            self.conn = psycopg.connect(url, autocommit=True)

    def run(self, sql: str) -> list[tuple[Any, ...]]:
        cur = self.conn.execute(sql)
        return list(cur.fetchall()) if cur.description is not None else []

    def seed(self) -> list[Job]:
        """One job in every state, all nodes of one run, each with a stored step result."""
        self.run("DELETE FROM jobloom_jobs")
        self.run("DELETE FROM jobloom_steps")
        self.run("DELETE FROM jobloom_bindings")
        self.run(f"INSERT INTO jobloom_bindings (binding, updated_at) VALUES ('{BINDING}', {NOW!r})")  # no limits
        for state in ALL_STATES:
            started = state == "running" or state in FINISHED_STATES - {"skipped"}
            values = {
                "binding": f"'{BINDING}'", "state": f"'{state}'", "payload": "'{}'", "priority": "0",
                "run_at": repr(NOW - 10), "attempt": "1" if started else "0", "max_attempts": "3",
                "delivery": "'at_least_once'", "created_at": repr(NOW - 20), "run_id": f"'{RUN}'",
                "node": f"'{state}'", "lease_owner": "'w1'" if state == "running" else "NULL",
                "lease_expires": repr(NOW + 30) if state == "running" else "NULL",
                "started_at": repr(NOW - 5) if started else "NULL",
                "finished_at": repr(NOW - 1) if state not in ACTIVE_STATES else "NULL",
                "expires_at": repr(NOW + EXPIRY),
            }
            self.run(f"INSERT INTO jobloom_jobs ({', '.join(values)}) VALUES ({', '.join(values.values())})")
        self.run(f"INSERT INTO jobloom_steps (job_id, name, result, created_at) "
                 f"SELECT id, '{STEP}', NULL, {NOW!r} FROM jobloom_jobs")
        return [Job(*row) for row in self.run("SELECT id, state, attempt, node FROM jobloom_jobs ORDER BY id")]

    def states(self) -> dict[int, str]:
        return {int(i): str(s) for i, s in self.run("SELECT id, state FROM jobloom_jobs")}

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[tuple[Store, Raw]]:
    s = open_store(store_url)
    await s.open()
    await s.migrate()
    raw = Raw(store_url)
    try:
        yield s, raw
    finally:
        raw.close()
        await s.close()


async def test_every_state_change_is_an_allowed_transition(store: tuple[Store, Raw]) -> None:
    s, raw = store
    found = state_changing_statements(s.dialect)
    wrong: list[str] = []
    for name in sorted(found):
        drive, allowed = DRIVERS[name], transition(name)
        observed: set[tuple[str, str]] = set()
        for variant in drive.variants:
            jobs = raw.seed()
            assert sorted(j.state for j in jobs) == sorted(ALL_STATES)
            before = raw.states()

            async def work(tx: Tx, drive: Drive = drive, name: str = name, jobs: list[Job] = jobs,
                           variant: dict[str, Any] = variant) -> None:
                await drive.driver(tx, name, jobs, variant)

            await s.transact(work)
            after = raw.states()
            assert set(after) == set(before), f"{name} inserted or deleted jobs"
            for job_id, old in before.items():
                new = after[job_id]
                if new == old:
                    continue
                observed.add((old, new))
                if old not in allowed.sources or new not in allowed.targets or not can_transition(old, new):
                    wrong.append(f"{name}{variant or ''}: {old} -> {new}")
        declared = set(itertools.product(allowed.sources, allowed.targets))
        never = declared - observed
        assert not never, f"{name}: states.py allows moves the statement never makes: {sorted(never)}"
    assert not wrong, "moves that states.py does not allow:\n" + "\n".join(wrong)
